//! `bnn diagnose`: convergence diagnostics (R-hat, ESS, MCSE, chain-wise cR-hat) of a run's draws
//! or of any long-format draws CSV.

use anyhow::{bail, Context, Result};
use bnn_diagnostics::{read_long_draws_csv, summarize_all, ParameterSummary};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};

/// R-hat above this suggests the chains have not mixed (Vehtari et al. 2021).
const RHAT_WARN: f64 = 1.01;
/// Bulk or tail ESS below this makes quantile and interval estimates unreliable.
const ESS_WARN: f64 = 400.0;

#[derive(Args, Debug)]
pub struct DiagnoseArgs {
    /// A run directory written by `bnn sample` (its draws_chain_<c>.csv files).
    pub run_dir: Option<PathBuf>,
    /// Instead: draws from any source in long format (columns chain,draw,<param>...).
    #[arg(long)]
    pub draws_csv: Option<PathBuf>,
    /// Write the diagnostics as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Rows of the table to print (worst R-hat first); the JSON always has every parameter.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
}

/// Chain-wise R-hat above this: a chain has not settled within itself.
const CRHAT_WARN: f64 = 1.1;

/// Names and `[param][chain][draw]` values, plus the sampler statistics of a run directory.
struct Draws {
    names: Vec<String>,
    values: Vec<Vec<Vec<f64>>>,
    stats: Option<RunStats>,
}

/// Sampler warnings of a run directory's draws.
#[derive(Default)]
struct RunStats {
    divergences: usize,
    depth_hits: usize,
    max_depth: Option<usize>,
    draws: usize,
    truncated_to: Option<usize>,
}

/// Reads `draws_chain_<c>.csv` (CmdStan-style: statistics columns ending in `__`, then parameters).
fn read_run_dir(dir: &Path) -> Result<Draws> {
    let mut files = Vec::new();
    for chain in 0.. {
        let path = dir.join(format!("draws_chain_{chain}.csv"));
        if !path.is_file() {
            break;
        }
        files.push(path);
    }
    if files.is_empty() {
        bail!("{} has no draws_chain_0.csv: is it a `bnn sample` output directory?", dir.display());
    }
    let mut names: Vec<String> = Vec::new();
    let mut values: Vec<Vec<Vec<f64>>> = Vec::new();
    let max_depth = crate::run_dir::RunDir::new(dir).load_config().ok().filter(|c| c.sampler.algorithm == crate::run_config::Algorithm::Nuts).map(|c| c.sampler.max_depth);
    let mut stats = RunStats { max_depth, ..RunStats::default() };
    for (chain, path) in files.iter().enumerate() {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().map(|h| h.split(',').collect()).unwrap_or_default();
        // Keep lp__ as a parameter-like quantity; drop the other sampler statistics.
        let keep: Vec<usize> = (0..header.len()).filter(|&i| !header[i].ends_with("__") || header[i] == "lp__").collect();
        let divergent = header.iter().position(|h| *h == "divergent__");
        let depth = header.iter().position(|h| *h == "treedepth__");
        let chain_names: Vec<String> = keep.iter().map(|&i| header[i].to_string()).collect();
        if chain == 0 {
            names = chain_names;
            values = vec![vec![Vec::new(); files.len()]; names.len()];
        } else if chain_names != names {
            bail!("{}: columns differ from chain 0's", path.display());
        }
        for (line_no, line) in lines.enumerate() {
            let cells: Vec<&str> = line.split(',').collect();
            if cells.len() != header.len() {
                bail!("{} line {}: expected {} fields, found {}", path.display(), line_no + 2, header.len(), cells.len());
            }
            for (p, &i) in keep.iter().enumerate() {
                let v: f64 = cells[i].trim().parse().with_context(|| {
                    format!("{} line {}, column {} ({}): '{}' is not a number", path.display(), line_no + 2, i + 1, header[i], cells[i])
                })?;
                values[p][chain].push(v);
            }
            stats.draws += 1;
            stats.divergences += usize::from(divergent.is_some_and(|i| cells[i].trim() != "0"));
            if let (Some(i), Some(max)) = (depth, stats.max_depth) {
                stats.depth_hits += usize::from(cells[i].trim().parse::<usize>().is_ok_and(|d| d >= max));
            }
        }
    }
    // Chains stopped early (LPPD convergence) or a run still in progress have unequal lengths:
    // the diagnostics use the common prefix.
    let shortest = values[0].iter().map(Vec::len).min().unwrap_or(0);
    if values[0].iter().any(|c| c.len() != shortest) {
        for parameter in &mut values {
            for chain in parameter.iter_mut() {
                chain.truncate(shortest);
            }
        }
        stats.truncated_to = Some(shortest);
    }
    Ok(Draws { names, values, stats: Some(stats) })
}

/// Summary of all scalars of one tensor (e.g. `layer1_weight`): the per-layer view of
/// Sommer et al. 2024, where weights and biases are reported apart.
#[derive(serde::Serialize)]
struct GroupSummary {
    name: String,
    count: usize,
    rhat_mean: f64,
    rhat_median: f64,
    rhat_max: f64,
    crhat_mean: f64,
    crhat_max: f64,
    ess_bulk_min: f64,
    ess_bulk_median: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { 0.5 * (v[m - 1] + v[m]) }
}

fn mean_max(v: &[f64]) -> (f64, f64) {
    let finite: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if finite.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    (finite.iter().sum::<f64>() / finite.len() as f64, finite.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

/// Groups scalars by tensor: the CmdStan name up to its first index (`layer0_weight.3.1`).
fn group_summaries(names: &[String], summaries: &[ParameterSummary]) -> Vec<GroupSummary> {
    let mut order: Vec<String> = Vec::new();
    for name in names {
        let base = name.split('.').next().unwrap_or(name).to_string();
        if !order.contains(&base) {
            order.push(base);
        }
    }
    order
        .into_iter()
        .map(|base| {
            let members: Vec<&ParameterSummary> = names
                .iter()
                .zip(summaries)
                .filter(|(n, _)| n.split('.').next() == Some(base.as_str()))
                .map(|(_, s)| s)
                .collect();
            let rhats: Vec<f64> = members.iter().map(|s| s.rhat).collect();
            let crhats: Vec<f64> = members.iter().flat_map(|s| s.crhat.iter().copied()).collect();
            let ess: Vec<f64> = members.iter().map(|s| s.ess_bulk).collect();
            let (rhat_mean, rhat_max) = mean_max(&rhats);
            let (crhat_mean, crhat_max) = mean_max(&crhats);
            GroupSummary {
                name: base,
                count: members.len(),
                rhat_mean,
                rhat_median: median(rhats),
                rhat_max,
                crhat_mean,
                crhat_max,
                ess_bulk_min: ess.iter().copied().fold(f64::INFINITY, f64::min),
                ess_bulk_median: median(ess),
            }
        })
        .collect()
}

fn fmt(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v:.3}")
    }
}

/// Diagnostics of a run directory, printed (top 10) and written as JSON (what `bnn run` does).
pub fn write_run_diagnostics(dir: &Path, json: &Path) -> Result<()> {
    run(DiagnoseArgs { run_dir: Some(dir.to_path_buf()), draws_csv: None, json: Some(json.to_path_buf()), top: 10 })
}

pub fn run(args: DiagnoseArgs) -> Result<()> {
    let draws = match (&args.run_dir, &args.draws_csv) {
        (Some(dir), None) => read_run_dir(dir)?,
        (None, Some(path)) => {
            let long = read_long_draws_csv(path).with_context(|| format!("reading {}", path.display()))?;
            Draws { names: long.parameter_names.clone(), values: long.draws, stats: None }
        }
        _ => bail!("give either a run directory or --draws-csv <file>"),
    };
    if draws.values.first().and_then(|p| p.first()).is_none_or(|c| c.len() < 4) {
        bail!("at least 4 draws per chain are needed for R-hat and ESS");
    }
    if let Some(n) = draws.stats.as_ref().and_then(|s| s.truncated_to) {
        println!("note: chains have unequal lengths (early stopping or an unfinished run); using the first {n} draws of each");
    }
    let summaries: Vec<ParameterSummary> = summarize_all(&draws.values);
    let mut order: Vec<usize> = (0..summaries.len()).collect();
    order.sort_by(|&a, &b| summaries[b].rhat.total_cmp(&summaries[a].rhat));

    println!("{} parameters, {} chains x {} draws", draws.names.len(), draws.values[0].len(), draws.values[0][0].len());
    println!("{:<28} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>10}", "parameter", "mean", "sd", "R-hat", "ESS bulk", "ESS tail", "MCSE", "cR-hat avg");
    for &i in order.iter().take(args.top) {
        let s = &summaries[i];
        let crhat = s.crhat.iter().sum::<f64>() / s.crhat.len() as f64;
        println!(
            "{:<28} {:>9} {:>9} {:>7} {:>9.0} {:>9.0} {:>9} {:>10}",
            draws.names[i], fmt(s.mean), fmt(s.sd), fmt(s.rhat), s.ess_bulk, s.ess_tail, fmt(s.mcse_mean), fmt(crhat)
        );
    }
    let groups = group_summaries(&draws.names, &summaries);
    println!("\nper tensor (weights and biases of each layer apart):");
    println!("{:<20} {:>6} {:>11} {:>11} {:>9} {:>11} {:>10} {:>10}", "tensor", "count", "R-hat mean", "R-hat med", "R-hat max", "cR-hat mean", "cR-hat max", "ESS min");
    for g in &groups {
        println!(
            "{:<20} {:>6} {:>11} {:>11} {:>9} {:>11} {:>10} {:>10.0}",
            g.name, g.count, fmt(g.rhat_mean), fmt(g.rhat_median), fmt(g.rhat_max), fmt(g.crhat_mean), fmt(g.crhat_max), g.ess_bulk_min
        );
    }
    // Function-space R-hat (computed by `bnn evaluate` from the test predictions), where the
    // chains of a BNN can agree although their weights never will.
    let function_space = args.run_dir.as_ref().and_then(|dir| std::fs::read_to_string(dir.join("summary.json")).ok()).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()).map(|s| {
        json!({
            "rhat_test_loglik": s["rhat_test_loglik"], "rhat_test_rmse": s["rhat_test_rmse"],
            "pointwise_predictive_rhat_max": s["pointwise_predictive_rhat_max"], "pointwise_predictive_rhat_mean": s["pointwise_predictive_rhat_mean"],
        })
    });
    if let Some(f) = &function_space {
        let g = |k: &str| f[k].as_f64().map_or("n/a".into(), fmt);
        println!(
            "\nfunction space: split R-hat of the test log-likelihood {}, of the test RMSE {}; pointwise predictive R-hat max {} (mean {})",
            g("rhat_test_loglik"), g("rhat_test_rmse"), g("pointwise_predictive_rhat_max"), g("pointwise_predictive_rhat_mean")
        );
    }
    let high_rhat = summaries.iter().filter(|s| s.rhat > RHAT_WARN).count();
    let low_ess = summaries.iter().filter(|s| s.ess_bulk.min(s.ess_tail) < ESS_WARN).count();
    if high_rhat > 0 {
        println!("warning: {high_rhat} of {} parameters have R-hat > {RHAT_WARN} (BNN weights often do, through symmetries; check function-space R-hat too)", summaries.len());
    }
    if low_ess > 0 {
        println!("warning: {low_ess} parameters have bulk or tail ESS < {ESS_WARN}");
    }
    let high_crhat = summaries.iter().filter(|s| s.crhat.iter().any(|&r| r > CRHAT_WARN)).count();
    if high_crhat > 0 {
        println!("warning: {high_crhat} parameters have a chain-wise cR-hat > {CRHAT_WARN} in some chain (that chain has not settled within itself)");
    }
    let (divergences, depth_hits, n_draws) = draws.stats.as_ref().map_or((0, 0, 0), |s| (s.divergences, s.depth_hits, s.draws));
    if divergences > 0 {
        println!("warning: {divergences} of {n_draws} draws ended in a divergence (raise --target-accept or use a smooth activation)");
    }
    if depth_hits > 0 {
        println!(
            "warning: {depth_hits} of {n_draws} draws hit the maximum tree depth {} (trajectories were cut short; common for BNN posteriors)",
            draws.stats.as_ref().and_then(|s| s.max_depth).unwrap_or(0)
        );
    }
    if let Some(path) = args.json {
        let parameters: serde_json::Map<String, serde_json::Value> = draws
            .names
            .iter()
            .zip(&summaries)
            .map(|(name, s)| {
                (name.clone(), json!({
                    "mean": s.mean, "sd": s.sd, "rhat": s.rhat, "rhat_split": s.rhat_split,
                    "ess_bulk": s.ess_bulk, "ess_tail": s.ess_tail, "mcse_mean": s.mcse_mean,
                    "mcse_sd": s.mcse_sd, "crhat": s.crhat,
                }))
            })
            .collect();
        let report = json!({
            "parameters": parameters,
            "groups": groups,
            "function_space": function_space,
            "warnings": { "rhat_above_1_01": high_rhat, "ess_below_400": low_ess, "crhat_above_1_1": high_crhat,
                          "divergences": divergences, "max_tree_depth_hits": depth_hits, "draws": n_draws },
        });
        std::fs::write(&path, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
