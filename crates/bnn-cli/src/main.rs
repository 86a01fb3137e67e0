//! `bnn`: sampling-based inference for Bayesian neural networks from the command line.

mod commands;
mod draw_files;
mod model_args;
mod prepared_data;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "bnn", version, about = "Sampling-based inference for Bayesian neural networks (Burn)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Datasets: list the named ones, describe any.
    #[command(subcommand)]
    Data(commands::data::DataCommand),
    /// Models: parameter counts and layouts.
    #[command(subcommand)]
    Model(commands::model::ModelCommand),
    /// Value+gradient microseconds per chain of the benchmark posteriors, as JSON.
    Bench(commands::bench::BenchArgs),
    /// Convergence diagnostics of a run directory or of a long-format draws CSV.
    Diagnose(commands::diagnose::DiagnoseArgs),
    /// Sample a BNN posterior (NUTS, HMC or random-walk Metropolis) from a cold start.
    Sample(commands::sample::SampleArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Data(c) => commands::data::run(c),
        Command::Model(c) => commands::model::run(c),
        Command::Bench(a) => commands::bench::run(a),
        Command::Sample(a) => commands::sample::run(a),
        Command::Diagnose(a) => commands::diagnose::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
