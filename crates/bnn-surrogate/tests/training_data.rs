//! Chained leapfrog trajectories on the true gradient of a standard normal target.

mod support;

use bnn_sampler::{for_each_row, LogDensity, LogDensityError};
use bnn_surrogate::{TrajectoryDataConfig, TrajectoryError};
use support::StandardNormal;

const DIM: usize = 3;

fn config() -> TrajectoryDataConfig {
    // 2.0 / 0.025 = 80 steps per trajectory.
    TrajectoryDataConfig::new()
        .with_trajectories(3)
        .with_end_time(2.0)
        .with_step_size(0.025)
        .with_seed(9)
}

#[test]
fn counts_points_and_gradients() {
    let config = config();
    let start = [0.5, -1.0, 0.25];
    let mut calls = Vec::new();
    let data = config
        .generate_with_progress(&StandardNormal(DIM), &start, |done, total| {
            calls.push((done, total))
        })
        .unwrap();
    let steps = config.steps_per_trajectory();
    assert_eq!(steps, 80);
    assert_eq!(data.dim, DIM);
    assert_eq!(data.len(), 3 * steps);
    assert_eq!(data.points.len(), 3 * steps * 2 * DIM);
    assert_eq!(data.derivatives.len(), data.points.len());
    // One gradient per step, plus the one at the very first point.
    assert_eq!(data.true_gradients, (3 * steps + 1) as u64);
    assert_eq!(calls, vec![(1, 3), (2, 3), (3, 3)]);
    assert_eq!(&data.points[..DIM], &start);
    assert_eq!(
        data,
        config.generate(&StandardNormal(DIM), &start).unwrap(),
        "the seed fixes the data"
    );
}

#[test]
fn derivatives_are_momentum_and_true_gradient() {
    let data = config()
        .generate(&StandardNormal(DIM), &[1.0, 0.0, -0.5])
        .unwrap();
    for (x, dx) in data
        .points
        .chunks_exact(2 * DIM)
        .zip(data.derivatives.chunks_exact(2 * DIM))
    {
        let (q, p) = x.split_at(DIM);
        let (dq_dt, dp_dt) = dx.split_at(DIM);
        assert_eq!(dq_dt, p);
        for (g, q) in dp_dt.iter().zip(q) {
            assert_eq!(*g, -q);
        }
    }
}

#[test]
fn each_trajectory_nearly_conserves_energy_and_the_next_starts_where_it_ended() {
    let config = config();
    let steps = config.steps_per_trajectory();
    let h = config.step_size;
    let data = config
        .generate(&StandardNormal(DIM), &[0.5, -1.0, 0.25])
        .unwrap();
    let energy = |x: &[f64]| 0.5 * x.iter().map(|v| v * v).sum::<f64>();
    let rows: Vec<&[f64]> = data.points.chunks_exact(2 * DIM).collect();
    for (t, trajectory) in rows.chunks_exact(steps).enumerate() {
        let start = energy(trajectory[0]);
        // Leapfrog on a unit harmonic oscillator keeps a shadow energy; the true energy
        // oscillates by ~h²/4·H ≈ 1.6e-4·H at h = 0.025, so 1e-3·(1 + H) would flag any
        // real integration error (a wrong half kick is O(h)·H ≈ 2.5e-2·H).
        for (i, x) in trajectory.iter().enumerate() {
            let error = (energy(x) - start).abs();
            assert!(
                error <= 1e-3 * (1.0 + start),
                "trajectory {t}, step {i}: energy error {error} (H₀ = {start})"
            );
        }
        // The next trajectory starts at this one's end position: one more leapfrog step from
        // its last recorded point (q' = q + h p + h²/2 ∇ log p(q)).
        if let Some(next) = rows.get((t + 1) * steps) {
            let (q, p) = trajectory[steps - 1].split_at(DIM);
            for (i, (q, p)) in q.iter().zip(p).enumerate() {
                let expected = q + h * p - 0.5 * h * h * q;
                assert!(
                    (next[i] - expected).abs() < 1e-12,
                    "trajectory {t} ends at {expected}, next starts at {}",
                    next[i]
                );
            }
        }
    }
}

/// `N(0, I)` inside `|q₀| < 0.8`, NaN outside.
struct BrokenOutside;

impl LogDensity for BrokenOutside {
    fn dim(&self) -> usize {
        1
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(1, positions, values, gradients, |q, g| {
            g[0] = if q[0].abs() < 0.8 { -q[0] } else { f64::NAN };
            Ok(-0.5 * q[0] * q[0])
        })
    }
}

#[test]
fn a_non_finite_target_is_an_error() {
    let long = TrajectoryDataConfig::new()
        .with_trajectories(2)
        .with_end_time(4.0)
        .with_seed(1);
    match long.generate(&BrokenOutside, &[0.5]) {
        Err(TrajectoryError::NonFinite {
            trajectory, step, ..
        }) => assert!(
            trajectory > 0 || step > 0,
            "fails on the way, not at the start"
        ),
        other => panic!("expected a non-finite error, got {other:?}"),
    }
    assert!(matches!(
        long.generate(&BrokenOutside, &[2.0]),
        Err(TrajectoryError::NonFinite {
            trajectory: 0,
            step: 0,
            ..
        })
    ));
    assert!(matches!(
        long.generate(&BrokenOutside, &[0.0, 0.0]),
        Err(TrajectoryError::StartDimension {
            expected: 1,
            got: 2
        })
    ));
    assert!(matches!(
        long.clone()
            .with_step_size(0.0)
            .generate(&BrokenOutside, &[0.0]),
        Err(TrajectoryError::Config(_))
    ));
}
