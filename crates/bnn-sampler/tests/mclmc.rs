//! The microcanonical samplers. MCLMC (unadjusted): exact in the small-step limit, its tuner
//! reaches its energy-variance target, and its bias at the tuned step size is what that variance
//! allows. MAMS (Metropolis-adjusted): exact at a step size where the unadjusted dynamics are not.
//!
//! Target: 50 independent normals with standard deviations spread linearly from 0.1 to 1
//! (condition number 100 in the variances), started in [-1, 1]; MCLMC runs with the identity
//! preconditioner, as in MILE.

mod support;

use bnn_sampler::{CollectedDraws, MamsConfig, MclmcConfig, SamplerConfig, WarmupConfig};
use support::targets::IidGaussian;
use support::{mcse_mean, mcse_multiplier, pooled_mean, uniform_starts, Checks};

const DIM: usize = 50;

fn target() -> IidGaussian {
    IidGaussian {
        scales: (0..DIM)
            .map(|i| 0.1 + 0.9 * i as f64 / (DIM - 1) as f64)
            .collect(),
    }
}

fn squares(x: &[Vec<f64>]) -> Vec<Vec<f64>> {
    x.iter()
        .map(|c| c.iter().map(|v| v * v).collect())
        .collect()
}

/// Mean squared energy change per dimension over the sampling draws.
fn energy_variance_per_dim(draws: &CollectedDraws) -> f64 {
    let e = draws.stat(|s| s.energy_error);
    let n: usize = e.iter().map(Vec::len).sum();
    e.iter().flatten().map(|v| v * v).sum::<f64>() / (n as f64 * DIM as f64)
}

/// `b² = mean_i ((E[x_i²] − σ_i²) / σ_i²)²`: the squared relative bias of the second moments
/// (Robnik et al.'s measure of an unadjusted sampler's bias).
fn second_moment_bias(draws: &CollectedDraws, target: &IidGaussian) -> f64 {
    let sum: f64 = target
        .scales
        .iter()
        .enumerate()
        .map(|(d, s)| ((pooled_mean(&squares(&draws.coordinate(d))) - s * s) / (s * s)).powi(2))
        .sum();
    sum / DIM as f64
}

/// Every mean (truth 0) and second moment (truth σ²) within k MCSE, k from `mcse_multiplier`
/// (Bonferroni over the 100 checks).
fn check_moments(draws: &CollectedDraws, target: &IidGaussian) -> Checks {
    let k = mcse_multiplier(2 * DIM);
    let mut checks = Checks::default();
    for (d, s) in target.scales.iter().enumerate() {
        let x = draws.coordinate(d);
        checks.within(
            &format!("mean[{d}]"),
            pooled_mean(&x),
            0.0,
            mcse_mean(&x),
            k,
        );
        let x2 = squares(&x);
        checks.within(
            &format!("E[x²][{d}]"),
            pooled_mean(&x2),
            s * s,
            mcse_mean(&x2),
            k,
        );
    }
    checks
}

/// Every mean (truth 0) within k MCSE, k from `mcse_multiplier` (Bonferroni over the d checks):
/// an unadjusted chain's bias leaves the means of a symmetric target alone.
fn check_means(draws: &CollectedDraws) -> Checks {
    let k = mcse_multiplier(DIM);
    let mut checks = Checks::default();
    for d in 0..DIM {
        let x = draws.coordinate(d);
        checks.within(
            &format!("mean[{d}]"),
            pooled_mean(&x),
            0.0,
            mcse_mean(&x),
            k,
        );
    }
    checks
}

fn tuned(energy_variance: (f64, f64), seed: u64) -> CollectedDraws {
    let config = MclmcConfig::new()
        .with_energy_variance_start(energy_variance.0)
        .with_energy_variance_end(energy_variance.1);
    let sampler = SamplerConfig::new(config.into())
        .with_num_warmup(5000)
        .with_num_draws(40_000)
        .with_seed(seed)
        .init()
        .unwrap();
    sampler
        .sample(&target(), &uniform_starts(4, DIM, 1.0, seed))
        .unwrap()
}

/// With a small fixed step (energy error per dimension ~1e-9) the unadjusted chain's bias is far
/// below its Monte Carlo error, so every mean and second moment must lie within k MCSE of the
/// truth (k from `mcse_multiplier`, Bonferroni over 100 checks). A wrong velocity update, drift
/// or refresh changes the stationary distribution by O(1) and fails here.
#[test]
fn small_fixed_steps_sample_the_target() {
    let target = target();
    let sampler = SamplerConfig::new(
        MclmcConfig::new()
            .with_initial_trajectory_length(Some(3.0))
            .into(),
    )
    .with_warmup(
        WarmupConfig::new()
            .with_adapt_step_size(false)
            .with_adapt_metric(false),
    )
    .with_initial_step_size(Some(0.3))
    .with_num_warmup(2000)
    .with_num_draws(50_000)
    .with_seed(11)
    .init()
    .unwrap();
    let draws = sampler
        .sample(&target, &uniform_starts(4, DIM, 1.0, 11))
        .unwrap();
    assert!(energy_variance_per_dim(&draws) < 1e-6);
    check_moments(&draws, &target).assert_all("MCLMC, ε = 0.3, L = 3");
}

/// The tuner sets ε so that the energy change's variance per dimension meets its target. Its
/// average of ξ/ε⁶ is weighted (steps far from the target count less) and ε is frozen from a
/// noisy running average, and the variance grows as ε⁶, so the sampling phase lands near, not
/// on, the target. Measured over 12 seeds: 0.8-1.9× at BlackJAX's constant 5e-4, 0.95-2.3× for
/// MILE's 5e-4 → 1e-4 schedule. Required: [0.5, 2.5]× and [0.5, 3]×; a tuner with a wrong
/// exponent or a wrong energy is off by orders of magnitude.
#[test]
fn tuner_reaches_its_energy_variance_target() {
    for (schedule, seed, band) in [((5e-4, 5e-4), 21, 0.5..2.5), ((5e-4, 1e-4), 22, 0.5..3.0)] {
        let draws = tuned(schedule, seed);
        let measured = energy_variance_per_dim(&draws);
        let ratio = measured / schedule.1;
        assert!(
            band.contains(&ratio),
            "target {schedule:?}: measured E[ΔE²]/d = {measured:.3e} ({ratio:.2}× the target)"
        );
        assert_eq!(draws.stats(0).iter().filter(|s| s.divergent).count(), 0);
    }
}

/// Unadjusted MCLMC is biased, and the energy variance it was tuned to bounds the bias: on this
/// target we measured `b² ≈ 1.3 · Var[ΔE]/d` at the 5e-4 target (BlackJAX's default; 12 seeds,
/// b² from 4.7e-4 to 1.3e-3), so we require `b² < 3 · Var[ΔE]/d + 3e-4` (the constant: the Monte Carlo
/// floor of b² with these draws, measured at tiny ε: 1e-4 to 4e-4). The means stay unbiased by
/// symmetry and must lie within MCSE.
#[test]
fn bias_stays_within_what_the_energy_variance_allows() {
    let target = target();
    let draws = tuned((5e-4, 5e-4), 31);
    let variance = energy_variance_per_dim(&draws);
    let bias = second_moment_bias(&draws, &target);
    assert!(
        bias < 3.0 * variance + 3e-4,
        "b² = {bias:.3e} with Var[ΔE]/d = {variance:.3e}"
    );
    check_means(&draws).assert_all("MCLMC tuned to Var[ΔE]/d = 5e-4");
}

/// Diagonal preconditioning (an option beyond MILE): on normals with scales from 0.01 to 1
/// (condition number 10⁴ in the variances) the identity-preconditioned chain's step is set by the
/// narrowest coordinate, so the widest one barely moves; with the warmup's variances as the
/// preconditioner every coordinate moves at its own scale. Required, at the same budget: the
/// widest coordinate's MCSE at least 5× smaller (measured 10.5×; a preconditioner with the wrong
/// power, standard deviations where variances belong, gave 3.3×), the means within MCSE and the
/// second-moment bias within the bound the energy variance sets (as above).
#[test]
fn diagonal_preconditioning_moves_wide_coordinates_at_their_own_scale() {
    let target = IidGaussian {
        scales: (0..DIM)
            .map(|i| 10f64.powf(-2.0 + 2.0 * i as f64 / (DIM - 1) as f64))
            .collect(),
    };
    let run = |precondition: bool| {
        let config = MclmcConfig::new()
            .with_energy_variance_start(5e-4)
            .with_energy_variance_end(5e-4)
            .with_diagonal_preconditioning(precondition);
        let sampler = SamplerConfig::new(config.into())
            .with_num_warmup(5000)
            .with_num_draws(20_000)
            .with_seed(41)
            .init()
            .unwrap();
        sampler
            .sample(&target, &uniform_starts(4, DIM, 0.01, 41))
            .unwrap()
    };
    let (plain, preconditioned) = (run(false), run(true));
    let widest = DIM - 1;
    let error = |draws: &CollectedDraws| mcse_mean(&draws.coordinate(widest));
    let speedup = error(&plain) / error(&preconditioned);
    eprintln!(
        "widest coordinate's MCSE: {:.3e} plain, {:.3e} preconditioned ({speedup:.1}×)",
        error(&plain),
        error(&preconditioned)
    );
    assert!(
        speedup > 5.0,
        "MCSE of the widest mean: {:.3e} plain, {:.3e} preconditioned ({speedup:.1}×)",
        error(&plain),
        error(&preconditioned)
    );
    let variance = energy_variance_per_dim(&preconditioned);
    let bias = second_moment_bias(&preconditioned, &target);
    assert!(
        bias < 3.0 * variance + 3e-4,
        "b² = {bias:.3e} with Var[ΔE]/d = {variance:.3e}"
    );
    check_means(&preconditioned).assert_all("MCLMC with a diagonal preconditioner");
}

/// A step that meets a non-finite density is rejected and flagged, the chain stays put, and the
/// tuner caps ε below the failed step.
#[test]
fn non_finite_steps_are_rejected_and_cap_the_step_size() {
    struct Walled;
    impl bnn_sampler::LogDensity for Walled {
        fn dim(&self) -> usize {
            3
        }
        fn log_density_and_gradient(
            &self,
            q: &[f64],
            v: &mut [f64],
            g: &mut [f64],
        ) -> Result<(), bnn_sampler::LogDensityError> {
            bnn_sampler::for_each_row(3, q, v, g, |x, grad| {
                for (gi, xi) in grad.iter_mut().zip(x) {
                    *gi = -xi;
                }
                let r2: f64 = x.iter().map(|v| v * v).sum();
                Ok(if r2 > 9.0 { f64::NAN } else { -0.5 * r2 })
            })
        }
    }
    let sampler = SamplerConfig::new(MclmcConfig::new().with_initial_step_size(50.0).into())
        .with_num_warmup(500)
        .with_num_draws(500)
        .with_seed(4)
        .init()
        .unwrap();
    let draws = sampler
        .sample(&Walled, &uniform_starts(2, 3, 0.5, 4))
        .unwrap();
    for c in 0..2 {
        for (i, s) in draws.stats(c).iter().enumerate() {
            let r2: f64 = draws.draw(c, i).iter().map(|v| v * v).sum();
            assert!(
                r2 <= 9.0 && s.log_density.is_finite(),
                "chain {c} draw {i} left the wall"
            );
        }
        assert!(
            draws.stats(c)[0].step_size < 50.0 * 0.8,
            "ε was not capped: {}",
            draws.stats(c)[0].step_size
        );
    }
}

#[test]
fn one_dimension_is_refused() {
    let one = IidGaussian { scales: vec![1.0] };
    let sampler = SamplerConfig::new(MclmcConfig::new().into())
        .init()
        .unwrap();
    let error = sampler
        .sample(&one, &uniform_starts(1, 1, 0.5, 1))
        .unwrap_err();
    assert!(
        error.to_string().contains("at least 2 dimensions"),
        "{error}"
    );
}

/// MAMS at a fixed step size so large that most proposals are rejected (acceptance 0.24): its
/// Metropolis test keeps every mean and second moment within k MCSE of the truth. Accepting every
/// proposal instead (the same dynamics, unadjusted) fails 50 of these 100 checks, the smallest
/// scale's variance at 3.3× the truth (checked by breaking the kernel on purpose).
#[test]
fn mams_is_exact_at_a_large_fixed_step() {
    let target = target();
    let sampler = SamplerConfig::new(MamsConfig::new().into())
        .with_warmup(
            WarmupConfig::new()
                .with_adapt_step_size(false)
                .with_adapt_metric(false),
        )
        .with_initial_step_size(Some(STEP))
        .with_num_warmup(500)
        .with_num_draws(20_000)
        .with_seed(41)
        .init()
        .unwrap();
    let draws = sampler
        .sample(&target, &uniform_starts(4, DIM, 1.0, 41))
        .unwrap();
    let accept = pooled_mean(&draws.stat(|s| s.accept_stat));
    assert!(
        accept < 0.5,
        "the step should be large enough to be rejected often: acceptance {accept:.2}"
    );
    check_moments(&draws, &target).assert_all(&format!("MAMS, ε = {STEP}, acceptance {accept:.2}"));
}

/// Step size of `mams_is_exact_at_a_large_fixed_step` (acceptance 0.91 at 1.5, 0.24 at 2, 0.02 at 3).
const STEP: f64 = 2.0;
