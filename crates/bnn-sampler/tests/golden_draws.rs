//! Golden draws: hashes of the exact draws and statistics of MSD (both integrators, the kernel
//! and the bare transition) and of batched MCLMC and MAMS, recorded before a refactor that must
//! not change a single floating-point operation. A changed hash means changed draws: if that
//! was meant (a new algorithm, not a refactor), record the new hashes and say why.

mod support;

use bnn_numerics::{Cholesky, MetricFactor};
use bnn_sampler::draw_stats::StatColumn;
use bnn_sampler::{
    msd_transition, ChainStart, CollectedDraws, LogDensityError, MamsConfig, MclmcConfig, MetricAt,
    MsdConfig, MsdParams, MsdState, RiemannianDensity, SamplerConfig, SamplerSettings,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use support::targets::IidGaussian;
use support::uniform_starts;

/// FNV-1a over the `Debug` text of what is hashed (`Debug` prints an `f64` so that it reads
/// back to the same bits).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, value: &impl std::fmt::Debug) {
        for byte in format!("{value:?}").bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The statistics as the hashes were recorded: `DrawStats` when each kernel statistic was a
/// field of its own (before `DrawStats::kernel`), rebuilt from the kernel's declared columns so
/// that its `Debug` text, and so the hash, is the recorded one whenever the numbers are.
mod recorded {
    use bnn_sampler::draw_stats::{kernel_stat, StatColumn};

    #[derive(Debug)]
    #[allow(dead_code)] // read through `Debug` only
    pub struct DrawStats {
        log_density: f64,
        accept_stat: f64,
        step_size: f64,
        tree_depth: u32,
        n_leapfrog: u32,
        divergent: bool,
        energy: f64,
        energy_error: f64,
        trajectory_length: f64,
        fixed_point_iterations: u32,
        true_gradients: u32,
        true_densities: u32,
        surrogate_gradients: u32,
    }

    impl DrawStats {
        pub fn from(stats: &bnn_sampler::DrawStats, columns: &[StatColumn]) -> Self {
            let column = |name| kernel_stat(stats, columns, name).unwrap_or(0.0);
            Self {
                log_density: stats.log_density,
                accept_stat: stats.accept_stat,
                step_size: stats.step_size,
                tree_depth: stats.tree_depth,
                n_leapfrog: stats.n_leapfrog,
                divergent: stats.divergent,
                energy: stats.energy,
                energy_error: stats.energy_error,
                trajectory_length: column("trajectory_length__"),
                fixed_point_iterations: column("fixed_point_iterations__") as u32,
                true_gradients: 0,
                true_densities: 0,
                surrogate_gradients: 0,
            }
        }
    }
}

fn hash_draws(draws: &CollectedDraws, columns: &[StatColumn]) -> u64 {
    let mut hash = Fnv::new();
    for c in 0..draws.num_chains() {
        hash.add(&draws.chain(c).positions);
        let stats: Vec<recorded::DrawStats> = draws
            .stats(c)
            .iter()
            .map(|stats| recorded::DrawStats::from(stats, columns))
            .collect();
        hash.add(&stats);
    }
    hash.0
}

/// N(0, diag(1, 4, 0.25)) under G(θ) = diag(1 + θ₁², 1 + θ₂²/2, 2 + θ₃²): a metric that moves
/// with θ in every coordinate.
struct Toy;

impl Toy {
    fn metric_diagonal(q: &[f64]) -> ([f64; 3], [f64; 3]) {
        (
            [
                1.0 + q[0] * q[0],
                1.0 + 0.5 * q[1] * q[1],
                2.0 + q[2] * q[2],
            ],
            [2.0 * q[0], q[1], 2.0 * q[2]],
        )
    }
}

const SCALES: [f64; 3] = [1.0, 2.0, 0.5];

impl RiemannianDensity for Toy {
    fn dim(&self) -> usize {
        3
    }

    /// `log p = −U`, negated from `U` (exactly), as the potential-signed version computed it.
    fn evaluate(&self, q: &[f64], gradient: &mut [f64]) -> Result<f64, LogDensityError> {
        let mut u = 0.0;
        for i in 0..3 {
            let s2 = SCALES[i] * SCALES[i];
            gradient[i] = -(q[i] / s2);
            u += 0.5 * q[i] * q[i] / s2;
        }
        Ok(-u)
    }

    fn metric_at(&self, q: &[f64]) -> Result<MetricAt, LogDensityError> {
        let (g, _) = Self::metric_diagonal(q);
        let matrix = [g[0], 0.0, 0.0, 0.0, g[1], 0.0, 0.0, 0.0, g[2]];
        let factor = Cholesky::new(&matrix, 3).map_err(|e| LogDensityError::new(e.to_string()))?;
        Ok(MetricAt {
            metric: MetricFactor::Dense(factor),
            cache: Box::new(q.to_vec()),
        })
    }

    fn log_det_gradient(&self, point: &MetricAt) -> Result<Vec<f64>, LogDensityError> {
        let q = point.cache.downcast_ref::<Vec<f64>>().unwrap();
        let (g, dg) = Self::metric_diagonal(q);
        Ok((0..3).map(|i| 0.5 * dg[i] / g[i]).collect())
    }

    fn kinetic_gradient(
        &self,
        point: &MetricAt,
        velocity: &[f64],
    ) -> Result<Vec<f64>, LogDensityError> {
        let q = point.cache.downcast_ref::<Vec<f64>>().unwrap();
        let (_, dg) = Self::metric_diagonal(q);
        Ok((0..3)
            .map(|i| -0.5 * velocity[i] * velocity[i] * dg[i])
            .collect())
    }
}

struct ToyTarget;

impl bnn_sampler::LogDensity for ToyTarget {
    fn dim(&self) -> usize {
        3
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        bnn_sampler::for_each_row(3, positions, log_densities, gradients, |q, g| {
            Toy.evaluate(q, g)
        })
    }

    fn riemannian(&self) -> Option<&dyn RiemannianDensity> {
        Some(&Toy)
    }
}

fn msd_kernel_hash(frozen_metric: bool) -> u64 {
    let starts: Vec<ChainStart> = (0..3)
        .map(|c| ChainStart::at(vec![0.2 * c as f64 - 0.3, 0.5, -0.1 * c as f64]))
        .collect();
    let config = MsdConfig::new()
        .with_persistence(0.8)
        .with_frozen_metric(frozen_metric);
    let columns = config.stat_columns();
    let draws = SamplerConfig::new(config.into())
        .with_num_warmup(150)
        .with_num_draws(300)
        .with_seed(17)
        .with_threads(Some(2))
        .init()
        .unwrap()
        .sample(&ToyTarget, &starts)
        .unwrap();
    hash_draws(&draws, columns)
}

fn msd_transition_hash(frozen_metric: bool) -> u64 {
    let params = MsdParams {
        step_size: 0.7,
        persistence: 0.6,
        frozen_metric,
        ..MsdParams::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    let mut state = MsdState::at(&Toy, vec![0.3, -0.5, 0.2]).unwrap();
    let mut hash = Fnv::new();
    for _ in 0..400 {
        let (next, info) = msd_transition(&Toy, &mut rng, state, &params);
        hash.add(&next.position);
        hash.add(&next.momentum);
        hash.add(&info);
        state = next;
    }
    hash.0
}

fn batched_hash(
    config: bnn_sampler::AlgorithmConfig,
    columns: &[StatColumn],
    batched: bool,
) -> u64 {
    let target = IidGaussian::log_spaced(7);
    let starts = uniform_starts(4, 7, 1.0, 3);
    let draws = SamplerConfig::new(config)
        .with_num_warmup(200)
        .with_num_draws(150)
        .with_seed(5)
        .with_threads(Some(2))
        .with_batched(batched)
        .init()
        .unwrap()
        .sample(&target, &starts)
        .unwrap();
    hash_draws(&draws, columns)
}

#[test]
fn draws_match_the_recorded_hashes() {
    let hashes = [
        ("msd kernel", msd_kernel_hash(false)),
        ("msd kernel frozen", msd_kernel_hash(true)),
        ("msd transition", msd_transition_hash(false)),
        ("msd transition frozen", msd_transition_hash(true)),
        (
            "mclmc batched",
            batched_hash(
                MclmcConfig::new().into(),
                MclmcConfig::new().stat_columns(),
                true,
            ),
        ),
        (
            "mclmc threaded",
            batched_hash(
                MclmcConfig::new().into(),
                MclmcConfig::new().stat_columns(),
                false,
            ),
        ),
        (
            "mams batched",
            batched_hash(
                MamsConfig::new().into(),
                MamsConfig::new().stat_columns(),
                true,
            ),
        ),
        (
            "mams threaded",
            batched_hash(
                MamsConfig::new().into(),
                MamsConfig::new().stat_columns(),
                false,
            ),
        ),
    ];
    let recorded = [
        0x5d7d_093e_fe90_dfd3,
        0x6897_0428_1987_e3d6,
        0x8cb7_92c1_d6fd_e7a6,
        0xabec_0d80_4eef_d336,
        0x06d7_79bf_4403_daf8,
        0x06d7_79bf_4403_daf8,
        0x92cf_3730_4699_7ffd,
        0x92cf_3730_4699_7ffd,
    ];
    for ((name, hash), expected) in hashes.iter().zip(recorded) {
        println!("GOLDEN {name}: {hash:#018x}");
        assert_eq!(*hash, expected, "{name}: the draws changed");
    }
}
