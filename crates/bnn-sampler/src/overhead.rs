//! Measures the sampler's own cost per leapfrog step on a log density that costs almost nothing.

use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::chain::ChainStart;
use crate::draw_sink::{Draw, DrawSink, SinkError};
use crate::kernels::{HmcConfig, LapsConfig, MclmcConfig, NutsConfig};
use crate::log_density::{for_each_row, LogDensity, LogDensityError};
use crate::sampler::{AlgorithmConfig, SamplerConfig};

/// A standard normal in `dim` dimensions: about `2·dim` flops per evaluation, so a run's time is
/// almost all sampler work.
struct StandardNormalDensity {
    dim: usize,
}

impl LogDensity for StandardNormalDensity {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(self.dim, positions, log_densities, gradients, |q, g| {
            let mut sum = 0.0;
            for (x, g) in q.iter().zip(g.iter_mut()) {
                *g = -x;
                sum += x * x;
            }
            Ok(-0.5 * sum)
        })
    }
}

/// Counts leapfrog steps without storing draws.
#[derive(Default)]
struct LeapfrogCounter {
    n_leapfrog: u64,
    draws: u64,
    tree_depth: u64,
}

impl DrawSink for LeapfrogCounter {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
        self.n_leapfrog += u64::from(draw.stats.n_leapfrog);
        self.tree_depth += u64::from(draw.stats.tree_depth);
        self.draws += 1;
        Ok(())
    }
}

/// The cost of one kernel per leapfrog step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverheadMeasurement {
    pub algorithm: String,
    pub dim: usize,
    pub chains: usize,
    /// Warmup plus sampling transitions of all chains.
    pub transitions: u64,
    pub n_leapfrog: u64,
    pub mean_tree_depth: f64,
    pub seconds: f64,
    /// Everything (sampler plus density) per leapfrog step.
    pub us_per_leapfrog: f64,
    /// The density alone, per evaluation of one position.
    pub us_per_density_call: f64,
    /// The sampler's own work per leapfrog step: the difference of the two.
    pub us_sampler_per_leapfrog: f64,
}

/// Runs one chain of NUTS and one of HMC (16 steps), each `num_draws` warmup plus `num_draws`
/// sampling transitions with full adaptation, on a `dim`-dimensional standard normal on one
/// thread, and reports the time per leapfrog step with the density's own cost subtracted.
/// For the 2×16 MLP on concrete's 8 features with a heteroscedastic head, `dim = 450`.
///
/// Then one MCLMC chain as `bnn run` configures it (two gradients per transition: its cost per
/// gradient is what compares with NUTS's per leapfrog step), and 4 NUTS chains batched (one
/// `[C, D]` call per leapfrog step over the growing trees), the cost of the lockstep bookkeeping compared with the single chain (the per-row
/// density cost is the same here, so the difference is the sampler's). Last, 1024 LAPS chains
/// batched: the host's work per chain-gradient beside a GPU's.
pub fn measure_sampler_overhead(
    dim: usize,
    num_draws: usize,
    seed: u64,
) -> Vec<OverheadMeasurement> {
    let density = StandardNormalDensity { dim };
    let density_us = time_density(&density);
    let runs: [(&str, AlgorithmConfig, usize, bool); 5] = [
        ("nuts", NutsConfig::new().into(), 1, false),
        ("hmc", HmcConfig::new().with_num_steps(16).into(), 1, false),
        ("nuts_batched", NutsConfig::new().into(), 4, true),
        // As `bnn run --sampler mclmc` runs it (diagonal preconditioner from phase 2).
        (
            "mclmc",
            MclmcConfig::new()
                .with_diagonal_preconditioning(true)
                .into(),
            1,
            false,
        ),
        // A GPU-sized ensemble: the host's share of each `[1024, D]` call (issue "Thousands of
        // chains on a GPU": the kernel takes ~2.5 µs per chain-gradient on an H200).
        ("laps_batched_1024", LapsConfig::new().into(), 1024, true),
    ];
    runs.into_iter()
        .filter_map(|(name, algorithm, num_chains, batched)| {
            // The ensemble moves 1024 chains per transition: fewer transitions.
            let transitions = if num_chains > 100 {
                (num_draws / 20).max(10)
            } else {
                num_draws
            };
            let config = SamplerConfig::new(algorithm)
                .with_num_warmup(transitions)
                .with_num_draws(transitions)
                .with_seed(seed)
                .with_threads(Some(1))
                .with_batched(batched);
            let sampler = config.init().ok()?;
            let starts: Vec<ChainStart> = (0..num_chains)
                .map(|c| {
                    let start = (0..dim).map(|i| (((i + c) % 7) as f64 - 3.0) * 0.3);
                    ChainStart::at(start.collect())
                })
                .collect();
            let mut chains = sampler.init_chains(&density, &starts).ok()?;
            let mut counter = LeapfrogCounter::default();
            let began = Instant::now();
            sampler
                .run(&density, &mut chains, &mut counter, &AtomicBool::new(false))
                .ok()?;
            let seconds = began.elapsed().as_secs_f64();
            let per_leapfrog = 1e6 * seconds / counter.n_leapfrog.max(1) as f64;
            Some(OverheadMeasurement {
                algorithm: name.to_string(),
                dim,
                chains: num_chains,
                transitions: counter.draws,
                n_leapfrog: counter.n_leapfrog,
                mean_tree_depth: counter.tree_depth as f64 / counter.draws.max(1) as f64,
                seconds,
                us_per_leapfrog: per_leapfrog,
                us_per_density_call: density_us,
                us_sampler_per_leapfrog: per_leapfrog - density_us,
            })
        })
        .collect()
}

/// Microseconds per chain of one burn-in tuning step of a LAPS ensemble of `chains` chains in
/// `dim` dimensions (its means over the chains, each chain's moments, the copies of the shared
/// state), on synthetic positions: the host work a GPU run pays once per burn-in step besides
/// the isokinetic steps.
pub fn measure_ensemble_tuning(chains: usize, dim: usize, steps: usize) -> f64 {
    use crate::adaptation::ensemble_tuner::{fresh_ensemble, Ensemble, MemberView};
    use crate::draw_stats::DrawStats;
    let settings = LapsConfig::new().ensemble_settings(10_000);
    let (mut members, mut params) = fresh_ensemble(&settings, chains, dim, 0.1);
    let point = |c: usize, t: usize, scale: f64| -> Vec<f64> {
        (0..dim)
            .map(|i| scale * ((c * 31 + i * 17 + t * 7) as f64 * 0.618).sin())
            .collect()
    };
    let positions: Vec<Vec<f64>> = (0..chains).map(|c| point(c, 0, 1.0)).collect();
    let gradients: Vec<Vec<f64>> = (0..chains).map(|c| point(c, 1, -1.0)).collect();
    let stats = DrawStats {
        log_density: -1.0,
        energy_error: 0.01,
        ..DrawStats::default()
    };
    fn refs(v: &[Vec<f64>]) -> Vec<&[f64]> {
        v.iter().map(|x| &x[..]).collect()
    }
    Ensemble {
        members: members.iter_mut().collect(),
        params: params.iter_mut().collect(),
    }
    .start(0, &refs(&positions), &refs(&gradients));
    let began = Instant::now();
    for _ in 0..steps {
        let views: Vec<MemberView<'_>> = (0..chains)
            .map(|c| MemberView {
                position: &positions[c],
                gradient: &gradients[c],
                stats: &stats,
            })
            .collect();
        Ensemble {
            members: members.iter_mut().collect(),
            params: params.iter_mut().collect(),
        }
        .observe(black_box(&views));
    }
    1e6 * began.elapsed().as_secs_f64() / (steps * chains) as f64
}

/// Microseconds per single-position evaluation of `density`.
fn time_density(density: &StandardNormalDensity) -> f64 {
    let dim = density.dim;
    let position: Vec<f64> = (0..dim).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut gradient = vec![0.0; dim];
    let reps = 20_000;
    let began = Instant::now();
    for _ in 0..reps {
        let value = density.evaluate(black_box(&position), &mut gradient);
        black_box((&value, &gradient));
    }
    1e6 * began.elapsed().as_secs_f64() / reps as f64
}
