//! One streaming pass over a run's stored draws: pooled and per-chain predictive metrics,
//! predictive intervals and coverage, function-space R-hat, expanding-window LPPD per chain and
//! sampler statistics. Draws are read in chunks; memory is O(chunk · N_test) plus the
//! predictive samples kept for the interval quantiles (capped, see `MAX_PREDICTIVE_VALUES`).

use crate::storage::draw_reader::for_each_stored_draw;
use crate::storage::run_dir::RunDir;
use crate::storage::stored_chains::{check_draw_count, count_draw_rows};
use anyhow::Result;
use bnn_diagnostics::CumulativeLppd;
use bnn_model::{
    HostData, MlpPosterior, PointPrediction, PredictiveAccumulator, PredictiveMetrics,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Nominal levels of the central intervals whose coverage is measured (calibration curve).
pub const LEVELS: [f64; 11] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 0.95];
/// Levels written to predictions.csv.
pub const BAND_LEVELS: [f64; 3] = [0.5, 0.9, 0.95];
/// Upper bound on stored predictive samples (points × samples), ~100 MB of f32.
const MAX_PREDICTIVE_VALUES: usize = 25_000_000;
const CHUNK: usize = 64;
/// Test points whose predictive mean gets a pointwise R-hat.
const POINTWISE: usize = 100;

/// Per test value (point × target): predictive mean, sd and central-interval bounds, standardized scale.
#[derive(Debug, Clone)]
pub struct PointSummary {
    pub mean: f64,
    pub sd: f64,
    /// `(lower, upper)` per entry of `LEVELS`.
    pub intervals: Vec<(f64, f64)>,
}

/// Everything the pass computes.
pub struct PosteriorPass {
    pub pooled: PredictiveMetrics,
    pub per_chain: Vec<PredictiveMetrics>,
    pub draws_per_chain: Vec<usize>,
    /// Gaussian likelihoods only: per (point, target).
    pub points: Vec<PointSummary>,
    /// The pooled draws' log predictive density of each test value, ordered as `points`
    /// (see [`PredictiveAccumulator::pointwise_lppd`]).
    pub log_scores: Vec<f64>,
    /// Observed coverage per entry of `LEVELS` (Gaussian only).
    pub coverage: Vec<f64>,
    /// Several targets: observed coverage per target and entry of `LEVELS` (empty otherwise).
    pub coverage_per_target: Vec<Vec<f64>>,
    pub rhat_test_loglik: f64,
    pub rhat_test_rmse: f64,
    pub pointwise_rhat_max: f64,
    pub pointwise_rhat_mean: f64,
    /// Bulk ESS of the per-draw test log likelihood (all chains, common prefix).
    pub ess_test_loglik: f64,
    /// Median over the first test points of the bulk ESS of their predictive means.
    pub pointwise_ess_median: f64,
    /// Leapfrog steps (gradient evaluations) of the stored draws, summed.
    pub gradients: f64,
    /// Expanding-window LPPD per chain, one value per draw.
    pub cumulative_lppd: Vec<Vec<f64>>,
    pub divergences: usize,
    pub mean_accept_stat: f64,
    pub mean_leapfrog: f64,
    pub max_tree_depth_hits: usize,
    pub predictive_samples_per_point: usize,
}

impl PosteriorPass {
    /// Root mean square of nominal minus observed coverage over `LEVELS`.
    pub fn calibration_error(&self) -> Option<f64> {
        calibration_error(&self.coverage)
    }

    pub fn coverage_at(&self, level: f64) -> Option<f64> {
        coverage_at(&self.coverage, level)
    }
}

/// Root mean square of nominal minus observed coverage, for coverages measured at `LEVELS`.
pub fn calibration_error(coverage: &[f64]) -> Option<f64> {
    (!coverage.is_empty()).then(|| {
        (LEVELS
            .iter()
            .zip(coverage)
            .map(|(l, o)| (l - o).powi(2))
            .sum::<f64>()
            / LEVELS.len() as f64)
            .sqrt()
    })
}

/// The observed coverage at `level` (one of `LEVELS`), for coverages measured at `LEVELS`.
pub fn coverage_at(coverage: &[f64], level: f64) -> Option<f64> {
    LEVELS
        .iter()
        .position(|&l| (l - level).abs() < 1e-12)
        .and_then(|i| coverage.get(i).copied())
}

/// Streams the draws of `chains` chains (at most `max_draws_per_chain` each: fewer when a chain
/// stopped early) through the posterior's predictions on `test`.
pub fn run_pass(
    dir: &RunDir,
    posterior: &MlpPosterior,
    test: &HostData,
    chains: usize,
    max_draws_per_chain: usize,
    max_depth: usize,
    seed: u64,
) -> Result<PosteriorPass> {
    let dim = posterior.layout_dim();
    let (n, t) = (test.rows, test.y_cols);
    let values = n * t;
    // The stride of the kept predictive samples, from the planned number of draws (an upper
    // bound), so the files are read once.
    let total_draws = chains * max_draws_per_chain;
    if let Some(missing) = (0..chains).map(|c| dir.draws(c)).find(|p| !p.is_file()) {
        anyhow::bail!(
            "{} is missing: this run has not been sampled yet (run `bnn sample --out {}`)",
            missing.display(),
            dir.root().display()
        );
    }
    // A draws file longer or shorter than its record was changed after sampling: refuse before
    // any work rather than report metrics of other draws than the run made.
    let readable = (0..chains)
        .map(|c| check_draw_count(dir, c, count_draw_rows(&dir.draws(c))?))
        .collect::<Result<Vec<usize>>>()?;
    let stride = (total_draws * values)
        .div_ceil(MAX_PREDICTIVE_VALUES)
        .max(1);
    let mut samples: Vec<Vec<f32>> = vec![Vec::with_capacity(total_draws / stride + 1); values];
    let mut mean_sum = vec![0.0; values];
    let mut second_sum = vec![0.0; values];
    let mut gaussian = true;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_0f9e_d1c7);

    let mut pooled = PredictiveAccumulator::new(&test.y, t);
    let mut per_chain = Vec::with_capacity(chains);
    let mut draws_per_chain = Vec::with_capacity(chains);
    let watched = n.min(POINTWISE);
    let mut draw_loglik = vec![Vec::new(); chains];
    let mut draw_rmse = vec![Vec::new(); chains];
    let mut point_means = vec![vec![Vec::new(); chains]; watched];
    let mut cumulative = vec![Vec::new(); chains];
    let (mut divergences, mut accept_sum, mut leapfrog_sum, mut depth_hits, mut stat_count) =
        (0, 0.0, 0.0, 0, 0usize);
    let mut global_draw = 0usize;
    let mut pointwise = vec![0.0; n];

    for c in 0..chains {
        let mut chain_metrics = PredictiveAccumulator::new(&test.y, t);
        let mut chain_lppd = CumulativeLppd::new(n);
        let mut chunk: Vec<f64> = Vec::with_capacity(CHUNK * dim);
        let mut process = |chunk: &mut Vec<f64>| -> Result<()> {
            for draw in posterior.predictions(chunk, test) {
                pooled.add_draw(&draw);
                chain_metrics.add_draw(&draw);
                let mut sq = 0.0;
                let keep_sample = global_draw.is_multiple_of(stride);
                for (i, p) in draw.iter().enumerate() {
                    let yi = &test.y[i * t..(i + 1) * t];
                    pointwise[i] = p.log_likelihood(yi);
                    match p {
                        PointPrediction::Gaussian { mean, sd } => {
                            for k in 0..t {
                                let v = i * t + k;
                                sq += (mean[k] - yi[k]).powi(2);
                                mean_sum[v] += mean[k];
                                second_sum[v] += sd[k] * sd[k] + mean[k] * mean[k];
                                if keep_sample {
                                    let z: f64 = StandardNormal.sample(&mut rng);
                                    samples[v].push((mean[k] + sd[k] * z) as f32);
                                }
                            }
                            if i < watched {
                                point_means[i][c].push(mean[0]);
                            }
                        }
                        PointPrediction::Categorical { .. } => gaussian = false,
                    }
                }
                draw_loglik[c].push(pointwise.iter().sum::<f64>());
                draw_rmse[c].push((sq / values as f64).sqrt());
                cumulative[c].push(chain_lppd.push(&pointwise));
                global_draw += 1;
            }
            chunk.clear();
            Ok(())
        };
        let count = for_each_stored_draw(&dir.draws(c), dim, readable[c], |stats, position| {
            divergences += usize::from(stats.divergent);
            accept_sum += stats.accept_stat;
            leapfrog_sum += stats.n_leapfrog;
            depth_hits += usize::from(stats.tree_depth as usize >= max_depth && max_depth > 0);
            stat_count += 1;
            chunk.extend_from_slice(position);
            if chunk.len() == CHUNK * dim {
                process(&mut chunk)?;
            }
            Ok(())
        })?;
        if !chunk.is_empty() {
            process(&mut chunk)?;
        }
        draws_per_chain.push(count);
        per_chain.push(chain_metrics.finish());
    }

    // Chains stopped early have fewer draws: R-hat and ESS use the common prefix.
    let rhat = |series: &[Vec<f64>]| {
        common_prefix(series).map_or(f64::NAN, |c| bnn_diagnostics::rhat_split(&c))
    };
    let ess = |series: &[Vec<f64>]| {
        common_prefix(series).map_or(f64::NAN, |c| bnn_diagnostics::ess_bulk(&c))
    };
    let pointwise_rhats: Vec<f64> = point_means
        .iter()
        .filter(|m| !m[0].is_empty())
        .map(|m| rhat(m))
        .filter(|r| r.is_finite())
        .collect();
    let pointwise_ess_median = crate::analysis::run_diagnostics::median(
        point_means
            .iter()
            .filter(|m| !m[0].is_empty())
            .map(|m| ess(m))
            .filter(|e| e.is_finite())
            .collect(),
    );
    let total = global_draw.max(1) as f64;
    let (points, coverage, coverage_per_target) = if gaussian && global_draw > 0 {
        let mut inside = vec![0usize; LEVELS.len()];
        let mut inside_per_target = vec![vec![0usize; LEVELS.len()]; t];
        let points: Vec<PointSummary> = (0..values)
            .map(|v| {
                let mean = mean_sum[v] / total;
                let sd = (second_sum[v] / total - mean * mean).max(0.0).sqrt();
                let mut sorted = std::mem::take(&mut samples[v]);
                sorted.sort_by(f32::total_cmp);
                let intervals: Vec<(f64, f64)> = LEVELS
                    .iter()
                    .map(|&l| {
                        (
                            quantile(&sorted, (1.0 - l) / 2.0),
                            quantile(&sorted, (1.0 + l) / 2.0),
                        )
                    })
                    .collect();
                let y = test.y[v];
                for (k, &(lo, hi)) in intervals.iter().enumerate() {
                    let covered = usize::from(y >= lo && y <= hi);
                    inside[k] += covered;
                    inside_per_target[v % t][k] += covered;
                }
                PointSummary {
                    mean,
                    sd,
                    intervals,
                }
            })
            .collect();
        let coverage = inside.iter().map(|&k| k as f64 / values as f64).collect();
        let coverage_per_target = if t > 1 {
            inside_per_target
                .iter()
                .map(|target| target.iter().map(|&k| k as f64 / n as f64).collect())
                .collect()
        } else {
            Vec::new()
        };
        (points, coverage, coverage_per_target)
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };
    Ok(PosteriorPass {
        log_scores: pooled.pointwise_lppd(),
        pooled: pooled.finish(),
        per_chain,
        draws_per_chain,
        points,
        coverage,
        coverage_per_target,
        rhat_test_loglik: rhat(&draw_loglik),
        rhat_test_rmse: rhat(&draw_rmse),
        pointwise_rhat_max: pointwise_rhats.iter().cloned().fold(f64::NAN, f64::max),
        pointwise_rhat_mean: pointwise_rhats.iter().sum::<f64>() / pointwise_rhats.len() as f64,
        ess_test_loglik: ess(&draw_loglik),
        pointwise_ess_median,
        gradients: leapfrog_sum,
        cumulative_lppd: cumulative,
        divergences,
        mean_accept_stat: accept_sum / stat_count.max(1) as f64,
        mean_leapfrog: leapfrog_sum / stat_count.max(1) as f64,
        max_tree_depth_hits: depth_hits,
        predictive_samples_per_point: global_draw.div_ceil(stride),
    })
}

/// The chains cut to the shortest one's length, if that has the 4 draws R-hat and ESS need.
fn common_prefix(series: &[Vec<f64>]) -> Option<Vec<&[f64]>> {
    let shortest = series.iter().map(Vec::len).min().unwrap_or(0);
    (shortest >= 4).then(|| series.iter().map(|s| &s[..shortest]).collect())
}

/// Type-7 (linear interpolation) quantile of sorted values.
fn quantile(sorted: &[f32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    let hi = (lo + 1).min(sorted.len() - 1);
    f64::from(sorted[lo]) + frac * (f64::from(sorted[hi]) - f64::from(sorted[lo]))
}

/// The members of a deep ensemble as an equal mixture (the DE baseline).
pub fn ensemble_metrics(
    posterior: &MlpPosterior,
    members: &[Vec<f32>],
    test: &HostData,
) -> PredictiveMetrics {
    ensemble_predictive(posterior, members, test).finish()
}

/// The deep ensemble's log predictive density of each test value, ordered as
/// [`PosteriorPass::log_scores`]: beside the posterior's, it shows which rows a sampler wins or
/// loses against the members it started from.
pub fn ensemble_log_scores(
    posterior: &MlpPosterior,
    members: &[Vec<f32>],
    test: &HostData,
) -> Vec<f64> {
    ensemble_predictive(posterior, members, test).pointwise_lppd()
}

/// The members' predictions as an equally weighted mixture.
fn ensemble_predictive(
    posterior: &MlpPosterior,
    members: &[Vec<f32>],
    test: &HostData,
) -> PredictiveAccumulator {
    let flat: Vec<f64> = members
        .iter()
        .flat_map(|m| m.iter().map(|&v| f64::from(v)))
        .collect();
    let mut acc = PredictiveAccumulator::new(&test.y, test.y_cols);
    for draw in posterior.predictions(&flat, test) {
        acc.add_draw(&draw);
    }
    acc
}

/// Each member of a deep ensemble on its own: the single networks behind the mixture, which show
/// a member that never fitted (a deep ReLU net stuck at the mean predicts with RMSE ≈ 1 on
/// standardized targets).
pub fn member_metrics(
    posterior: &MlpPosterior,
    members: &[Vec<f32>],
    test: &HostData,
) -> Vec<PredictiveMetrics> {
    members
        .iter()
        .map(|member| ensemble_metrics(posterior, std::slice::from_ref(member), test))
        .collect()
}
