//! One module per `ibsm` subcommand: clap arguments and a `run` function.

pub(crate) mod decode;
pub(crate) mod generate;
pub(crate) mod run;
