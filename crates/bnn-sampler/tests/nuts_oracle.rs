//! The iterative NUTS agrees draw for draw with the recursive textbook oracle.
//!
//! Both kernels start from the same state with clones of the same random stream, and must then
//! produce bit-identical draws and statistics and consume exactly the same random numbers
//! (the streams stay equal), for thousands of transitions over targets that exercise U-turns at
//! every depth, the maximum tree depth and divergences (energy blow-ups and evaluation errors).

mod support;

use bnn_sampler::{
    chain_rng, DiagonalMassMatrix, Kernel, KernelState, LogDensity, LogDensityError, NutsConfig,
    StepParams,
};
use support::recursive_nuts::RecursiveNuts;
use support::targets::{
    CorrelatedGaussian, Funnel, GaussianMixture, IidGaussian, LogisticRegression,
};

#[derive(Default, Debug)]
struct Coverage {
    draws: usize,
    divergent: usize,
    depth_limit: usize,
    turned: usize,
    max_depth_seen: u32,
}

// A test helper: the settings of one oracle comparison, each named at the call.
#[allow(clippy::too_many_arguments)]
fn agree<L: LogDensity>(
    name: &str,
    density: &L,
    start: Vec<f64>,
    step_size: f64,
    metric: &DiagonalMassMatrix,
    max_tree_depth: u32,
    draws: usize,
    seed: u64,
) -> Coverage {
    let mut fast = NutsConfig::new()
        .with_max_tree_depth(max_tree_depth)
        .init(density.dim())
        .unwrap();
    let oracle = RecursiveNuts::new(max_tree_depth, 1000.0);
    let mut fast_rng = chain_rng(seed, 0);
    let mut oracle_rng = fast_rng.clone();
    let mut fast_state = KernelState::init(density, start).unwrap();
    let mut oracle_state = fast_state.clone();
    let mut coverage = Coverage::default();
    for i in 0..draws {
        let (next, stats) = fast
            .step(
                density,
                &mut fast_rng,
                fast_state,
                StepParams {
                    step_size,
                    metric,
                    trajectory_length: None,
                },
            )
            .unwrap();
        let (oracle_next, oracle_stats) =
            oracle.step(density, &mut oracle_rng, &oracle_state, step_size, metric);
        assert_eq!(stats, oracle_stats, "{name}: statistics differ at draw {i}");
        assert_eq!(
            next.position, oracle_next.position,
            "{name}: positions differ at draw {i}"
        );
        assert_eq!(
            next.gradient, oracle_next.gradient,
            "{name}: gradients differ at draw {i}"
        );
        assert!(
            fast_rng == oracle_rng,
            "{name}: random streams diverged at draw {i}"
        );
        coverage.draws += 1;
        coverage.divergent += usize::from(stats.divergent);
        coverage.depth_limit += usize::from(stats.tree_depth == max_tree_depth);
        coverage.turned += usize::from(!stats.divergent && stats.tree_depth < max_tree_depth);
        coverage.max_depth_seen = coverage.max_depth_seen.max(stats.tree_depth);
        fast_state = next;
        oracle_state = oracle_next;
    }
    coverage
}

/// A standard normal whose log density fails to evaluate outside `|x_0| < 2.5`.
struct FailsOutside;

impl LogDensity for FailsOutside {
    fn dim(&self) -> usize {
        3
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        if positions.chunks_exact(3).any(|q| q[0].abs() >= 2.5) {
            return Err(LogDensityError::recoverable("outside the domain"));
        }
        IidGaussian {
            scales: vec![1.0; 3],
        }
        .log_density_and_gradient(positions, values, gradients)
    }
}

#[test]
fn iterative_nuts_matches_recursive_oracle() {
    let mut total = Coverage::default();
    let mut add = |c: Coverage| {
        total.draws += c.draws;
        total.divergent += c.divergent;
        total.depth_limit += c.depth_limit;
        total.turned += c.turned;
        total.max_depth_seen = total.max_depth_seen.max(c.max_depth_seen);
    };

    let gaussian = IidGaussian::log_spaced(10);
    let start: Vec<f64> = gaussian.scales.iter().map(|s| 0.5 * s).collect();
    // Identity metric on scales 1e-2..1e2: small steps, the depth limit is hit constantly.
    add(agree(
        "iid, depth limit",
        &gaussian,
        start.clone(),
        0.01,
        &DiagonalMassMatrix::identity(10),
        6,
        300,
        1,
    ));
    // Well-preconditioned: ordinary U-turns at depths 1-4.
    let metric = DiagonalMassMatrix::new(gaussian.scales.iter().map(|s| s * s).collect()).unwrap();
    add(agree(
        "iid, adapted metric",
        &gaussian,
        start,
        0.7,
        &metric,
        10,
        1500,
        2,
    ));

    let correlated = CorrelatedGaussian {
        sd: [1.0, 2.0],
        rho: 0.9,
    };
    add(agree(
        "correlated",
        &correlated,
        vec![0.5, -0.5],
        0.15,
        &DiagonalMassMatrix::identity(2),
        10,
        1500,
        3,
    ));

    let funnel = Funnel { dim: 10 };
    let mut funnel_start = vec![0.1; 10];
    funnel_start[0] = -1.0;
    add(agree(
        "funnel",
        &funnel,
        funnel_start,
        0.4,
        &DiagonalMassMatrix::identity(10),
        10,
        600,
        4,
    ));

    let mixture = GaussianMixture {
        weights: vec![0.3, 0.7],
        means: vec![-2.0, 2.0],
        sds: vec![1.0, 1.0],
    };
    add(agree(
        "mixture",
        &mixture,
        vec![-2.0],
        0.9,
        &DiagonalMassMatrix::identity(1),
        10,
        1500,
        5,
    ));

    let logistic = LogisticRegression::synthetic(100, &[0.3, -1.0, 2.0, 0.5], 2.5, 11);
    add(agree(
        "logistic",
        &logistic,
        vec![0.0; 4],
        0.2,
        &DiagonalMassMatrix::identity(4),
        10,
        800,
        6,
    ));

    // Steps large enough to be unstable: energy-error divergences.
    add(agree(
        "unstable steps",
        &IidGaussian {
            scales: vec![1.0; 5],
        },
        vec![0.3; 5],
        2.3,
        &DiagonalMassMatrix::identity(5),
        10,
        500,
        7,
    ));
    // Evaluation errors are divergences too.
    add(agree(
        "evaluation errors",
        &FailsOutside,
        vec![0.0; 3],
        0.9,
        &DiagonalMassMatrix::identity(3),
        10,
        1000,
        8,
    ));

    assert!(total.draws >= 7000);
    assert!(total.divergent >= 20, "divergences exercised: {total:?}");
    assert!(total.depth_limit >= 100, "depth limit exercised: {total:?}");
    assert!(total.turned >= 3000, "U-turns exercised: {total:?}");
    assert!(total.max_depth_seen >= 6, "deep trees exercised: {total:?}");
}
