//! `bnn`: sampling-based inference for Bayesian neural networks from the command line.
#![recursion_limit = "256"]

mod commands;
mod draw_reader;
mod draw_store;
mod early_stop;
mod linear_baseline;
mod model_args;
mod pipeline;
mod posterior_pass;
mod prepared_data;
mod progress;
mod run_config;
mod run_dir;

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
    /// Train the deep ensemble (Adam/AdamW, full batch or minibatch with early stopping) and save it.
    Train(commands::train::TrainArgs),
    /// Sample the posterior from the ensemble (DEI-MCMC), one network or cold; or --resume a run.
    Sample(commands::sample::SampleArgs),
    /// Posterior predictive mean, sd and intervals per test point of a run.
    Predict(commands::predict::PredictArgs),
    /// Test metrics of a run against the deep ensemble and a linear model, into summary.json.
    Evaluate(commands::evaluate::EvaluateArgs),
    /// Train, sample, predict, evaluate and diagnose in one go.
    Run(commands::run::RunArgs),
    /// SVG plots of a run: traces, cumulative LPPD, calibration, predictive bands, warmup.
    Plot(commands::plot::PlotArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Ctrl-C stops sampling between draws; every chain is checkpointed before the exit.
    let _ = ctrlc::set_handler(|| pipeline::STOP.store(true, std::sync::atomic::Ordering::Relaxed));
    let result = match cli.command {
        Command::Data(c) => commands::data::run(c),
        Command::Model(c) => commands::model::run(c),
        Command::Bench(a) => commands::bench::run(a),
        Command::Sample(a) => commands::sample::run(a),
        Command::Diagnose(a) => commands::diagnose::run(a),
        Command::Train(a) => commands::train::run(a),
        Command::Predict(a) => commands::predict::run(a),
        Command::Evaluate(a) => commands::evaluate::run(a),
        Command::Run(a) => commands::run::run(a),
        Command::Plot(a) => commands::plot::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
