//! One module per `jtap` subcommand.

pub mod agent;
pub mod attach;
pub mod btrace;
pub mod bytecode;
pub mod classes;
pub mod convert;
pub mod diff;
pub mod heap;
pub mod hprof;
pub mod inspect;
pub mod jimage;
pub mod mcp;
pub mod profile;
pub mod ps;
pub mod sites;
pub mod thread_dump;
pub mod threads;
pub mod top;
pub mod trace;
