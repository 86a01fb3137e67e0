//! `bnn evaluate <run dir>`: test metrics of the pooled chains, of each chain, of the deep
//! ensemble and of a linear model; coverage, calibration and function-space R-hat, into
//! `summary.json`, and printed.

use crate::progress_bars::ProgressBars;
use anyhow::Result;
use bnn_pipeline::{DeiMcmc, RunSummary};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct EvaluateArgs {
    /// A run directory with finished sampling.
    pub run_dir: PathBuf,
}

pub fn run(args: EvaluateArgs) -> Result<()> {
    let run = DeiMcmc::open(&args.run_dir)?.with_progress(ProgressBars::default());
    let evaluation = run.evaluate_pass(&run.posterior_predictive()?)?;
    print_report(&evaluation.summary);
    Ok(())
}

/// The metrics of a run, a few lines on stdout.
pub fn print_report(s: &RunSummary) {
    let f = |v: Option<f64>| {
        v.filter(|v| !v.is_nan())
            .map_or("n/a".to_string(), |v| format!("{v:.4}"))
    };
    println!(
        "{} ({} train / {} test, {} parameters, {} chains)",
        s.dataset, s.n_train, s.n_test, s.n_params, s.chains
    );
    println!(
        "  posterior:      RMSE {}  LPPD {}  NLL {}",
        f(Some(s.rmse)),
        f(Some(s.lppd)),
        f(Some(s.nll))
    );
    println!(
        "  deep ensemble:  RMSE {}  LPPD {}",
        f(s.de_rmse),
        f(s.de_lppd)
    );
    println!(
        "  linear model:   RMSE {}  LPPD {}",
        f(s.lm_rmse),
        f(s.lm_lppd)
    );
    for t in &s.per_target {
        println!(
            "  target {:<8} RMSE {} ({} in its units)  LPPD {}  coverage 90% {}  (deep ensemble: RMSE {}  LPPD {})",
            t.target,
            f(Some(t.rmse)),
            f(Some(t.rmse_original_units)),
            f(Some(t.lppd)),
            f(t.coverage_90),
            f(t.de_rmse),
            f(t.de_lppd)
        );
    }
    println!(
        "  coverage 50/75/90/95%: {} / {} / {} / {}, calibration error {}",
        f(s.coverage_50),
        f(s.coverage_75),
        f(s.coverage_90),
        f(s.coverage_95),
        f(s.calibration_error)
    );
    println!(
        "  divergences {}, mean accept {}, function-space R-hat: test log-lik {}, test RMSE {}, pointwise max {}",
        s.divergences,
        f(Some(s.mean_accept_stat)),
        f(Some(s.rhat_test_loglik)),
        f(Some(s.rhat_test_rmse)),
        f(Some(s.pointwise_predictive_rhat_max))
    );
    if !s.chains_worse_than_linear.is_empty() {
        println!("  WARNING: chains {:?} predict worse than the linear model (kept in the pool; inspect them)", s.chains_worse_than_linear);
    }
}
