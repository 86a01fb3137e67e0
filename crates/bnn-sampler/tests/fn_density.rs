//! A target given as a closure (`FnLogDensity`) samples like any other density: NUTS on a
//! correlated 2-D Gaussian from a closure recovers its moments within Monte Carlo error.
//!
//! Broken on purpose once: with the cross term dropped from the closure's value the test fails
//! (E[x0²] = 0.370, want 1 ± 0.112). A wrong gradient alone does not fail it, and should not:
//! the Metropolis correction keeps NUTS exact with any force field, only slower.

use bnn_sampler::{ChainStart, FnLogDensity, LogDensityError, NutsConfig, SamplerConfig};

#[test]
fn nuts_on_a_closure_recovers_a_correlated_gaussian() {
    // Precision of N(0, Σ) with Σ = [[1, 0.8], [0.8, 1]] (variances 1, covariance 0.8).
    let (a, b) = (1.0 / 0.36, -0.8 / 0.36);
    let density = FnLogDensity::new(2, move |q: &[f64], grad: &mut [f64]| {
        grad[0] = -(a * q[0] + b * q[1]);
        grad[1] = -(b * q[0] + a * q[1]);
        Ok::<_, LogDensityError>(-0.5 * (a * q[0] * q[0] + 2.0 * b * q[0] * q[1] + a * q[1] * q[1]))
    });
    let sampler = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(500)
        .with_num_draws(4000)
        .with_seed(17)
        .init()
        .unwrap();
    let starts: Vec<ChainStart> = (0..4)
        .map(|c| ChainStart::at(vec![c as f64 - 1.5, 1.0 - c as f64]))
        .collect();
    let draws = sampler.sample(&density, &starts).unwrap();
    let pooled = draws.positions();
    let n = pooled.len() as f64;
    let mean = |f: &dyn Fn(&[f64]) -> f64| pooled.iter().map(|q| f(q)).sum::<f64>() / n;
    // Tolerances: 5 Monte Carlo standard errors with an ESS of at least n/4 (NUTS on this
    // target gives more), for the mean (sd 1), the variance (sd √2) and the covariance
    // (sd √(1 + 0.8²)).
    let ess = n / 4.0;
    let checks = [
        ("E[x0]", mean(&|q| q[0]), 0.0, 1.0),
        ("E[x1]", mean(&|q| q[1]), 0.0, 1.0),
        ("E[x0²]", mean(&|q| q[0] * q[0]), 1.0, 2f64.sqrt()),
        ("E[x1²]", mean(&|q| q[1] * q[1]), 1.0, 2f64.sqrt()),
        (
            "E[x0 x1]",
            mean(&|q| q[0] * q[1]),
            0.8,
            (1.0f64 + 0.64).sqrt(),
        ),
    ];
    for (name, got, want, sd) in checks {
        let tolerance = 5.0 * sd / ess.sqrt();
        assert!(
            (got - want).abs() < tolerance,
            "{name} = {got}, want {want} ± {tolerance}"
        );
    }
}
