//! Known answers: one leapfrog step on a 1-D standard normal and HMC's acceptance probability.
//!
//! For `U(q) = q²/2` with unit mass, one step of size ε from `(q, p)` is, exactly,
//! `q' = q(1 - ε²/2) + εp` and `p' = p - ε(q + q')/2`, and the Metropolis acceptance is
//! `min(1, exp(-(H' - H)))` with `H = (q² + p²)/2`. Both are checked to 1e-12.

mod support;

use bnn_sampler::{
    chain_rng, DiagonalMassMatrix, HmcConfig, Kernel, KernelState, PhasePoint, StepParams,
};
use rand::Rng;
use support::targets::IidGaussian;

fn closed_form(q: f64, p: f64, eps: f64) -> (f64, f64, f64) {
    let q1 = q * (1.0 - 0.5 * eps * eps) + eps * p;
    let p1 = p - 0.5 * eps * (q + q1);
    let delta_h = 0.5 * (q1 * q1 + p1 * p1) - 0.5 * (q * q + p * p);
    (q1, p1, delta_h)
}

#[test]
fn one_leapfrog_step_matches_the_closed_form() {
    let density = IidGaussian { scales: vec![1.0] };
    let metric = DiagonalMassMatrix::identity(1);
    for &(q, p, eps) in &[
        (0.3, -1.2, 0.1),
        (1.5, 0.7, 0.5),
        (-2.0, 2.5, 1.3),
        (0.0, 1.0, 1.9),
        (0.8, 0.4, -0.7),
    ] {
        let mut point = PhasePoint::new(1);
        point.position[0] = q;
        point.momentum[0] = p;
        point.gradient[0] = -q;
        point.log_density = -0.5 * q * q;
        point.refresh_velocity(&metric);
        let h0 = point.hamiltonian();
        point.leapfrog(&density, &metric, eps).unwrap();
        let (q1, p1, delta_h) = closed_form(q, p, eps);
        assert!(
            (point.position[0] - q1).abs() < 1e-12,
            "q' = {} vs {q1}",
            point.position[0]
        );
        assert!(
            (point.momentum[0] - p1).abs() < 1e-12,
            "p' = {} vs {p1}",
            point.momentum[0]
        );
        assert!((point.gradient[0] + q1).abs() < 1e-12);
        assert!((point.hamiltonian() - h0 - delta_h).abs() < 1e-12);
    }
}

#[test]
fn hmc_acceptance_probability_matches_the_closed_form() {
    let density = IidGaussian { scales: vec![1.0] };
    let metric = DiagonalMassMatrix::identity(1);
    let mut hmc = HmcConfig::new().with_num_steps(1).init().unwrap();
    let mut accepted = 0;
    let mut rejected = 0;
    for (case, &(q, eps)) in [(0.3, 0.4), (1.5, 1.1), (-2.0, 1.7), (0.1, 1.95), (2.5, 1.5)]
        .iter()
        .enumerate()
    {
        for seed in 0..20u64 {
            let state = KernelState::init(&density, vec![q]).unwrap();
            let mut rng = chain_rng(seed, case);
            // Replay the kernel's random numbers: one normal for the momentum, one uniform.
            let mut replay = rng.clone();
            let mut p = [0.0];
            metric.sample_momentum(&mut replay, &mut p);
            let u: f64 = replay.random();
            let (q1, _, delta_h) = closed_form(q, p[0], eps);
            let accept = (-delta_h).exp().min(1.0);

            let (next, stats) = hmc
                .step(
                    &density,
                    &mut rng,
                    state,
                    StepParams {
                        step_size: eps,
                        metric: &metric,
                        trajectory_length: None,
                    },
                )
                .unwrap();
            assert!(
                (stats.accept_stat - accept).abs() < 1e-12,
                "acceptance {} vs {accept}",
                stats.accept_stat
            );
            assert!((stats.energy_error - delta_h).abs() < 1e-12);
            assert_eq!(stats.n_leapfrog, 1);
            if u < accept {
                accepted += 1;
                assert!((next.position[0] - q1).abs() < 1e-12);
            } else {
                rejected += 1;
                assert_eq!(next.position[0], q);
            }
            assert_eq!(
                rng, replay,
                "the kernel must draw exactly one normal and one uniform"
            );
        }
    }
    assert!(
        accepted > 0 && rejected > 0,
        "both branches exercised: {accepted} accepted, {rejected} rejected"
    );
}
