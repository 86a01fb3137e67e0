//! A MAP ensemble for any log density (e.g. a user's `ModulePosterior`): DEI-MCMC's warm starts outside the built-in MLP.

use anyhow::{anyhow, bail, Result};
use bnn_sampler::{ChainStart, LogDensity};
use burn::config::Config;

/// How the members are optimized: Adam (Kingma & Ba 2015) on the flat parameters.
#[derive(Config, Debug)]
pub struct MapEnsembleConfig {
    /// Optimizer steps per member.
    #[config(default = 1000)]
    pub steps: usize,
    #[config(default = 1e-2)]
    pub learning_rate: f64,
    #[config(default = 0.9)]
    pub beta_1: f64,
    #[config(default = 0.999)]
    pub beta_2: f64,
    #[config(default = 1e-8)]
    pub epsilon: f64,
}

/// The optimized members and their log posterior densities.
#[derive(Debug, Clone, PartialEq)]
pub struct MapEnsemble {
    pub members: Vec<Vec<f64>>,
    pub log_densities: Vec<f64>,
    /// Each member's log density at its start, to see what training gained.
    pub initial_log_densities: Vec<f64>,
}

impl MapEnsembleConfig {
    /// One member per start, each maximizing `density` from there.
    pub fn train<D: LogDensity + ?Sized>(
        &self,
        density: &D,
        starts: Vec<Vec<f64>>,
    ) -> Result<MapEnsemble> {
        let (members, dim) = (starts.len(), density.dim());
        if members == 0 {
            bail!("a MAP ensemble needs at least one start");
        }
        if let Some((j, start)) = starts.iter().enumerate().find(|(_, s)| s.len() != dim) {
            bail!(
                "start {j} has {} values, the log density has dimension {dim}",
                start.len()
            );
        }
        if !(self.learning_rate > 0.0)
            || !(0.0..1.0).contains(&self.beta_1)
            || !(0.0..1.0).contains(&self.beta_2)
        {
            bail!("Adam needs a positive learning rate and betas in [0, 1), got {self:?}");
        }
        let mut theta: Vec<f64> = starts.concat();
        let (mut first, mut second) = (vec![0.0; theta.len()], vec![0.0; theta.len()]);
        let mut values = vec![0.0; members];
        let mut gradient = vec![0.0; theta.len()];
        let evaluate = |theta: &[f64], values: &mut [f64], gradient: &mut [f64]| {
            density
                .log_density_and_gradient(theta, values, gradient)
                .map_err(|e| anyhow!("the log density failed: {e}"))
        };
        evaluate(&theta, &mut values, &mut gradient)?;
        let initial_log_densities = values.clone();
        for step in 1..=self.steps {
            if let Some(j) = values.iter().position(|v| !v.is_finite()) {
                bail!("member {j}: the log density is {} before step {step}; lower the learning rate or start elsewhere", values[j]);
            }
            let (correction_1, correction_2) = (
                1.0 - self.beta_1.powi(step as i32),
                1.0 - self.beta_2.powi(step as i32),
            );
            for i in 0..theta.len() {
                let g = gradient[i];
                first[i] = self.beta_1 * first[i] + (1.0 - self.beta_1) * g;
                second[i] = self.beta_2 * second[i] + (1.0 - self.beta_2) * g * g;
                // Ascent: the log density is maximized.
                theta[i] += self.learning_rate * (first[i] / correction_1)
                    / ((second[i] / correction_2).sqrt() + self.epsilon);
            }
            evaluate(&theta, &mut values, &mut gradient)?;
        }
        Ok(MapEnsemble {
            members: theta.chunks(dim).map(<[f64]>::to_vec).collect(),
            log_densities: values,
            initial_log_densities,
        })
    }
}

impl MapEnsemble {
    /// DEI-MCMC's starts: chain c at member c mod M.
    pub fn chain_starts(&self, chains: usize) -> Vec<ChainStart> {
        (0..chains)
            .map(|c| ChainStart::at(self.members[c % self.members.len()].clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_sampler::LogDensityError;

    /// log p(θ) = −Σ (θ_i − i)² / 2: the maximum is θ_i = i.
    struct Quadratic;

    impl LogDensity for Quadratic {
        fn dim(&self) -> usize {
            3
        }

        fn log_density_and_gradient(
            &self,
            positions: &[f64],
            values: &mut [f64],
            gradients: &mut [f64],
        ) -> Result<(), LogDensityError> {
            for (c, value) in values.iter_mut().enumerate() {
                *value = 0.0;
                for i in 0..3 {
                    let r = positions[3 * c + i] - i as f64;
                    *value -= 0.5 * r * r;
                    gradients[3 * c + i] = -r;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn members_climb_to_the_mode_from_every_start() {
        let ensemble = MapEnsembleConfig::new()
            .with_steps(2000)
            .with_learning_rate(0.05)
            .train(&Quadratic, vec![vec![5.0, -3.0, 0.0], vec![-2.0, 4.0, 9.0]])
            .unwrap();
        for member in &ensemble.members {
            for (i, v) in member.iter().enumerate() {
                assert!((v - i as f64).abs() < 1e-3, "{member:?}");
            }
        }
        assert!(ensemble
            .log_densities
            .iter()
            .zip(&ensemble.initial_log_densities)
            .all(|(after, before)| after > before));
        let starts = ensemble.chain_starts(3);
        assert_eq!(starts.len(), 3);
        assert!(MapEnsembleConfig::new()
            .train(&Quadratic, vec![vec![1.0]])
            .is_err());
        assert!(MapEnsembleConfig::new()
            .train(&Quadratic, Vec::new())
            .is_err());
    }
}
