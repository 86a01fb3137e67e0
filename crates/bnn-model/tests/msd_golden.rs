//! Golden draws of manifold stochastic dynamics on the built-in MLP's Gauss–Newton metric (its
//! dense form on a linear model, its low-rank form on a tanh network with fewer rows than
//! parameters): hashes of the exact draws, recorded before a refactor of the sampler that must
//! not change a single floating-point operation.

mod common;

use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, HostData, Likelihood, MlpPosterior, Posterior,
    Prior, PriorSpec,
};
use bnn_sampler::draw_stats::{kernel_stat, StatColumn};
use bnn_sampler::{
    msd_transition, ChainStart, MsdConfig, MsdParams, MsdState, SamplerConfig, SamplerSettings,
};
use burn::tensor::DType;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// FNV-1a over the `Debug` text of what is hashed (`Debug` prints an `f64` so that it reads
/// back to the same bits).
struct Fnv(u64);

impl Fnv {
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
#[derive(Debug)]
#[allow(dead_code)] // read through `Debug` only
struct DrawStats {
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
    fn recorded(stats: &bnn_sampler::DrawStats, columns: &[StatColumn]) -> Self {
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

fn data(rows: usize) -> HostData {
    let x: Vec<f64> = (0..rows)
        .map(|i| -1.5 + i as f64 * 3.0 / (rows - 1) as f64)
        .collect();
    let y: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, x)| (1.3 * x).sin() + 0.15 * ((i * 7 % 5) as f64 - 2.0) / 2.0)
        .collect();
    HostData::new(x, rows, 1, y, 1)
}

fn model(hidden: Vec<usize>, activation: Activation) -> BnnConfig {
    BnnConfig::new(1)
        .with_hidden(hidden)
        .with_activation(activation)
        .with_likelihood(Likelihood::GaussianFixed { sigma: 0.3 })
        .with_prior(PriorSpec::uniform(Prior::Normal { scale: 1.0 }))
}

fn hashes(config: BnnConfig, rows: usize, frozen_metric: bool) -> (u64, u64) {
    let data = data(rows);
    let device = common::devices().remove(0).1;
    let posterior = || MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap();
    let dim = posterior().layout().dim();
    let start: Vec<f64> = (0..dim)
        .map(|i| 0.3 * ((i * 7 % 11) as f64 - 5.0) / 5.0)
        .collect();

    let riemannian = posterior().riemannian_density().unwrap();
    let params = MsdParams {
        step_size: 0.3,
        persistence: 0.7,
        frozen_metric,
        ..MsdParams::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let mut state = MsdState::at(&riemannian, start.clone()).unwrap();
    let mut transition = Fnv(0xcbf2_9ce4_8422_2325);
    for _ in 0..150 {
        let (next, info) = msd_transition(&riemannian, &mut rng, state, &params);
        transition.add(&next.position);
        transition.add(&next.momentum);
        transition.add(&info);
        state = next;
    }

    let density = AutodiffLogDensity::new(posterior())
        .with_riemannian(posterior().riemannian_density().unwrap());
    let starts: Vec<ChainStart> = (0..2)
        .map(|c| ChainStart::at(start.iter().map(|x| x + 0.1 * c as f64).collect()))
        .collect();
    let msd = MsdConfig::new().with_frozen_metric(frozen_metric);
    let columns = msd.stat_columns();
    let draws = SamplerConfig::new(msd.into())
        .with_num_warmup(60)
        .with_num_draws(60)
        .with_seed(4)
        .init()
        .unwrap()
        .sample(&density, &starts)
        .unwrap();
    let mut kernel = Fnv(0xcbf2_9ce4_8422_2325);
    for c in 0..2 {
        kernel.add(&draws.chain(c).positions);
        let stats: Vec<DrawStats> = draws
            .stats(c)
            .iter()
            .map(|stats| DrawStats::recorded(stats, columns))
            .collect();
        kernel.add(&stats);
    }
    (transition.0, kernel.0)
}

#[test]
fn msd_draws_on_the_gauss_newton_metric_match_the_recorded_hashes() {
    let mut recorded = [
        (0x8220_3210_eb4b_0edb, 0xfeeb_ce67_c619_95fe),
        (0x3725_e782_c962_341d, 0x35d8_4446_d5bb_72ae),
        (0x08dc_f0e9_c967_75af, 0x74df_73fe_a959_947b),
        (0xe6b2_dcca_7923_5ca7, 0x74a7_24bd_ec28_4639),
    ]
    .into_iter();
    for (name, config, rows) in [
        ("linear", model(vec![], Activation::Identity), 12),
        ("tanh", model(vec![3], Activation::Tanh), 8),
    ] {
        for frozen in [false, true] {
            let (transition, kernel) = hashes(config.clone(), rows, frozen);
            println!(
                "GOLDEN {name} frozen={frozen}: transition {transition:#018x} kernel {kernel:#018x}"
            );
            assert_eq!(
                (transition, kernel),
                recorded.next().unwrap(),
                "{name}, frozen metric {frozen}: the draws changed"
            );
        }
    }
}
