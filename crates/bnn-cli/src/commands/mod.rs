//! One module per `bnn` subcommand.

pub mod bench;
pub mod data;
pub mod diagnose;
pub mod model;
pub mod sample;
