//! One module per `bnn` subcommand.

pub mod bench;
pub mod data;
pub mod diagnose;
pub mod evaluate;
pub mod model;
pub mod plot;
pub mod predict;
pub mod run;
pub mod sample;
pub mod train;
