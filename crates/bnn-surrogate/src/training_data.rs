//! Training data for an L-HNN: chained leapfrog trajectories on the true gradient, recording the
//! phase-space velocity `(dq/dt, dp/dt) = (p, ∇ log p(q))` at every visited point.
//!
//! Each trajectory starts where the previous one ended, with a fresh momentum `p ~ N(0, I)`
//! (identity mass), so the data follow the level sets of many energies through the region the
//! sampler will visit.

use bnn_sampler::{LogDensity, LogDensityError};
use burn::config::Config;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// How much trajectory data to generate.
#[derive(Config, Debug)]
pub struct TrajectoryDataConfig {
    /// Number of chained trajectories.
    #[config(default = 40)]
    pub trajectories: usize,
    /// Length of each trajectory in time units; it takes `round(end_time / step_size)` steps.
    #[config(default = 250.0)]
    pub end_time: f64,
    /// Leapfrog step size.
    #[config(default = 0.025)]
    pub step_size: f64,
    /// Seed of the momentum draws.
    #[config(default = 0)]
    pub seed: u64,
}

/// Phase points and their true time derivatives, row-major `[n, 2d]` each.
#[derive(Debug, Clone, PartialEq)]
pub struct TrajectoryData {
    /// Position dimension `d`.
    pub dim: usize,
    /// Rows `x = (q, p)`: the start of every leapfrog step.
    pub points: Vec<f64>,
    /// Rows `(dq/dt, dp/dt) = (p, ∇ log p(q))` at the same points.
    pub derivatives: Vec<f64>,
    /// True gradient evaluations spent (one per step, plus one at the very start).
    pub true_gradients: u64,
}

impl TrajectoryData {
    /// Number of recorded phase points `n`.
    pub fn len(&self) -> usize {
        if self.dim == 0 {
            0
        } else {
            self.points.len() / (2 * self.dim)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Trajectory settings [`TrajectoryDataConfig::validate`] refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrajectoryDataConfigError {
    #[error("at least one trajectory is needed")]
    NoTrajectories,
    #[error("the step size must be positive, got {0}")]
    StepSize(f64),
    #[error("end time {end_time} gives no leapfrog step of size {step_size}")]
    NoSteps { end_time: f64, step_size: f64 },
}

/// Why trajectory data could not be generated.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TrajectoryError {
    #[error("invalid trajectory settings: {0}")]
    Config(#[from] TrajectoryDataConfigError),
    #[error("the start position has {got} coordinates, but the density has dimension {expected}")]
    StartDimension { expected: usize, got: usize },
    #[error("the log density could not be evaluated: {0}")]
    Density(#[from] LogDensityError),
    #[error(
        "the log density or its gradient is not finite (log p = {log_density}) after step {step} of trajectory \
         {trajectory}; start elsewhere or use a smaller step size"
    )]
    NonFinite {
        trajectory: usize,
        step: usize,
        log_density: f64,
    },
}

impl TrajectoryDataConfig {
    /// Leapfrog steps per trajectory.
    pub fn steps_per_trajectory(&self) -> usize {
        (self.end_time / self.step_size).round() as usize
    }

    pub fn validate(&self) -> Result<(), TrajectoryDataConfigError> {
        if self.trajectories == 0 {
            return Err(TrajectoryDataConfigError::NoTrajectories);
        }
        if !(self.step_size > 0.0 && self.step_size.is_finite()) {
            return Err(TrajectoryDataConfigError::StepSize(self.step_size));
        }
        if !(self.end_time.is_finite() && self.steps_per_trajectory() >= 1) {
            return Err(TrajectoryDataConfigError::NoSteps {
                end_time: self.end_time,
                step_size: self.step_size,
            });
        }
        Ok(())
    }

    /// Generates the data from `start`; see [`TrajectoryDataConfig::generate_with_progress`].
    pub fn generate<D: LogDensity + ?Sized>(
        &self,
        density: &D,
        start: &[f64],
    ) -> Result<TrajectoryData, TrajectoryError> {
        self.generate_with_progress(density, start, |_, _| {})
    }

    /// Generates the data from `start`, calling `progress(done, total)` after each trajectory.
    pub fn generate_with_progress<D: LogDensity + ?Sized>(
        &self,
        density: &D,
        start: &[f64],
        mut progress: impl FnMut(usize, usize),
    ) -> Result<TrajectoryData, TrajectoryError> {
        self.validate()?;
        let dim = density.dim();
        if start.len() != dim {
            return Err(TrajectoryError::StartDimension {
                expected: dim,
                got: start.len(),
            });
        }
        let steps = self.steps_per_trajectory();
        let h = self.step_size;
        let rows = self.trajectories * steps;
        let mut data = TrajectoryData {
            dim,
            points: Vec::with_capacity(rows * 2 * dim),
            derivatives: Vec::with_capacity(rows * 2 * dim),
            true_gradients: 0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut q = start.to_vec();
        let mut p = vec![0.0; dim];
        let mut gradient = vec![0.0; dim];
        let mut evaluate = |q: &[f64], gradient: &mut [f64], trajectory: usize, step: usize| {
            let log_density = density.evaluate(q, gradient)?;
            data.true_gradients += 1;
            if !log_density.is_finite() || gradient.iter().any(|g| !g.is_finite()) {
                return Err(TrajectoryError::NonFinite {
                    trajectory,
                    step,
                    log_density,
                });
            }
            Ok(())
        };
        evaluate(&q, &mut gradient, 0, 0)?;
        for trajectory in 0..self.trajectories {
            p.iter_mut().for_each(|p| *p = rng.sample(StandardNormal));
            for step in 0..steps {
                data.points.extend(q.iter().chain(&p));
                data.derivatives.extend(p.iter().chain(&gradient));
                // Leapfrog, identity mass; the end gradient is the next step's start gradient.
                for ((q, p), g) in q.iter_mut().zip(&mut p).zip(&gradient) {
                    *p += 0.5 * h * g;
                    *q += h * *p;
                }
                evaluate(&q, &mut gradient, trajectory, step + 1)?;
                for (p, g) in p.iter_mut().zip(&gradient) {
                    *p += 0.5 * h * g;
                }
            }
            progress(trajectory + 1, self.trajectories);
        }
        Ok(data)
    }
}
