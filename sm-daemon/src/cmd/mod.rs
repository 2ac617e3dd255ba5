//! One module per `ibsm` subcommand: clap arguments and a `run` function; `analysis` and
//! `svg` serve both `route` and `analyze`; `dumps` is what `run` writes.

pub(crate) mod analysis;
pub(crate) mod analyze;
pub(crate) mod decode;
pub(crate) mod dumps;
pub(crate) mod events;
pub(crate) mod generate;
pub(crate) mod route;
pub(crate) mod run;
pub(crate) mod soak;
pub(crate) mod status;
pub(crate) mod svg;
