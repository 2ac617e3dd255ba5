//! Writing the SM's state files (`guid2lid`, `guid2mkey`, `neighbors`, the unhealthy
//! ports) so that a crash or a full disk never leaves one half written.

use std::io::Write;
use std::path::Path;

/// Replaces the file at `path` with `text`: a new temporary file beside it, named for the
/// process (two savers never take each other's), created exclusively (a link planted
/// there is removed, not followed), written and synced, renamed over the file, and the
/// directory synced.
pub fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    // A temporary file left by a crash is ours to replace.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Ok(d) = std::fs::File::open(dir.unwrap_or(Path::new("."))) {
        // Not every filesystem syncs a directory; the rename is done either way.
        let _ = d.sync_all();
    }
    Ok(())
}

/// A number as state files write it: `0x` hexadecimal or decimal.
pub(crate) fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}
