//! The `ibsm` command line.

fn main() -> anyhow::Result<()> {
    Ok(())
}
