//! `bnn diagnose`: convergence diagnostics (R-hat, ESS, MCSE, chain-wise cR-hat) of a run's draws
//! or of any long-format draws CSV, printed and optionally written as JSON.

use anyhow::{bail, Result};
use bnn_pipeline::{RunDiagnostics, CRHAT_WARN, ESS_WARN, RHAT_WARN};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DiagnoseArgs {
    /// A run directory written by `bnn sample` (its draws_chain_<c>.csv files).
    pub run_dir: Option<PathBuf>,
    /// Instead: draws from any source in long format (columns chain,draw,<param>...).
    #[arg(long)]
    pub draws_csv: Option<PathBuf>,
    /// Write the diagnostics as JSON here (R-hat +∞ as "inf", undefined values as null).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Rows of the table to print (worst R-hat first); the JSON always has every parameter.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
}

fn fmt(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v:.3}")
    }
}

pub fn run(args: DiagnoseArgs) -> Result<()> {
    let diagnostics = match (&args.run_dir, &args.draws_csv) {
        (Some(dir), None) => RunDiagnostics::of_run_dir(dir)?,
        (None, Some(path)) => RunDiagnostics::of_long_draws_csv(path)?,
        _ => bail!("give either a run directory or --draws-csv <file>"),
    };
    print(&diagnostics, args.top);
    if let Some(path) = args.json {
        diagnostics.write_json(&path)?;
    }
    Ok(())
}

/// The table (the `top` worst parameters by R-hat), the per-tensor view and the warnings.
pub fn print(d: &RunDiagnostics, top: usize) {
    if let Some(partial) = &d.partial {
        println!("note: {partial}");
    }
    if let Some(n) = d.truncated_to {
        let reason = d
            .unequal_lengths
            .as_deref()
            .unwrap_or("no checkpoints say why");
        println!("note: chains have unequal lengths ({reason}); using the first {n} draws of each");
    }
    println!(
        "{} parameters, {} chains x {} draws",
        d.names.len(),
        d.chains,
        d.draws
    );
    println!(
        "{:<28} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>10}",
        "parameter", "mean", "sd", "R-hat", "ESS bulk", "ESS tail", "MCSE", "cR-hat avg"
    );
    for i in d.worst_first().into_iter().take(top) {
        let s = &d.summaries[i];
        let crhat = s.crhat.iter().sum::<f64>() / s.crhat.len() as f64;
        println!(
            "{:<28} {:>9} {:>9} {:>7} {:>9.0} {:>9.0} {:>9} {:>10}",
            d.names[i],
            fmt(s.mean),
            fmt(s.sd),
            fmt(s.rhat),
            s.ess_bulk,
            s.ess_tail,
            fmt(s.mcse_mean),
            fmt(crhat)
        );
    }
    println!("\nper tensor (weights and biases of each layer apart):");
    println!(
        "{:<20} {:>6} {:>11} {:>11} {:>9} {:>11} {:>10} {:>10}",
        "tensor",
        "count",
        "R-hat mean",
        "R-hat med",
        "R-hat max",
        "cR-hat mean",
        "cR-hat max",
        "ESS min"
    );
    for g in &d.groups {
        println!(
            "{:<20} {:>6} {:>11} {:>11} {:>9} {:>11} {:>10} {:>10.0}",
            g.name,
            g.count,
            fmt(g.rhat_mean),
            fmt(g.rhat_median),
            fmt(g.rhat_max),
            fmt(g.crhat_mean),
            fmt(g.crhat_max),
            g.ess_bulk_min
        );
    }
    // Function-space R-hat (computed by `bnn evaluate` from the test predictions), where the
    // chains of a BNN can agree although their weights never will.
    if let Some(f) = &d.function_space {
        let g = |k: &str| {
            bnn_diagnostics::non_finite_from_json(&f[k])
                .filter(|v| !v.is_nan())
                .map_or("n/a".into(), fmt)
        };
        println!(
            "\nfunction space: split R-hat of the test log-likelihood {}, of the test RMSE {}; pointwise predictive R-hat max {} (mean {})",
            g("rhat_test_loglik"),
            g("rhat_test_rmse"),
            g("pointwise_predictive_rhat_max"),
            g("pointwise_predictive_rhat_mean")
        );
    }
    if !d.chain_stationarity.is_empty() {
        println!("\nper chain: warmup iterations (how it ended) | divergent draws | acceptance first → last tenth | verdict");
        for c in &d.chain_stationarity {
            let checks = match c.warmup_checks.len() {
                0 => String::new(),
                n => {
                    let outcomes: Vec<String> = c
                        .warmup_checks
                        .iter()
                        .map(|k| format!("{:?}", k.outcome).to_lowercase())
                        .collect();
                    format!(
                        ", {n} check{}: {}",
                        if n == 1 { "" } else { "s" },
                        outcomes.join(" → ")
                    )
                }
            };
            println!(
                "  chain {:>3}: {} ({}{checks}) | {} of {} | {:.2} → {:.2} | {}",
                c.chain,
                c.warmup_iterations,
                c.warmup_ended,
                c.divergent_draws,
                c.draws,
                c.accept_first_tenth,
                c.accept_last_tenth,
                c.verdict
            );
        }
    }
    for chain in &d.stuck_chains {
        println!("warning: chain {chain} did not move in its kept draws (every parameter kept one value: the chain is stuck; its R-hat is inf)");
    }
    if d.rhat_above_1_01 > 0 {
        println!(
            "warning: {} of {} parameters have R-hat > {RHAT_WARN} (BNN weights often do, through symmetries; check function-space R-hat too)",
            d.rhat_above_1_01,
            d.summaries.len()
        );
    }
    if d.ess_below_400 > 0 {
        println!(
            "warning: {} parameters have bulk or tail ESS < {ESS_WARN}",
            d.ess_below_400
        );
    }
    if d.crhat_above_1_1 > 0 {
        println!("warning: {} parameters have a chain-wise cR-hat > {CRHAT_WARN} in some chain (that chain has not settled within itself)", d.crhat_above_1_1);
    }
    let sampler = d.sampler.clone().unwrap_or_default();
    if sampler.divergences > 0 {
        println!("warning: {} of {} draws ended in a divergence (raise --target-accept or use a smooth activation)", sampler.divergences, sampler.draws);
    }
    if let Some(note) = sampler.activation_note() {
        println!("note: {note}");
    }
    if let Some(drift) = sampler.drift.filter(|d| d.warns()) {
        println!(
            "warning: the mean acceptance fell from {:.2} in the first tenth of the draws to {:.2} in the last (divergent draws {} → {} of {}): the chains moved after warmup to where the step size is too large; a longer --warmup or a higher --target-accept reduces the divergences",
            drift.accept_first_tenth, drift.accept_last_tenth, drift.divergent_first_tenth, drift.divergent_last_tenth, drift.draws_per_tenth
        );
    }
    if sampler.max_tree_depth_hits > 0 {
        println!(
            "warning: {} of {} draws hit the maximum tree depth {} (trajectories were cut short; common for BNN posteriors)",
            sampler.max_tree_depth_hits,
            sampler.draws,
            sampler.max_depth.unwrap_or(0)
        );
    }
}
