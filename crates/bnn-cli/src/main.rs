//! `bnn`: sampling-based inference for Bayesian neural networks from the command line.
#![recursion_limit = "256"]
// The doc comments of the argument structs are clap's `--help` text, written for a terminal
// (`<run dir>`, `[data]`), not rustdoc markup.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod commands;
mod fresh_out_dir;
mod model_args;
mod negative_values;
mod progress_bars;
mod run_flags;
mod shard_flag;
mod stop_signals;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "bnn",
    version,
    about = "Sampling-based inference for Bayesian neural networks (Burn)"
)]
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
    /// Reproduce a paper's experiments: `bnn study dinh` (Dinh et al. 2024, Table 2, Figures 1-3), `bnn study table3` (Sommer et al. 2024), `bnn study mile`, ...
    #[command(subcommand)]
    Study(commands::study::StudyCommand),
    /// Join the shard directories of a cluster run (`--shard i/n`) into one run, checked, then predict, evaluate and diagnose it.
    Merge(commands::merge::MergeArgs),
}

/// Every (sub)command takes `--step-size -1` as a value, so the range check can name the flag;
/// by default clap reads `-1` as an unknown short flag.
fn accepting_negative_numbers(command: clap::Command) -> clap::Command {
    command
        .allow_negative_numbers(true)
        .mut_subcommands(accepting_negative_numbers)
}

fn main() -> ExitCode {
    let command = accepting_negative_numbers(Cli::command());
    let args = negative_values::join_negative_values(std::env::args_os(), |long| {
        negative_values::takes_value(&command, long)
    });
    let matches = command.get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Ctrl-C, SIGTERM and SIGUSR1 stop sampling between draws; every chain is checkpointed
    // before the exit.
    let stop = stop_signals::install();
    // A mistyped or unsupported BNN_KERNEL_ISA is an error, not a silent fall back.
    if let Err(message) = bnn_kernels::simd::requested_level() {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    let fresh_out = match &cli.command {
        Command::Train(a) => Some(fresh_out_dir::FreshOutDir::new(&a.out)),
        Command::Sample(a) if a.resume.is_none() => Some(fresh_out_dir::FreshOutDir::new(&a.out)),
        Command::Run(a) => Some(fresh_out_dir::FreshOutDir::new(&a.out)),
        _ => None,
    };
    let result = match cli.command {
        Command::Data(c) => commands::data::run(c),
        Command::Model(c) => commands::model::run(c),
        Command::Bench(a) => commands::bench::run(a),
        Command::Sample(a) => commands::sample::run(a, stop),
        Command::Diagnose(a) => commands::diagnose::run(a),
        Command::Train(a) => commands::train::run(a, stop),
        Command::Predict(a) => commands::predict::run(a),
        Command::Evaluate(a) => commands::evaluate::run(a),
        Command::Run(a) => commands::run::run(a, stop),
        Command::Plot(a) => commands::plot::run(a),
        Command::Merge(a) => commands::merge::run(a),
        Command::Study(c) => commands::study::run(c, stop),
    };
    let result = match fresh_out {
        Some(out) => out.settle(result, is_interrupted),
        None => result,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_report(&e));
            match (is_interrupted(&e), stop_signals::scheduler_signal()) {
                (true, Some(signal)) => {
                    eprintln!("stopped by {signal} with everything finished saved; exit code {} asks the job script to requeue", stop_signals::EXIT_REQUEUE);
                    ExitCode::from(stop_signals::EXIT_REQUEUE)
                }
                _ => ExitCode::FAILURE,
            }
        }
    }
}

/// A stop by Ctrl-C or a scheduler's signal with everything finished saved (chains
/// checkpointed, trained members kept, a study's finished parts written).
fn is_interrupted(e: &anyhow::Error) -> bool {
    e.downcast_ref::<commands::Interrupted>().is_some()
        || e.downcast_ref::<bnn_pipeline::TrainingStopped>().is_some()
        || e.downcast_ref::<bnn_study::StudyInterrupted>().is_some()
}

/// The error and its causes joined by ": ", each cause once: a cause whose text the message
/// already ends with (an error that names its cause and also returns it as `source()`) is not
/// repeated.
fn error_report(error: &anyhow::Error) -> String {
    let mut message = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !message.ends_with(&text) {
            message = format!("{message}: {text}");
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Named(&'static str, Option<Box<Named>>);

    impl std::fmt::Display for Named {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Named {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn each_cause_is_reported_once() {
        let cause = Named("the model expects 1 target columns, the data has 2", None);
        let wrapped = Named(
            "data do not fit the model: the model expects 1 target columns, the data has 2",
            Some(Box::new(cause)),
        );
        let error = anyhow::Error::new(wrapped).context("building the posterior");
        assert_eq!(error_report(&error), "building the posterior: data do not fit the model: the model expects 1 target columns, the data has 2");
        let plain = anyhow::anyhow!("disk full").context("writing summary.json");
        assert_eq!(error_report(&plain), "writing summary.json: disk full");
    }
}
