//! Shared pieces of the end-to-end tests: target densities, reference values and MCSE checks.
#![allow(dead_code)]

pub mod held_out;
pub mod recursive_nuts;
pub mod targets;

use std::sync::atomic::{AtomicBool, Ordering};

use bnn_sampler::{
    AlgorithmConfig, ChainStart, ChainState, CollectedDraws, Draw, DrawSink, LogDensity, RunStatus,
    Sampler, SamplerConfig, SinkError,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `Φ(x)`, the standard normal CDF, via `erfc` (Numerical Recipes' Chebyshev fit, relative
/// error below 1.2e-7: far below any tolerance it is used for).
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// `Φ⁻¹(p)` by bisection on `normal_cdf`.
pub fn normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0, 40.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if normal_cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Number of MCSEs allowed for each of `m` simultaneous checks: at least 4, and enough that
/// under a correct sampler (normal estimation errors) all `m` pass with probability ≥ 0.999
/// (Bonferroni: `Φ⁻¹(1 - 0.0005/m)`; 4.42 for m = 100).
pub fn mcse_multiplier(m: usize) -> f64 {
    normal_quantile(1.0 - 0.0005 / m.max(1) as f64).max(4.0)
}

/// Type-7 (linear interpolation) quantile of all draws pooled.
pub fn pooled_quantile(chains: &[Vec<f64>], p: f64) -> f64 {
    let mut all: Vec<f64> = chains.iter().flatten().copied().collect();
    all.sort_by(|a, b| a.total_cmp(b));
    let h = (all.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(all.len() - 1);
    all[lo] + (h - lo as f64) * (all[hi] - all[lo])
}

pub fn pooled_mean(chains: &[Vec<f64>]) -> f64 {
    let n: usize = chains.iter().map(Vec::len).sum();
    chains.iter().flatten().sum::<f64>() / n as f64
}

/// Sample standard deviation of all draws pooled.
pub fn pooled_sd(chains: &[Vec<f64>]) -> f64 {
    let mean = pooled_mean(chains);
    let n: usize = chains.iter().map(Vec::len).sum();
    (chains
        .iter()
        .flatten()
        .map(|x| (x - mean).powi(2))
        .sum::<f64>()
        / (n - 1) as f64)
        .sqrt()
}

pub fn mcse_mean(chains: &[Vec<f64>]) -> f64 {
    bnn_diagnostics::mcse_mean(chains)
}

pub fn mcse_sd(chains: &[Vec<f64>]) -> f64 {
    bnn_diagnostics::mcse_sd(chains)
}

pub fn mcse_quantile(chains: &[Vec<f64>], p: f64) -> f64 {
    bnn_diagnostics::mcse_quantile(chains, p)
}

/// Collects failed checks so a test reports all of them at once.
#[derive(Default)]
pub struct Checks {
    failures: Vec<String>,
    count: usize,
}

impl Checks {
    /// `|estimate - truth| < k · mcse`.
    pub fn within(&mut self, name: &str, estimate: f64, truth: f64, mcse: f64, k: f64) {
        self.count += 1;
        let z = (estimate - truth) / mcse;
        if !(z.abs() < k) {
            self.failures.push(format!(
                "{name}: estimate {estimate:.6} vs {truth:.6}, MCSE {mcse:.3e}, |z| = {:.2} ≥ {k:.2}",
                z.abs()
            ));
        }
    }

    pub fn require(&mut self, name: &str, ok: bool, detail: String) {
        self.count += 1;
        if !ok {
            self.failures.push(format!("{name}: {detail}"));
        }
    }

    /// Whether every check so far passed (for tests that show a broken sampler fails them).
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    pub fn assert_all(self, context: &str) {
        assert!(
            self.failures.is_empty(),
            "{context}: {} of {} checks failed:\n{}",
            self.failures.len(),
            self.count,
            self.failures.join("\n")
        );
    }
}

/// Starts for `chains` chains drawn uniformly in `[-spread, spread]^dim` with a fixed seed.
pub fn uniform_starts(chains: usize, dim: usize, spread: f64, seed: u64) -> Vec<ChainStart> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..chains)
        .map(|_| {
            ChainStart::at(
                (0..dim)
                    .map(|_| spread * (2.0 * rng.random::<f64>() - 1.0))
                    .collect(),
            )
        })
        .collect()
}

/// Mean accept_stat over all sampling draws.
pub fn mean_accept(draws: &CollectedDraws) -> f64 {
    pooled_mean(&draws.stat(|s| s.accept_stat))
}

pub fn divergences(draws: &CollectedDraws) -> usize {
    (0..draws.num_chains())
        .map(|c| draws.stats(c).iter().filter(|s| s.divergent).count())
        .sum()
}

/// A sink that collects the draws and raises the stop flag once chain 0 has produced `after`
/// draws (warmup included): a run stopped there, serialized and resumed, is compared with an
/// uninterrupted one.
pub struct StopAfter<'a> {
    pub inner: CollectedDraws,
    pub after: usize,
    pub seen: usize,
    pub stop: &'a AtomicBool,
}

impl DrawSink for StopAfter<'_> {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
        if draw.chain == 0 {
            self.seen += 1;
            if self.seen == self.after {
                self.stop.store(true, Ordering::SeqCst);
            }
        }
        self.inner.record(draw)
    }
}

/// Runs chains from `starts` to the end (warmup draws kept when asked); the draws and the final
/// chain states.
pub fn run_to_end<L: LogDensity + ?Sized>(
    sampler: &Sampler,
    target: &L,
    starts: &[ChainStart],
    keep_warmup: bool,
) -> (CollectedDraws, Vec<ChainState>) {
    let mut chains = sampler.init_chains(target, starts).unwrap();
    let mut draws = CollectedDraws::new(starts.len(), target.dim()).with_warmup(keep_warmup);
    let status = sampler
        .run(target, &mut chains, &mut draws, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(status, RunStatus::Finished);
    (draws, chains)
}

/// Runs from `starts` stopped after each of `afters` draws of chain 0 (warmup included),
/// serialized and resumed: the draws and final states must be those of an uninterrupted run.
pub fn assert_resumes_bit_for_bit<L: LogDensity + ?Sized>(
    sampler: &Sampler,
    target: &L,
    starts: &[ChainStart],
    afters: &[usize],
) {
    let (whole, whole_chains) = run_to_end(sampler, target, starts, true);
    for &after in afters {
        let stop = AtomicBool::new(false);
        let mut chains = sampler.init_chains(target, starts).unwrap();
        let mut first = StopAfter {
            inner: CollectedDraws::new(starts.len(), target.dim()).with_warmup(true),
            after,
            seen: 0,
            stop: &stop,
        };
        assert_eq!(
            sampler.run(target, &mut chains, &mut first, &stop).unwrap(),
            RunStatus::Stopped
        );
        let json = serde_json::to_string(&chains).unwrap();
        let mut resumed: Vec<ChainState> = serde_json::from_str(&json).unwrap();
        assert_eq!(resumed, chains, "stopped after {after}");
        let mut rest = first.inner;
        assert_eq!(
            sampler
                .run(target, &mut resumed, &mut rest, &AtomicBool::new(false))
                .unwrap(),
            RunStatus::Finished
        );
        assert_eq!(rest, whole, "stopped after {after}");
        assert_eq!(resumed, whole_chains, "stopped after {after}");
    }
}

/// Runs `algorithm` from `starts` threaded on 1, 2 and 3 threads and batched: every draw and
/// final chain state must be the same.
pub fn assert_same_draws_whatever_threads<L: LogDensity + ?Sized>(
    algorithm: AlgorithmConfig,
    (warmup, draws, seed): (usize, usize, u64),
    target: &L,
    starts: &[ChainStart],
) {
    let run = |threads: Option<usize>, batched: bool| {
        let sampler = SamplerConfig::new(algorithm.clone())
            .with_num_warmup(warmup)
            .with_num_draws(draws)
            .with_seed(seed)
            .with_threads(threads)
            .with_batched(batched)
            .init()
            .unwrap();
        run_to_end(&sampler, target, starts, true)
    };
    let (reference, chains) = run(Some(1), false);
    for (threads, batched) in [(Some(2), false), (Some(3), false), (None, true)] {
        let (other, other_chains) = run(threads, batched);
        assert_eq!(other, reference, "threads {threads:?}, batched {batched}");
        assert_eq!(
            other_chains, chains,
            "threads {threads:?}, batched {batched}"
        );
    }
}
