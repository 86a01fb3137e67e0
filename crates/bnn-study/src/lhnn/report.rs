//! What `bnn study lhnn` writes: CSVs, the markdown table beside the paper's claims, SVGs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use bnn_plot::{LegendPosition, LineChart, Series};

use super::bnn::{BnnComparison, LhnnBnnConfig};
use super::{Benchmark, ChainRun, LhnnSampler, LhnnStudyConfig, SamplerSummary, TrainedSurrogate};
use crate::describe_cpu;

pub(super) fn write_summary_csv(out: &Path, summaries: &[SamplerSummary]) -> Result<Vec<PathBuf>> {
    let path = out.join("summary.csv");
    let mut w = csv::Writer::from_path(&path)?;
    w.write_record([
        "benchmark",
        "sampler",
        "transitions",
        "true_gradients",
        "training_gradients",
        "true_values",
        "surrogate_gradients",
        "leaves",
        "min_ess",
        "median_ess",
        "min_ess_per_gradient",
        "median_ess_per_gradient",
        "divergences",
        "at_depth_cap",
        "fallbacks",
        "mean_accept",
        "step_size",
        "sampling_seconds",
        "training_seconds",
        "max_ks_statistic",
        "min_ks_p_value",
    ])?;
    for s in summaries {
        let total = s.total_gradients() as f64;
        let (max_d, min_p) = ks_extremes(s);
        w.write_record([
            s.benchmark.name().to_string(),
            s.sampler.name().to_string(),
            s.transitions.to_string(),
            s.costs.true_gradients.to_string(),
            s.training_gradients.to_string(),
            s.costs.true_values.to_string(),
            s.costs.surrogate_gradients.to_string(),
            s.costs.leaves.to_string(),
            format!("{:.1}", s.min_ess()),
            format!("{:.1}", s.median_ess()),
            format!("{:.3e}", s.min_ess() / total),
            format!("{:.3e}", s.median_ess() / total),
            s.costs.divergences.to_string(),
            s.costs.at_depth_cap.to_string(),
            s.costs.fallbacks.to_string(),
            format!("{:.3}", s.mean_accept),
            format!("{:.4}", s.step_size),
            format!("{:.2}", s.seconds),
            format!("{:.2}", s.training_seconds),
            format!("{max_d:.4}"),
            format!("{min_p:.3e}"),
        ])?;
    }
    w.flush()?;
    Ok(vec![path])
}

fn ks_extremes(s: &SamplerSummary) -> (f64, f64) {
    let max_d = s.ks.iter().map(|k| k.0).fold(f64::NAN, f64::max);
    let min_p = s.ks.iter().map(|k| k.1).fold(f64::NAN, f64::min);
    (max_d, min_p)
}

pub(super) fn write_training_csv(
    out: &Path,
    surrogates: &[(Benchmark, TrainedSurrogate)],
) -> Result<Vec<PathBuf>> {
    if surrogates.is_empty() {
        return Ok(Vec::new());
    }
    let path = out.join("training.csv");
    let mut w = csv::Writer::from_path(&path)?;
    w.write_record(["benchmark", "step", "loss"])?;
    for (benchmark, trained) in surrogates {
        w.write_record([
            benchmark.name(),
            "0",
            &format!("{:.6e}", trained.initial_loss),
        ])?;
        for record in &trained.history {
            w.write_record([
                benchmark.name().to_string(),
                record.step.to_string(),
                format!("{:.6e}", record.loss),
            ])?;
        }
    }
    w.flush()?;
    Ok(vec![path])
}

/// Per benchmark: the empirical CDF of the first and the last coordinate for every sampler beside
/// the reference's.
pub(super) fn write_marginal_charts(
    out: &Path,
    runs: &[(Benchmark, Vec<Vec<Vec<f64>>>, Vec<ChainRun>)],
) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for (benchmark, reference, chains) in runs {
        let dim = benchmark.dim();
        for coordinate in if dim > 1 { vec![0, dim - 1] } else { vec![0] } {
            let mut series = vec![Series {
                label: "reference (long adapted NUTS)".into(),
                points: ecdf(reference[coordinate].iter().flatten().copied().collect()),
                colour: 7,
                dashed: true,
                ..Series::default()
            }];
            for (slot, sampler) in LhnnSampler::ALL.into_iter().enumerate() {
                let values: Vec<f64> = chains
                    .iter()
                    .filter(|c| c.sampler == sampler)
                    .flat_map(|c| c.draws.iter().map(|q| q[coordinate]))
                    .collect();
                if !values.is_empty() {
                    series.push(Series {
                        label: sampler.name().into(),
                        points: ecdf(values),
                        colour: slot,
                        ..Series::default()
                    });
                }
            }
            let chart = LineChart {
                title: format!("{benchmark}: marginal of q{}", coordinate + 1),
                x_label: format!("q{}", coordinate + 1),
                y_label: "empirical CDF".into(),
                log_x: false,
                y_range: Some(0.0..1.0),
                legend: LegendPosition::LowerRight,
                series,
            };
            let path = out.join(format!(
                "marginal_{}_q{}.svg",
                benchmark.name(),
                coordinate + 1
            ));
            chart.write_svg(&path)?;
            files.push(path);
        }
    }
    Ok(files)
}

/// The empirical CDF at 199 quantiles (0.5%, 1%, …, 99.5%).
fn ecdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        return Vec::new();
    }
    (1..200)
        .map(|k| {
            let p = k as f64 / 200.0;
            (bnn_diagnostics::quantile_type7_sorted(&values, p), p)
        })
        .collect()
}

pub(super) fn write_training_charts(
    out: &Path,
    surrogates: &[(Benchmark, TrainedSurrogate)],
) -> Result<Vec<PathBuf>> {
    if surrogates.is_empty() {
        return Ok(Vec::new());
    }
    let series = surrogates
        .iter()
        .enumerate()
        .map(|(slot, (benchmark, trained))| Series {
            label: benchmark.name().into(),
            points: std::iter::once((0.0, trained.initial_loss.log10()))
                .chain(
                    trained
                        .history
                        .iter()
                        .map(|r| (r.step as f64, r.loss.log10())),
                )
                .collect(),
            colour: slot,
            ..Series::default()
        })
        .collect();
    let chart = LineChart {
        title: "L-HNN training: Hamilton's-equations residual".into(),
        x_label: "Adam step".into(),
        y_label: "log10 mean loss".into(),
        log_x: false,
        y_range: None,
        legend: LegendPosition::UpperRight,
        series,
    };
    let path = out.join("training_loss.svg");
    chart.write_svg(&path)?;
    Ok(vec![path])
}

/// `a`'s min-ESS per true gradient over `b`'s on one benchmark, and the same per true
/// evaluation (gradients plus value-only evaluations).
pub fn efficiency_ratio(
    summaries: &[SamplerSummary],
    benchmark: Benchmark,
    a: LhnnSampler,
    b: LhnnSampler,
) -> Option<(f64, f64)> {
    let find = |s: LhnnSampler| {
        summaries
            .iter()
            .find(|x| x.benchmark == benchmark && x.sampler == s)
    };
    let (a, b) = (find(a)?, find(b)?);
    let per_gradient = |s: &SamplerSummary| s.min_ess() / s.total_gradients() as f64;
    let per_evaluation =
        |s: &SamplerSummary| s.min_ess() / (s.total_gradients() + s.costs.true_values) as f64;
    Some((
        per_gradient(a) / per_gradient(b),
        per_evaluation(a) / per_evaluation(b),
    ))
}

/// Kept draws per chain from which `a` (an L-HNN sampler, with its fixed training cost) needs
/// fewer true gradients per effective sample than `b`, assuming both ESS grow in proportion to
/// the draws: `None` when `a` spends as many per draw as `b` or more (it never catches up).
pub fn break_even_draws(
    summaries: &[SamplerSummary],
    benchmark: Benchmark,
    a: LhnnSampler,
    b: LhnnSampler,
    draws: usize,
) -> Option<f64> {
    let find = |s: LhnnSampler| {
        summaries
            .iter()
            .find(|x| x.benchmark == benchmark && x.sampler == s)
    };
    let (a, b) = (find(a)?, find(b)?);
    let (ess_a, ess_b) = (a.min_ess(), b.min_ess());
    let per_ess_b = b.total_gradients() as f64 / ess_b;
    let running_a = a.costs.true_gradients as f64 / ess_a;
    (per_ess_b > running_a)
        .then(|| draws as f64 * (a.training_gradients as f64 / ess_a) / (per_ess_b - running_a))
}

/// Two significant digits, whatever the magnitude.
fn significant(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return format!("{x}");
    }
    let decimals = (1 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
}

pub(super) fn write_markdown(
    out: &Path,
    config: &LhnnStudyConfig,
    surrogates: &[(Benchmark, TrainedSurrogate)],
    summaries: &[SamplerSummary],
    bnn: &[BnnComparison],
) -> Result<PathBuf> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# L-HNN in NUTS (Dhulipala, Che & Shields 2023): our reproduction\n"
    );
    let _ = writeln!(md, "Machine: {}. Budget: {} chain(s) per sampler × ({} burn-in + {} kept transitions), step size {} for the L-HNN samplers and the fixed-ε baseline, tree depth ≤ {}; L-HNN: {} trajectories of {} time units at step {} from the benchmark's start, {}×{} sine MLP, {} Adam steps (lr {}, batch 1000, weight decay 1e-4); reference: 4 chains × {} adapted-NUTS draws. Seed {}.\n",
        describe_cpu(), config.chains, config.burn_in, config.draws, config.step_size, config.max_tree_depth, config.trajectories, config.end_time,
        config.training_step_size, config.hidden_layers, config.hidden_width, config.training_steps, config.learning_rate, config.reference_draws, config.seed);
    let _ = writeln!(md, "**The paper's claim** (its stored text is the HNN report's summary; Dhulipala et al. 2023, abstract and §5): L-HNN gradients inside NUTS with online error monitoring need 1–2 orders of magnitude fewer gradients of the target and reach about 10× the ESS per gradient of NUTS with a fixed ε = 0.025, no adaptation and no depth cap.\n");
    let _ = writeln!(md, "Cost is counted in true gradient evaluations at the density: sampling (burn-in included) plus, for the L-HNN samplers, the training trajectories. Value-only evaluations of the true density (one per surrogate leaf) and surrogate forces are listed apart: on these analytic targets a value costs about what a gradient does, on a neural network posterior about half.\n");
    let _ = writeln!(md, "## Min-over-coordinates ESS per true gradient, and per true evaluation (ratios to the baselines)\n");
    let _ = writeln!(md, "Each ratio cell: per true gradient / per true evaluation (gradients + value-only evaluations); above 1 the L-HNN sampler is the cheaper one. The L-HNN's training trajectories are a fixed cost, so its ratios grow with the draws: the \"ties at\" columns give the draws per chain (this run: {}) from which it needs fewer true gradients per effective sample, if both ESS grow in proportion to the draws (\"never\": it spends as many per draw as the baseline).\n", config.draws);
    let _ = writeln!(md, "| benchmark | lhnn-exact / nuts-fixed | lhnn-monitored / nuts-fixed | lhnn-adapted / nuts-adapted | lhnn-exact / nuts-adapted | lhnn-exact ties nuts-fixed at | lhnn-adapted ties nuts-adapted at | paper (L-HNN / fixed-ε NUTS, per gradient) |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for &benchmark in &config.benchmarks {
        let ratio = |a, b| {
            efficiency_ratio(summaries, benchmark, a, b).map_or("–".to_string(), |(g, e)| {
                format!("{} / {}", significant(g), significant(e))
            })
        };
        let ties = |a, b| match break_even_draws(summaries, benchmark, a, b, config.draws) {
            Some(draws) => format!("{} draws", significant(draws)),
            None if efficiency_ratio(summaries, benchmark, a, b).is_some() => "never".to_string(),
            None => "–".to_string(),
        };
        let _ = writeln!(
            md,
            "| {benchmark} | {} | {} | {} | {} | {} | {} | ≈10 |",
            ratio(LhnnSampler::LhnnExact, LhnnSampler::NutsFixed),
            ratio(LhnnSampler::LhnnMonitored, LhnnSampler::NutsFixed),
            ratio(LhnnSampler::LhnnAdapted, LhnnSampler::NutsAdapted),
            ratio(LhnnSampler::LhnnExact, LhnnSampler::NutsAdapted),
            ties(LhnnSampler::LhnnExact, LhnnSampler::NutsFixed),
            ties(LhnnSampler::LhnnAdapted, LhnnSampler::NutsAdapted)
        );
    }
    let _ = writeln!(md, "\n## Per benchmark\n");
    let _ = writeln!(md, "| benchmark | sampler | true gradients (sampling + training) | true values | surrogate forces | min / median ESS | min ESS per 1000 gradients | divergent | at depth cap | fallbacks | accept | ε | KS max D (min p) | seconds (sampling + training) |");
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for s in summaries {
        let (d, p) = ks_extremes(s);
        let _ = writeln!(md, "| {} | {} | {} + {} | {} | {} | {:.0} / {:.0} | {:.3} | {} / {} | {} / {} | {} | {:.2} | {:.4} | {:.3} ({:.2}) | {:.1} + {:.1} |",
            s.benchmark, s.sampler.name(), s.costs.true_gradients, s.training_gradients, s.costs.true_values, s.costs.surrogate_gradients, s.min_ess(), s.median_ess(),
            1000.0 * s.min_ess() / s.total_gradients() as f64, s.costs.divergences, s.transitions, s.costs.at_depth_cap, s.transitions, s.costs.fallbacks,
            s.mean_accept, s.step_size, d, p, s.seconds, s.training_seconds);
    }
    if !surrogates.is_empty() {
        let _ = writeln!(md, "\n## L-HNN training\n");
        let _ = writeln!(md, "| benchmark | phase points | true gradients | loss before → after | data + training seconds |");
        let _ = writeln!(md, "|---|---|---|---|---|");
        for (benchmark, t) in surrogates {
            let _ = writeln!(
                md,
                "| {benchmark} | {} | {} | {:.3e} → {:.3e} | {:.1} + {:.1} |",
                t.data_points,
                t.training_gradients,
                t.initial_loss,
                t.final_loss,
                t.data_seconds,
                t.training_seconds
            );
        }
    }
    if !bnn.is_empty() {
        write_bnn_section(&mut md, &config.bnn, bnn);
    }
    if summaries.is_empty() {
        let path = out.join("lhnn.md");
        std::fs::write(&path, md)?;
        return Ok(path);
    }
    let _ = writeln!(md, "\nKS: two-sample Kolmogorov–Smirnov test of each coordinate's draws against the reference's, both thinned to about one draw per effective sample; a small p on a coordinate flags a marginal that disagrees (the monitored mode is approximate; the exact mode and both NUTS are not). Files: `summary.csv`, `training.csv`, `marginal_*.svg`, `training_loss.svg`.");
    let path = out.join("lhnn.md");
    std::fs::write(&path, md)?;
    Ok(path)
}

fn write_bnn_section(md: &mut String, config: &LhnnBnnConfig, rows: &[BnnComparison]) {
    let _ = writeln!(
        md,
        "\n## Bayesian neural networks from deep-ensemble starts\n"
    );
    let _ = writeln!(md, "{} members (Adam, lr 0.01, {} full-batch epochs), one chain each: DEI-NUTS's warmup ({} iterations, Stan windows) from member j gives ε_j and a diagonal metric; from its last point DEI-NUTS draws {} and, with the same ε_j and metric, exact L-HNN NUTS draws {} (L-HNN in the metric's whitened coordinates: {} trajectories × {} leapfrog steps at ε_j from that point, {}×{} sine MLP, {} Adam steps, lr {}). Tree depth ≤ {}. Gradients: warmup (shared by both) + training + draws. ESS: bulk, pooled chains, of log p and of the test rows' mean prediction.\n",
        config.members, config.ensemble_epochs, config.warmup, config.draws, config.draws, config.trajectories, config.trajectory_steps, config.hidden_layers, config.hidden_width, config.training_steps, config.learning_rate, config.max_tree_depth);
    let _ = writeln!(md, "| problem | sampler | test LPPD | test RMSE | true gradients (warmup + training + draws) | true values | surrogate forces | leaves | ESS log p / mean prediction | ESS per 1000 gradients (log p) | accept | divergent | sampling seconds (+ training) | µs per gradient / value / surrogate force |");
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let _ = writeln!(md, "| {} | {} | {:.3} | {:.3} | {} + {} + {} | {} | {} | {} | {:.0} / {:.0} | {:.3} | {:.2} | {} / {} | {:.1} (+ {:.1}) | {:.1} / {:.1} / {:.1} |",
            r.problem.name(), r.sampler, r.test_lppd, r.test_rmse, r.warmup_gradients, r.training_gradients, r.true_gradients, r.true_values, r.surrogate_forces, r.leaves,
            r.ess_log_density, r.ess_mean_prediction, 1000.0 * r.ess_log_density / r.total_gradients() as f64, r.mean_accept, r.divergences, r.draws,
            r.seconds, r.training_seconds, r.micros[0], r.micros[1], r.micros[2]);
    }
    let _ = writeln!(md, "\nOn a BNN posterior a leaf of the surrogate sampler costs one surrogate force plus one true value; NUTS's leaf costs one true gradient. The last column says which is cheaper on this machine: where the surrogate force plus a value cost more than a gradient, the surrogate cannot save time however few true gradients it spends.");
}
