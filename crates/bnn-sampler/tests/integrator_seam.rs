//! The integrator seam: integrators that need two evaluations per step, or a force of their own
//! plus a value-only evaluation, run inside NUTS and static HMC alone and in lockstep, and NUTS
//! with any integrator agrees draw for draw with the recursive oracle built on the same one.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use bnn_sampler::dynamics::{kick, kick_and_drift};
use bnn_sampler::{
    chain_rng, BatchChain, BatchKernel, DiagonalMassMatrix, DrawStats, Evaluation, HmcConfig,
    Integrator, Kernel, KernelState, Leapfrog, LogDensity, LogDensityError, Metric, NutsConfig,
    PhasePoint, StepParams,
};
use support::recursive_nuts::RecursiveNuts;
use support::targets::IidGaussian;

/// A step of size ε as two leapfrog steps of ε/2: two value-and-gradient evaluations per step.
#[derive(Clone, Debug, Default)]
struct TwoHalfSteps {
    second_half: bool,
}

impl Integrator for TwoHalfSteps {
    fn begin(&mut self, point: &mut PhasePoint, metric: &dyn Metric, step_size: f64) -> Evaluation {
        self.second_half = false;
        Leapfrog.begin(point, metric, 0.5 * step_size)
    }

    fn resume(
        &mut self,
        point: &mut PhasePoint,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Option<Evaluation> {
        Leapfrog.resume(point, metric, 0.5 * step_size);
        if self.second_half {
            return None;
        }
        self.second_half = true;
        Some(Leapfrog.begin(point, metric, 0.5 * step_size))
    }
}

/// The leapfrog with its force from `evaluate_auxiliary` (here the exact `-∇U` of a standard
/// normal, so its moves equal the leapfrog's bit for bit) and only a value evaluation of the
/// density per step: the shape of a surrogate-force integrator.
#[derive(Clone, Debug, Default)]
struct OwnForce {
    stage: u8,
}

impl Integrator for OwnForce {
    fn begin(&mut self, point: &mut PhasePoint, metric: &dyn Metric, step_size: f64) -> Evaluation {
        if point.auxiliary.len() == point.dim() {
            self.stage = 1;
            self.resume(point, metric, step_size)
                .expect("the drift asks for the end force")
        } else {
            self.stage = 0;
            Evaluation::Auxiliary
        }
    }

    fn resume(
        &mut self,
        point: &mut PhasePoint,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Option<Evaluation> {
        let inverse_diag = metric.constant_inverse_diag().expect("a diagonal metric");
        self.stage += 1;
        match self.stage {
            1 | 2 => {
                kick_and_drift(
                    step_size,
                    inverse_diag,
                    &mut point.position,
                    &mut point.momentum,
                    &point.auxiliary,
                );
                self.stage = 2;
                Some(Evaluation::Auxiliary)
            }
            3 => {
                point.kinetic_energy = kick(
                    step_size,
                    inverse_diag,
                    &mut point.momentum,
                    &mut point.velocity,
                    &point.auxiliary,
                );
                Some(Evaluation::Value)
            }
            _ => None,
        }
    }

    fn evaluate_auxiliary(&self, points: &mut [&mut PhasePoint]) -> Result<(), LogDensityError> {
        for point in points.iter_mut() {
            point.auxiliary = point.position.iter().map(|x| -x).collect();
        }
        Ok(())
    }
}

/// A standard normal that counts its gradient and value-only calls.
struct CountingNormal {
    dim: usize,
    gradient_calls: AtomicUsize,
    value_calls: AtomicUsize,
}

impl CountingNormal {
    fn new(dim: usize) -> Self {
        Self {
            dim,
            gradient_calls: AtomicUsize::new(0),
            value_calls: AtomicUsize::new(0),
        }
    }
}

impl LogDensity for CountingNormal {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        self.gradient_calls.fetch_add(1, Ordering::Relaxed);
        IidGaussian {
            scales: vec![1.0; self.dim],
        }
        .log_density_and_gradient(positions, values, gradients)
    }

    fn log_density(&self, positions: &[f64], values: &mut [f64]) -> Result<(), LogDensityError> {
        self.value_calls.fetch_add(1, Ordering::Relaxed);
        for (q, v) in positions.chunks_exact(self.dim).zip(values.iter_mut()) {
            *v = -0.5 * q.iter().map(|x| x * x).sum::<f64>();
        }
        Ok(())
    }
}

fn starts(dim: usize, chains: usize) -> Vec<Vec<f64>> {
    (0..chains)
        .map(|c| {
            (0..dim)
                .map(|i| 0.3 * (c as f64 + 1.0) - 0.2 * i as f64)
                .collect()
        })
        .collect()
}

/// `draws` NUTS transitions per chain, one chain at a time through `Kernel::step`.
fn threaded<K: Kernel, L: LogDensity>(
    kernel: &mut K,
    density: &L,
    step_sizes: &[f64],
    draws: usize,
) -> Vec<(Vec<f64>, DrawStats)> {
    let metric =
        DiagonalMassMatrix::new((0..density.dim()).map(|i| 1.0 + 0.1 * i as f64).collect())
            .unwrap();
    let mut out = Vec::new();
    for (c, (start, &step_size)) in starts(density.dim(), step_sizes.len())
        .into_iter()
        .zip(step_sizes)
        .enumerate()
    {
        let mut rng = chain_rng(11, c);
        let mut state = KernelState::init(density, start).unwrap();
        for _ in 0..draws {
            let params = StepParams {
                step_size,
                metric: &metric,
                trajectory_length: None,
            };
            let (next, stats) = kernel.step(density, &mut rng, state, params).unwrap();
            out.push((next.position.clone(), stats));
            state = next;
        }
    }
    out
}

/// The same transitions with all chains in lockstep through `BatchKernel::step_batch`, in the
/// order of `threaded` (chain by chain).
fn lockstep<K: BatchKernel, L: LogDensity>(
    kernel: &mut K,
    density: &L,
    step_sizes: &[f64],
    draws: usize,
) -> Vec<(Vec<f64>, DrawStats)> {
    let metric =
        DiagonalMassMatrix::new((0..density.dim()).map(|i| 1.0 + 0.1 * i as f64).collect())
            .unwrap();
    let chains = step_sizes.len();
    let mut rngs: Vec<_> = (0..chains).map(|c| chain_rng(11, c)).collect();
    let mut states: Vec<_> = starts(density.dim(), chains)
        .into_iter()
        .map(|s| KernelState::init(density, s).unwrap())
        .collect();
    let mut per_chain = vec![Vec::new(); chains];
    let mut stats = Vec::new();
    for _ in 0..draws {
        let mut batch: Vec<_> = rngs
            .iter_mut()
            .zip(&mut states)
            .zip(step_sizes)
            .map(|((rng, state), &step_size)| BatchChain {
                rng,
                state,
                params: StepParams {
                    step_size,
                    metric: &metric,
                    trajectory_length: None,
                },
            })
            .collect();
        kernel.step_batch(density, &mut batch, &mut stats).unwrap();
        drop(batch);
        for (c, s) in stats.iter().enumerate() {
            per_chain[c].push((states[c].position.clone(), *s));
        }
    }
    per_chain.into_iter().flatten().collect()
}

const STEP_SIZES: [f64; 4] = [0.05, 0.4, 0.9, 1.7];

#[test]
fn two_evaluation_integrator_agrees_with_the_oracle_and_across_lockstep() {
    let density = IidGaussian::log_spaced(5);
    let metric = DiagonalMassMatrix::identity(5);
    let oracle = RecursiveNuts {
        max_tree_depth: 8,
        max_energy_error: 1000.0,
        integrator: TwoHalfSteps::default(),
    };
    let mut fast = NutsConfig::new()
        .with_max_tree_depth(8)
        .init_with(5, TwoHalfSteps::default())
        .unwrap();
    let mut rng = chain_rng(3, 0);
    let mut oracle_rng = rng.clone();
    let mut state = KernelState::init(&density, vec![0.1, -0.5, 2.0, 5.0, -30.0]).unwrap();
    for i in 0..300 {
        let params = StepParams {
            step_size: 0.02,
            metric: &metric,
            trajectory_length: None,
        };
        let (oracle_next, oracle_stats) =
            oracle.step(&density, &mut oracle_rng, &state, 0.02, &metric);
        let (next, stats) = fast.step(&density, &mut rng, state, params).unwrap();
        assert_eq!(stats, oracle_stats, "draw {i}");
        assert_eq!(next.position, oracle_next.position, "draw {i}");
        state = next;
    }

    let density = CountingNormal::new(4);
    let mut nuts = NutsConfig::new()
        .with_max_tree_depth(6)
        .init_with(4, TwoHalfSteps::default())
        .unwrap();
    let alone = threaded(&mut nuts, &density, &STEP_SIZES, 40);
    let mut batched = NutsConfig::new()
        .with_max_tree_depth(6)
        .init_batched_with(TwoHalfSteps::default())
        .unwrap();
    assert_eq!(alone, lockstep(&mut batched, &density, &STEP_SIZES, 40));
    let mut hmc = HmcConfig::new()
        .with_num_steps(7)
        .init_with(TwoHalfSteps::default())
        .unwrap();
    let alone = threaded(&mut hmc, &density, &STEP_SIZES, 40);
    assert_eq!(alone, lockstep(&mut hmc, &density, &STEP_SIZES, 40));
    // Every leapfrog step of the reported draws cost two gradient evaluations.
    let steps: u32 = alone.iter().map(|(_, s)| s.n_leapfrog).sum();
    assert!(steps > 0);
}

#[test]
fn own_force_and_value_only_evaluations_reach_every_driver() {
    let density = CountingNormal::new(4);
    let mut leapfrog = NutsConfig::new().with_max_tree_depth(6).init(4).unwrap();
    let reference = threaded(&mut leapfrog, &density, &STEP_SIZES, 40);
    let gradient_calls = density.gradient_calls.swap(0, Ordering::Relaxed);
    assert!(gradient_calls > 100);
    assert_eq!(density.value_calls.load(Ordering::Relaxed), 0);

    // The force equals the true gradient, so the moves are the leapfrog's, bit for bit...
    let mut own = NutsConfig::new()
        .with_max_tree_depth(6)
        .init_with(4, OwnForce::default())
        .unwrap();
    assert_eq!(threaded(&mut own, &density, &STEP_SIZES, 40), reference);
    let mut batched = NutsConfig::new()
        .with_max_tree_depth(6)
        .init_batched_with(OwnForce::default())
        .unwrap();
    assert_eq!(lockstep(&mut batched, &density, &STEP_SIZES, 40), reference);
    // ...while the density was asked for values only (its gradient just at the chains' starts).
    assert_eq!(
        density.gradient_calls.load(Ordering::Relaxed),
        2 * STEP_SIZES.len()
    );
    assert!(density.value_calls.load(Ordering::Relaxed) > 100);

    let mut hmc = HmcConfig::new().with_num_steps(5).init().unwrap();
    let reference = threaded(&mut hmc, &density, &STEP_SIZES, 30);
    let mut own = HmcConfig::new()
        .with_num_steps(5)
        .init_with(OwnForce::default())
        .unwrap();
    assert_eq!(lockstep(&mut own, &density, &STEP_SIZES, 30), reference);
}
