//! One module per `jtap` subcommand.

pub mod attach;
pub mod ps;
