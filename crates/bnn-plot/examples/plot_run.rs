//! Plots a run directory: `cargo run -p bnn-plot --example plot_run -- <run dir> [column …]`.

use bnn_plot::{plot_run, PlotOptions};
use std::path::PathBuf;

fn main() -> Result<(), bnn_plot::PlotError> {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: plot_run <run dir> [column …]");
        std::process::exit(2);
    };
    let options = PlotOptions {
        parameters: args.collect(),
        ..PlotOptions::default()
    };
    print!("{}", plot_run(&dir, &options)?);
    Ok(())
}
