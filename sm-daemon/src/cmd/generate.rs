//! `ibsm gen`: topology generators. (Being built.)

/// Arguments of `ibsm gen`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("ibsm gen is not built yet")
}
