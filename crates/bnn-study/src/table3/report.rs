//! Table 3's two markdown tables, from the finished run directories: per dataset beside the
//! paper's numbers, and per run where the time went and how the chains behaved.

use super::{Budget, Table3Config};
use crate::dei_runs::{number, read_json};
use anyhow::{anyhow, Result};
use bnn_pipeline::{AcceptanceDrift, RunDir};
use std::path::Path;

/// One finished run: its summary, the budget its config had and what its draw files say per
/// chain.
pub struct Table3Run {
    pub dataset: String,
    pub split: u64,
    pub summary: serde_json::Value,
    pub budget: Budget,
    pub chains: Vec<ChainStats>,
}

/// Per-chain sampler statistics from `draws_chain_<k>.csv` (the Stan columns).
pub struct ChainStats {
    pub draws: usize,
    pub divergent: usize,
    pub accept: f64,
    pub step_size: f64,
    /// (acceptance statistic, divergent) per draw.
    pub transitions: Vec<(f64, bool)>,
}

/// The finished run in `dir`.
pub fn read_run(dataset: &str, split: u64, dir: &Path) -> Result<Table3Run> {
    let run_dir = RunDir::new(dir);
    let summary = read_json(&run_dir.summary()).ok_or(anyhow!("no readable summary.json"))?;
    let config = run_dir.load_config()?;
    let chain_count = summary["chains"]
        .as_u64()
        .ok_or(anyhow!("summary.json has no chain count"))? as usize;
    let chains = (0..chain_count)
        .map(|c| chain_stats(&run_dir.draws(c)))
        .collect::<Result<_>>()?;
    let s = &config.sampler;
    Ok(Table3Run {
        dataset: dataset.to_string(),
        split,
        summary,
        budget: Budget {
            warmup: s.warmup,
            draws: s.draws,
            max_depth: s.max_tree_depth().unwrap_or(0),
            policy: if s.stationary_warmup() {
                bnn_sampler::WarmupPolicy::Stationary
            } else {
                bnn_sampler::WarmupPolicy::Fixed
            },
        },
        chains,
    })
}

/// Reads the Stan statistics columns of one chain's draws file.
fn chain_stats(path: &Path) -> Result<ChainStats> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow!("reading {}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or(anyhow!("{} is empty", path.display()))?
        .split(',')
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or(anyhow!("{} has no {name} column", path.display()))
    };
    let (divergent, accept, step) = (
        column("divergent__")?,
        column("accept_stat__")?,
        column("stepsize__")?,
    );
    let last = divergent.max(accept).max(step);
    let mut stats = ChainStats {
        draws: 0,
        divergent: 0,
        accept: 0.0,
        step_size: f64::NAN,
        transitions: Vec::new(),
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.splitn(last + 2, ',').collect();
        let value = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .ok_or(anyhow!(
                    "{}: a row without a number in column {i}",
                    path.display()
                ))
        };
        let (diverged, accept) = (value(divergent)? != 0.0, value(accept)?);
        stats.draws += 1;
        stats.divergent += diverged as usize;
        stats.accept += accept;
        stats.transitions.push((accept, diverged));
        stats.step_size = value(step)?;
    }
    stats.accept /= stats.draws.max(1) as f64;
    Ok(stats)
}

/// One row per dataset: means ± sd over splits beside the paper's numbers.
pub(super) fn dataset_table(config: &Table3Config, runs: &[Table3Run]) -> String {
    let mut text = String::from(
        "| dataset | splits | budget (warmup + draws per chain) | DEI RMSE | DEI LPPD | DE RMSE | DE LPPD | paper DEI RMSE | paper DEI LPPD | paper DE RMSE | paper DE LPPD | divergent draws | cov. 90% | calibration error | minutes per split |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for dataset in &config.datasets {
        let mine: Vec<&Table3Run> = runs.iter().filter(|r| &r.dataset == dataset).collect();
        let values = |key: &str| {
            mine.iter()
                .map(|r| number(&r.summary, key))
                .collect::<Vec<f64>>()
        };
        let cell = |key: &str| mean_and_sd(&values(key));
        let paper = config.table.row(dataset);
        let p = |i: usize| {
            paper
                .and_then(|p| [p.dei_rmse, Some(p.dei_lppd), p.de_rmse, Some(p.de_lppd)][i])
                .map_or("–".to_string(), |v| format!("{v:.2}"))
        };
        let minutes: Vec<f64> = mine
            .iter()
            .map(|r| run_seconds(&r.summary) / 60.0)
            .collect();
        let mut budgets: Vec<String> = mine.iter().map(|r| r.budget.to_string()).collect();
        budgets.dedup();
        let divergent: usize = mine
            .iter()
            .flat_map(|r| &r.chains)
            .map(|c| c.divergent)
            .sum();
        let draws: usize = mine.iter().flat_map(|r| &r.chains).map(|c| c.draws).sum();
        text += &format!(
            "| {dataset} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {divergent} of {draws} ({:.0}%) | {} | {} | {} |\n",
            mine.len(),
            budgets.join("; "),
            cell("rmse"),
            cell("lppd"),
            cell("de_rmse"),
            cell("de_lppd"),
            p(0),
            p(1),
            p(2),
            p(3),
            100.0 * divergent as f64 / draws.max(1) as f64,
            cell("coverage_90"),
            cell("calibration_error"),
            minutes.iter().map(|m| format!("{m:.1}")).collect::<Vec<_>>().join(", "),
        );
    }
    text += &format!(
        "\nSettings ({}): {}, N(0,1) priors, heteroscedastic head, 12 members, 12 NUTS chains, target 0.8, full-data standardization{}. Means ± sd over splits; RMSE and LPPD on the standardized scale; minutes are wall time per split (ensemble + warmup + sampling).\n",
        config.table.name,
        network_label(config),
        config.extra.footnote(", ")
    );
    text
}

/// The network the runs use: the table's, unless `--extra` changed its widths or activation.
fn network_label(config: &Table3Config) -> String {
    let asked = config
        .datasets
        .first()
        .and_then(|d| config.run_config(d, 0).ok());
    match asked {
        Some(run)
            if (&run.model.hidden, run.model.activation.as_str())
                != (&config.table.widths(), "relu") =>
        {
            let widths: Vec<String> = run.model.hidden.iter().map(|w| w.to_string()).collect();
            format!("{} {}", run.model.activation, widths.join("-"))
        }
        _ => config.table.network.to_string(),
    }
}

/// One row per run: where the time went and how the chains behaved.
pub(super) fn run_table(runs: &[Table3Run]) -> String {
    let mut text = String::from(
        "| dataset | split | budget | minutes: ensemble / warmup / sampling | gradients (M): warmup + sampling | warmup iterations (min–max) | divergent draws | chains > 10% divergent | worst chain | chains with acceptance drift > 0.1 | acceptance (min–max) | acceptance first → last tenth | step size (min–max) | test-loglik R-hat | cov. 90% | calibration error | DEI LPPD | DE LPPD | single member LPPD (mean) | members at the mean |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let s = &r.summary;
        let divergent: usize = r.chains.iter().map(|c| c.divergent).sum();
        let draws: usize = r.chains.iter().map(|c| c.draws).sum();
        let over_tenth = r
            .chains
            .iter()
            .filter(|c| 10 * c.divergent > c.draws)
            .count();
        let drifting = r
            .chains
            .iter()
            .filter(|c| {
                AcceptanceDrift::of_chains(std::slice::from_ref(&c.transitions))
                    .is_some_and(|d| (d.accept_first_tenth - d.accept_last_tenth).abs() > 0.1)
            })
            .count();
        let warmups: Vec<u64> = s["chain_stationarity"]
            .as_array()
            .map(|chains| {
                chains
                    .iter()
                    .filter_map(|c| c["warmup_iterations"].as_u64())
                    .collect()
            })
            .unwrap_or_default();
        let warmup_range = match (warmups.iter().min(), warmups.iter().max()) {
            (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
            _ => "–".into(),
        };
        let worst = r
            .chains
            .iter()
            .max_by_key(|c| c.divergent)
            .map_or(0, |c| c.divergent);
        let range = |f: fn(&ChainStats) -> f64| {
            let values: Vec<f64> = r.chains.iter().map(f).collect();
            (
                values.iter().cloned().fold(f64::INFINITY, f64::min),
                values.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            )
        };
        let (accept_min, accept_max) = range(|c| c.accept);
        let (step_min, step_max) = range(|c| c.step_size);
        let transitions: Vec<Vec<(f64, bool)>> =
            r.chains.iter().map(|c| c.transitions.clone()).collect();
        let drift = AcceptanceDrift::of_chains(&transitions).map_or("–".to_string(), |d| {
            format!("{:.2} → {:.2}", d.accept_first_tenth, d.accept_last_tenth)
        });
        let (member_lppd, at_the_mean) = members_alone(s);
        text += &format!(
            "| {} | {} | {} | {:.1} / {:.1} / {:.1} | {:.2} + {:.2} | {warmup_range} | {divergent} of {draws} ({:.1}%) | {over_tenth} | {worst} of {} | {drifting} | {:.2} ({accept_min:.2}–{accept_max:.2}) | {drift} | {step_min:.1e}–{step_max:.1e} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {member_lppd} | {at_the_mean} |\n",
            r.dataset,
            r.split,
            r.budget,
            number(s, "seconds_ensemble") / 60.0,
            number(s, "seconds_warmup") / 60.0,
            number(s, "seconds_sampling") / 60.0,
            number(s, "warmup_gradients") / 1e6,
            number(s, "sampling_gradients") / 1e6,
            100.0 * divergent as f64 / draws.max(1) as f64,
            r.chains.first().map_or(0, |c| c.draws),
            number(s, "mean_accept_stat"),
            number(s, "rhat_test_loglik"),
            number(s, "coverage_90"),
            number(s, "calibration_error"),
            number(s, "lppd"),
            number(s, "de_lppd"),
        );
    }
    text
}

/// The members one by one: their mean test LPPD (the paper's "single DNN") and how many of
/// them predict little better than the mean, test RMSE above 0.9 on standardized targets (a
/// network that never fitted). Dashes for a run evaluated before `summary.json` had them.
fn members_alone(summary: &serde_json::Value) -> (String, String) {
    let values = |key: &str| -> Vec<f64> {
        summary[key]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
            .unwrap_or_default()
    };
    let (lppd, rmse) = (values("member_lppd"), values("member_rmse"));
    if lppd.is_empty() {
        return ("–".into(), "–".into());
    }
    let mean = lppd.iter().sum::<f64>() / lppd.len() as f64;
    let stuck = rmse.iter().filter(|&&r| r > 0.9).count();
    (format!("{mean:.3}"), format!("{stuck} of {}", rmse.len()))
}

fn run_seconds(summary: &serde_json::Value) -> f64 {
    number(summary, "seconds_ensemble")
        + number(summary, "seconds_warmup")
        + number(summary, "seconds_sampling")
}

/// `mean ± sd` over splits (the sample sd), or the one value.
fn mean_and_sd(values: &[f64]) -> String {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return format!("{mean:.3}");
    }
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    format!("{mean:.3} ± {sd:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sd_over_splits() {
        assert_eq!(mean_and_sd(&[0.5]), "0.500");
        assert_eq!(mean_and_sd(&[1.0, 2.0, 3.0]), "2.000 ± 1.000");
    }
}
