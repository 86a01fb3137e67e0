//! Surrogate-gradient NUTS: exact for any surrogate when leaves are weighted by the true H (and
//! visibly wrong when weighted by the surrogate's), equal to NUTS with a perfect surrogate, and
//! the adaptive mode's fallbacks and cool-downs as counted in the draws' statistics.

mod support;

use std::sync::Arc;

use bnn_sampler::{
    chain_rng, DiagonalMassMatrix, DrawStats, Kernel, KernelState, LogDensity, LogDensityError,
    NutsConfig, StepParams, SurrogateCounts, SurrogateGradient, SurrogateNutsConfig,
};
use support::targets::{CorrelatedGaussian, IidGaussian};
use support::{mcse_mean, mcse_multiplier, mcse_sd, pooled_mean, pooled_sd, Checks};

/// A Gaussian surrogate potential `Ũ(q) = ½ qᵀΛq` with its own precision `Λ` (row-major D×D).
#[derive(Debug)]
struct GaussianSurrogate {
    dim: usize,
    precision: Vec<f64>,
}

impl GaussianSurrogate {
    fn isotropic(dim: usize, precision: f64) -> Self {
        let mut matrix = vec![0.0; dim * dim];
        (0..dim).for_each(|i| matrix[i * dim + i] = precision);
        Self {
            dim,
            precision: matrix,
        }
    }
}

impl SurrogateGradient for GaussianSurrogate {
    fn dim(&self) -> usize {
        self.dim
    }

    fn gradient(&self, positions: &[f64], gradients: &mut [f64]) -> Result<(), LogDensityError> {
        for (q, g) in positions
            .chunks_exact(self.dim)
            .zip(gradients.chunks_exact_mut(self.dim))
        {
            for (i, g) in g.iter_mut().enumerate() {
                let row = &self.precision[i * self.dim..(i + 1) * self.dim];
                *g = -row.iter().zip(q).fold(0.0, |sum, (a, x)| sum + a * x);
            }
        }
        Ok(())
    }
}

/// The surrogate's own density `exp(−Ũ)`: sampling it with surrogate leaves is what weighting
/// leaves by `H_θ` instead of the true H would do.
struct SurrogateAsDensity<'a>(&'a GaussianSurrogate);

impl LogDensity for SurrogateAsDensity<'_> {
    fn dim(&self) -> usize {
        self.0.dim
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        self.0.gradient(positions, gradients)?;
        for ((q, g), v) in positions
            .chunks_exact(self.0.dim)
            .zip(gradients.chunks_exact(self.0.dim))
            .zip(values.iter_mut())
        {
            *v = 0.5 * q.iter().zip(g).map(|(x, g)| x * g).sum::<f64>();
        }
        Ok(())
    }
}

/// Per chain: (draws as rows, stats) of `draws` transitions after `warmup`, fixed step size,
/// identity metric, chains started at spread-out points.
/// The evaluation counts surrogate NUTS records in a draw's kernel statistics.
fn counts(stats: &DrawStats) -> SurrogateCounts {
    SurrogateCounts::of(stats)
}

fn run_chains<K: Kernel, L: LogDensity>(
    mut kernel: impl FnMut() -> K,
    density: &L,
    step_size: f64,
    chains: usize,
    warmup: usize,
    draws: usize,
) -> Vec<(Vec<Vec<f64>>, Vec<DrawStats>)> {
    let dim = density.dim();
    let metric = DiagonalMassMatrix::identity(dim);
    (0..chains)
        .map(|c| {
            let mut kernel = kernel();
            let mut rng = chain_rng(2026, c);
            let start = (0..dim)
                .map(|i| 0.5 * (c as f64 - 1.5) + 0.1 * i as f64)
                .collect();
            let mut state = KernelState::init(density, start).unwrap();
            let mut rows = Vec::with_capacity(draws);
            let mut stats = Vec::with_capacity(draws);
            for i in 0..warmup + draws {
                let params = StepParams {
                    step_size,
                    metric: &metric,
                    trajectory_length: None,
                };
                let (next, s) = kernel.step(density, &mut rng, state, params).unwrap();
                state = next;
                if i >= warmup {
                    rows.push(state.position.clone());
                    stats.push(s);
                }
            }
            (rows, stats)
        })
        .collect()
}

/// Means and standard deviations of every coordinate against the truth, within the Bonferroni
/// MCSE multiplier (≥ 4 MCSE; all pass with probability ≥ 0.999 under a correct sampler).
fn moment_checks(runs: &[(Vec<Vec<f64>>, Vec<DrawStats>)], sds: &[f64]) -> Checks {
    let k = mcse_multiplier(2 * sds.len());
    let mut checks = Checks::default();
    for (i, &sd) in sds.iter().enumerate() {
        let chains: Vec<Vec<f64>> = runs
            .iter()
            .map(|(rows, _)| rows.iter().map(|q| q[i]).collect())
            .collect();
        checks.within(
            &format!("mean q{i}"),
            pooled_mean(&chains),
            0.0,
            mcse_mean(&chains),
            k,
        );
        checks.within(
            &format!("sd q{i}"),
            pooled_sd(&chains),
            sd,
            mcse_sd(&chains),
            k,
        );
    }
    checks
}

fn exact_kernel(
    dim: usize,
    surrogate: &Arc<GaussianSurrogate>,
) -> impl FnMut() -> bnn_sampler::SurrogateNuts<GaussianSurrogate> + '_ {
    move || {
        SurrogateNutsConfig::new()
            .with_nuts(NutsConfig::new().with_max_tree_depth(8))
            .init(dim, Arc::clone(surrogate))
            .unwrap()
    }
}

/// A surrogate for N(0, 4I) moving the leaves on an N(0, I) target: exact mode recovers N(0, I)
/// at the price of acceptance; weighting with the surrogate's H gives its N(0, 4I) instead and
/// the same checks fail.
#[test]
fn exact_mode_samples_the_true_target_with_a_wrong_isotropic_surrogate() {
    let dim = 4;
    let target = IidGaussian {
        scales: vec![1.0; dim],
    };
    let surrogate = Arc::new(GaussianSurrogate::isotropic(dim, 0.25));
    let runs = run_chains(exact_kernel(dim, &surrogate), &target, 0.4, 4, 100, 1500);
    moment_checks(&runs, &[1.0; 4])
        .assert_all("exact surrogate NUTS, surrogate N(0, 4I), target N(0, I)");
    let stats: Vec<&DrawStats> = runs.iter().flat_map(|(_, s)| s).collect();
    assert!(stats
        .iter()
        .all(|s| counts(s).true_gradients == 0 && counts(s).true_densities == s.n_leapfrog));
    assert!(stats
        .iter()
        .all(|s| counts(s).surrogate_gradients >= s.n_leapfrog
            && counts(s).surrogate_gradients <= s.n_leapfrog + 2));

    let wrong = run_chains(
        exact_kernel(dim, &surrogate),
        &SurrogateAsDensity(&surrogate),
        0.4,
        4,
        100,
        1500,
    );
    assert!(
        !moment_checks(&wrong, &[1.0; 4]).passed(),
        "weighting the leaves by the surrogate's H must fail the same checks"
    );
}

/// A correlated target (sd 1 and 2, ρ = 0.9) moved by an isotropic, uncorrelated surrogate.
#[test]
fn exact_mode_samples_a_correlated_target_with_an_uncorrelated_surrogate() {
    let target = CorrelatedGaussian {
        sd: [1.0, 2.0],
        rho: 0.9,
    };
    let surrogate = Arc::new(GaussianSurrogate::isotropic(2, 1.0));
    let runs = run_chains(exact_kernel(2, &surrogate), &target, 0.3, 4, 100, 2000);
    let mut checks = moment_checks(&runs, &[1.0, 2.0]);
    // The correlation, through E[q0 q1] = ρ·1·2 against its batch-means standard error.
    let products: Vec<Vec<f64>> = runs
        .iter()
        .map(|(rows, _)| rows.iter().map(|q| q[0] * q[1]).collect())
        .collect();
    checks.within(
        "E[q0 q1]",
        pooled_mean(&products),
        1.8,
        mcse_mean(&products),
        mcse_multiplier(5),
    );
    checks.assert_all("exact surrogate NUTS, isotropic surrogate, correlated target");

    let surrogate_as_target = GaussianSurrogate::isotropic(2, 1.0);
    let wrong = run_chains(
        exact_kernel(2, &surrogate),
        &SurrogateAsDensity(&surrogate_as_target),
        0.3,
        4,
        100,
        2000,
    );
    assert!(!moment_checks(&wrong, &[1.0, 2.0]).passed());
}

/// With the exact force as surrogate, every leaf is the leapfrog's, bit for bit: the draws and
/// the tree statistics are plain NUTS's, only the evaluations differ (values instead of
/// gradients). The adaptive mode never falls back there.
#[test]
fn a_perfect_surrogate_reproduces_nuts_draw_for_draw() {
    let dim = 3;
    let target = IidGaussian {
        scales: vec![1.0; dim],
    };
    let surrogate = Arc::new(GaussianSurrogate::isotropic(dim, 1.0));
    let nuts = run_chains(
        || NutsConfig::new().with_max_tree_depth(8).init(dim).unwrap(),
        &target,
        0.5,
        2,
        0,
        300,
    );
    let exact = run_chains(exact_kernel(dim, &surrogate), &target, 0.5, 2, 0, 300);
    let adaptive = run_chains(
        || {
            SurrogateNutsConfig::new()
                .with_nuts(NutsConfig::new().with_max_tree_depth(8))
                .with_adaptive(true)
                .init(dim, Arc::clone(&surrogate))
                .unwrap()
        },
        &target,
        0.5,
        2,
        0,
        300,
    );
    let without_counts = |s: &DrawStats| DrawStats {
        kernel: Default::default(),
        ..*s
    };
    for ((plain, surrogate), monitored) in nuts.iter().zip(&exact).zip(&adaptive) {
        assert_eq!(plain.0, surrogate.0);
        assert_eq!(plain.0, monitored.0);
        for ((a, b), c) in plain.1.iter().zip(&surrogate.1).zip(&monitored.1) {
            assert_eq!(*a, without_counts(b));
            assert_eq!(*a, without_counts(c));
            assert_eq!(
                counts(c).true_gradients,
                0,
                "no fallback with a perfect surrogate"
            );
        }
    }
}

/// A surrogate 100× too stiff in adaptive mode: leaves blow past Δ_hnn = 10, fall back to true
/// gradients, and the next `cooldown` transitions run on true gradients only (no value-only
/// evaluations), after which the surrogate is tried again.
#[test]
fn adaptive_mode_falls_back_and_cools_down() {
    let dim = 2;
    let target = IidGaussian {
        scales: vec![1.0; dim],
    };
    let surrogate = Arc::new(GaussianSurrogate::isotropic(dim, 100.0));
    let cooldown = 4;
    let config = SurrogateNutsConfig::new()
        .with_nuts(NutsConfig::new().with_max_tree_depth(6))
        .with_adaptive(true)
        .with_cooldown(cooldown);
    let mut kernel = config.init(dim, Arc::clone(&surrogate)).unwrap();
    let metric = DiagonalMassMatrix::identity(dim);
    let mut rng = chain_rng(7, 0);
    let mut state = KernelState::init(&target, vec![0.3, -0.2]).unwrap();
    let mut stats = Vec::new();
    for _ in 0..200 {
        let (next, s) = kernel
            .step(
                &target,
                &mut rng,
                state,
                StepParams {
                    step_size: 0.5,
                    metric: &metric,
                    trajectory_length: None,
                },
            )
            .unwrap();
        state = next;
        stats.push(s);
    }
    let fell_back = |s: &DrawStats| counts(s).true_densities > 0 && counts(s).true_gradients > 0;
    let on_true_only =
        |s: &DrawStats| counts(s).true_densities == 0 && counts(s).true_gradients > s.n_leapfrog;
    let fallbacks: Vec<usize> = (0..stats.len()).filter(|&i| fell_back(&stats[i])).collect();
    assert!(
        fallbacks.len() > 5,
        "a 100× wrong surrogate must trigger fallbacks, got {}",
        fallbacks.len()
    );
    assert_eq!(kernel.fallbacks(), fallbacks.len() as u64);
    for &i in fallbacks
        .iter()
        .filter(|&&i| i + cooldown as usize + 1 < stats.len())
    {
        for j in i + 1..=i + cooldown as usize {
            assert!(
                on_true_only(&stats[j]),
                "transition {j}, {} after the fallback at {i}: {:?}",
                j - i,
                stats[j]
            );
        }
        assert!(
            counts(&stats[i + cooldown as usize + 1]).true_densities > 0,
            "the surrogate is tried again after the cool-down"
        );
    }
    // Every transition that neither fell back nor cooled down used the surrogate alone.
    let counted: u64 = stats
        .iter()
        .map(|s| u64::from(counts(s).true_gradients))
        .sum();
    assert_eq!(counted, kernel.counts().gradients);
}

/// The leaf that falls back is redone from its start with the true gradient: it ends exactly
/// where the true leapfrog step from that start ends, with one true gradient at each end.
#[test]
fn a_fallback_leaf_is_the_true_leapfrog_step_from_its_start() {
    use bnn_sampler::{MonitorConfig, PhasePoint, SurrogateLeapfrog, SurrogateMode};
    let target = IidGaussian {
        scales: vec![1.0; 2],
    };
    let metric = DiagonalMassMatrix::identity(2);
    let mut point = PhasePoint::new(2);
    let mut gradient = vec![0.0; 2];
    let log_density = target.evaluate(&[1.0, -0.5], &mut gradient).unwrap();
    point.reset_to(&[1.0, -0.5], &gradient, log_density);
    point.momentum.copy_from_slice(&[0.8, 0.3]);
    point.refresh_velocity(&metric);
    let mut reference = point.clone();
    reference.leapfrog(&target, &metric, 0.5).unwrap();

    let stiff = Arc::new(GaussianSurrogate::isotropic(2, 100.0));
    let mut integrator =
        SurrogateLeapfrog::new(stiff, SurrogateMode::Adaptive(MonitorConfig::default()));
    bnn_sampler::Integrator::begin_transition(&mut integrator, &point);
    point.step(&mut integrator, &target, &metric, 0.5).unwrap();
    assert_eq!(
        integrator.monitor().fallbacks,
        1,
        "a 100× stiff surrogate's leaf must exceed Δ_hnn here"
    );
    assert_eq!(
        (point.position.clone(), point.momentum.clone()),
        (reference.position.clone(), reference.momentum.clone())
    );
    assert_eq!(
        (point.log_density, point.kinetic_energy),
        (reference.log_density, reference.kinetic_energy)
    );
    let counts = integrator.counts();
    assert_eq!(
        (counts.gradients, counts.values),
        (2, 1),
        "true gradient at both ends, one surrogate leaf's value before"
    );
}
