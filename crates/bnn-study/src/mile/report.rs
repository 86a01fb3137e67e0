//! The MILE comparison's markdown table, from the finished run directories.

use super::MileConfig;
use crate::dei_runs::{number, read_json};
use std::path::Path;

/// What one finished run reports.
pub struct SamplerRun {
    pub summary: serde_json::Value,
    /// Tuning + sampling seconds.
    pub seconds: f64,
    /// Gradient evaluations in tuning and sampling, all chains.
    pub gradients: f64,
}

/// One (dataset, split, chain seed): both samplers from the same members.
pub struct MileRow {
    pub dataset: String,
    pub split: u64,
    pub nuts: SamplerRun,
    pub mile: SamplerRun,
    /// SMILE from the same members, where the study ran it.
    pub smile: Option<SamplerRun>,
}

/// The finished run in `dir`, `None` while it has no summary.
pub fn read_run(dir: &Path) -> Option<SamplerRun> {
    let summary = read_json(&dir.join("summary.json"))?;
    let sampling = read_json(&dir.join("sampling.json"))?;
    let seconds = sampling["seconds_warmup"].as_f64()? + sampling["seconds_sampling"].as_f64()?;
    let mut gradients = number(&summary, "sampling_gradients");
    for chain in 0.. {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("adaptation_chain_{chain}.csv")))
        else {
            break;
        };
        let mut lines = text.lines();
        let column = lines.next()?.split(',').position(|c| c == "n_leapfrog__")?;
        gradients += lines
            .filter_map(|l| l.split(',').nth(column)?.parse::<f64>().ok())
            .sum::<f64>();
    }
    Some(SamplerRun {
        summary,
        seconds,
        gradients,
    })
}

pub(super) fn markdown(config: &MileConfig, rows: &[MileRow]) -> String {
    let f = |run: &SamplerRun, key: &str| number(&run.summary, key);
    let delta = |r: &MileRow| f(&r.mile, "lppd") - f(&r.nuts, "lppd");
    let mut text = String::from(
        "| dataset | splits × seeds | LPPD DEI-NUTS | LPPD MILE | Δ LPPD ± s.e. | RMSE DEI-NUTS | RMSE MILE | cov. 90% DEI / MILE | calib. err. DEI / MILE | R-hat test loglik DEI / MILE | minutes DEI / MILE | time MILE/DEI | gradients (M) DEI / MILE | divergences DEI |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut per_split = String::new();
    for dataset in &config.datasets {
        let mine: Vec<&MileRow> = rows.iter().filter(|r| &r.dataset == dataset).collect();
        let n = mine.len() as f64;
        let mean = |g: &dyn Fn(&MileRow) -> f64| mine.iter().map(|r| g(r)).sum::<f64>() / n;
        let both = |key: &str, digits: usize| {
            format!(
                "{:.digits$} / {:.digits$}",
                mean(&|r| f(&r.nuts, key)),
                mean(&|r| f(&r.mile, key))
            )
        };
        let minutes = (
            mean(&|r| r.nuts.seconds) / 60.0,
            mean(&|r| r.mile.seconds) / 60.0,
        );
        let mean_delta = mean(&delta);
        // Standard error of the mean paired difference over the (split, seed) runs.
        let se = if mine.len() > 1 {
            (mine
                .iter()
                .map(|r| (delta(r) - mean_delta).powi(2))
                .sum::<f64>()
                / (n - 1.0)
                / n)
                .sqrt()
        } else {
            f64::NAN
        };
        text += &format!(
            "| {dataset} | {} × {} | {:.3} | {:.3} | {:+.3} ± {:.3} | {:.3} | {:.3} | {} | {} | {} | {:.1} / {:.1} | {:.2} | {:.1} / {:.2} | {:.0} |\n",
            config.splits,
            config.seeds,
            mean(&|r| f(&r.nuts, "lppd")),
            mean(&|r| f(&r.mile, "lppd")),
            mean_delta,
            se,
            mean(&|r| f(&r.nuts, "rmse")),
            mean(&|r| f(&r.mile, "rmse")),
            both("coverage_90", 3),
            both("calibration_error", 3),
            both("rhat_test_loglik", 2),
            minutes.0,
            minutes.1,
            mean(&|r| r.mile.seconds / r.nuts.seconds),
            mean(&|r| r.nuts.gradients) / 1e6,
            mean(&|r| r.mile.gradients) / 1e6,
            mean(&|r| f(&r.nuts, "divergences")),
        );
        per_split += &format!("- {dataset}:");
        for split in 0..config.splits {
            let runs: Vec<String> = mine
                .iter()
                .filter(|r| r.split == split)
                .map(|r| {
                    format!(
                        "{:.3} / {:.3} ({:+.3}, {:.2})",
                        f(&r.nuts, "lppd"),
                        f(&r.mile, "lppd"),
                        delta(r),
                        r.mile.seconds / r.nuts.seconds
                    )
                })
                .collect();
            per_split += &format!(" split {split}: {};", runs.join(", "));
        }
        per_split.pop();
        per_split += "\n";
    }
    if config.smile {
        text += &smile_table(config, rows);
    }
    let seeds = if config.seeds > 1 {
        format!(" and chain seeds (split + 100·k, k < {})", config.seeds)
    } else {
        String::new()
    };
    let extra = match config.extra.footnote(" (") {
        text if text.is_empty() => text,
        text => text + ")",
    };
    text += &format!(
        "\nMeans over splits (split seeds 0..{}){seeds}; s.e. of the mean paired difference over those runs. Same 12 members per split for both samplers{extra}; LPPD and RMSE on the standardized scale; minutes: tuning + sampling, ensemble training excluded.\n\nPer run, LPPD DEI-NUTS / MILE (Δ, time MILE/DEI), in seed order:\n\n{per_split}",
        config.splits.saturating_sub(1),
    );
    text
}

/// SMILE against MILE from the same members: predictive quality, time and minibatch gradients.
fn smile_table(config: &MileConfig, rows: &[MileRow]) -> String {
    let f = |run: &SamplerRun, key: &str| number(&run.summary, key);
    let mut text = String::from(
        "\n| dataset | LPPD MILE | LPPD SMILE | Δ LPPD | RMSE MILE / SMILE | cov. 90% MILE / SMILE | minutes MILE / SMILE | time SMILE/MILE | gradients (M) MILE / SMILE (minibatch) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for dataset in &config.datasets {
        let mine: Vec<(&MileRow, &SamplerRun)> = rows
            .iter()
            .filter(|r| &r.dataset == dataset)
            .filter_map(|r| Some((r, r.smile.as_ref()?)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let n = mine.len() as f64;
        let mean = |g: &dyn Fn(&MileRow, &SamplerRun) -> f64| {
            mine.iter().map(|(r, s)| g(r, s)).sum::<f64>() / n
        };
        text += &format!(
            "| {dataset} | {:.3} | {:.3} | {:+.3} | {:.3} / {:.3} | {:.3} / {:.3} | {:.1} / {:.1} | {:.2} | {:.2} / {:.2} |\n",
            mean(&|r, _| f(&r.mile, "lppd")),
            mean(&|_, s| f(s, "lppd")),
            mean(&|r, s| f(s, "lppd") - f(&r.mile, "lppd")),
            mean(&|r, _| f(&r.mile, "rmse")),
            mean(&|_, s| f(s, "rmse")),
            mean(&|r, _| f(&r.mile, "coverage_90")),
            mean(&|_, s| f(s, "coverage_90")),
            mean(&|r, _| r.mile.seconds) / 60.0,
            mean(&|_, s| s.seconds) / 60.0,
            mean(&|r, s| s.seconds / r.mile.seconds),
            mean(&|r, _| r.mile.gradients) / 1e6,
            mean(&|_, s| s.gradients) / 1e6,
        );
    }
    text + "\nSMILE: stochastic-gradient MCLMC (`--sampler smile`), its gradients over minibatches of `batch_size` rows, at MILE's budget from the MILE run's members.\n"
}
