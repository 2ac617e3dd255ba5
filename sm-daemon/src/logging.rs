//! The log: tracing to standard error, or to the file `[log] file` names.

use std::fs::OpenOptions;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, anyhow};
use sm_core::config::LogConfig;
use tracing_subscriber::EnvFilter;

/// Starts the log at `[log] level`, unless `RUST_LOG` is set: then its directives win, so a
/// one-off debug run needs no configuration edit. Colour only on a terminal (and not with
/// `NO_COLOR`), never in a file, so a log read with `less` or `grep` has no escape codes.
/// `config` names the configuration file in errors.
pub(crate) fn init(cfg: &LogConfig, config: &Path) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => {
            EnvFilter::try_new(&spec).map_err(|e| anyhow!("RUST_LOG={spec}: {e}"))?
        }
        _ => EnvFilter::new(cfg.level.to_string()),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let started = match &cfg.file {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("{}: log.file {}", config.display(), path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(Mutex::new(file))
                .try_init()
        }
        None => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            builder
                .with_ansi(std::io::stderr().is_terminal() && !no_color)
                .with_writer(std::io::stderr)
                .try_init()
        }
    };
    started.map_err(|e| anyhow!("starting the log: {e}"))
}
