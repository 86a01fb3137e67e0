//! NUTS for C chains in lockstep: one log-density call per leapfrog step for all growing trees.

use rand::Rng;

use crate::draw_stats::DrawStats;
use crate::error::SamplerError;
use crate::kernel::{BatchChain, BatchKernel, StepParams};
use crate::log_density::LogDensity;
use crate::nuts::{Nuts, NutsConfig};

/// Batched NUTS: every chain has its own transition in flight (`Nuts`, resumable leaf by leaf),
/// with its own directions, tree depth, step size, metric and termination; each round takes one
/// leapfrog step for every chain whose tree is still growing and evaluates those frontiers in a
/// single call. Chains whose trajectory is complete drop out of the batch (the calls shrink)
/// and wait for the slowest, so all chains end the transition together and nothing but their
/// `KernelState` carries over to the next one.
///
/// The per-chain arithmetic and random draws are those of `Nuts::step`, so the draws equal the
/// threaded per-chain run bit for bit when the density gives every row the value it gives alone.
#[derive(Clone, Debug)]
pub struct BatchedNuts {
    config: NutsConfig,
    /// One transition per batch member, reused across transitions.
    members: Vec<Nuts>,
    /// Members whose trajectory is still growing; member `active[r]` is row `r` of the batch.
    active: Vec<usize>,
    /// Row-major `[rows, D]` evaluation buffers.
    positions: Vec<f64>,
    log_densities: Vec<f64>,
    gradients: Vec<f64>,
}

impl NutsConfig {
    /// Builds the batched kernel; its buffers are sized on first use.
    pub fn init_batched(&self) -> Result<BatchedNuts, SamplerError> {
        self.validate()?;
        Ok(BatchedNuts {
            config: self.clone(),
            members: Vec::new(),
            active: Vec::new(),
            positions: Vec::new(),
            log_densities: Vec::new(),
            gradients: Vec::new(),
        })
    }
}

impl BatchKernel for BatchedNuts {
    fn step_batch<L: LogDensity + ?Sized, R: Rng + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) {
        stats.clear();
        stats.resize(chains.len(), DrawStats::default());
        let Some(dim) = chains.first().map(|chain| chain.state.dim()) else {
            return;
        };
        let config = &self.config;
        self.members
            .resize_with(chains.len(), || Nuts::new(config, dim));
        self.positions.resize(chains.len() * dim, 0.0);
        self.log_densities.resize(chains.len(), 0.0);
        self.gradients.resize(chains.len() * dim, 0.0);

        self.active.clear();
        for (c, (chain, member)) in chains.iter_mut().zip(&mut self.members).enumerate() {
            let params = StepParams {
                step_size: chain.step_size,
                metric: chain.metric,
            };
            member.begin(chain.rng, chain.state, params);
            self.active.push(c);
        }

        while !self.active.is_empty() {
            let rows = self.active.len();
            for (row, &c) in self.active.iter().enumerate() {
                let (point, step_size) = self.members[c].frontier();
                point.begin_leapfrog(chains[c].metric, step_size);
                self.positions[row * dim..(row + 1) * dim].copy_from_slice(&point.position);
            }
            let log_densities = &mut self.log_densities[..rows];
            if density
                .log_density_and_gradient(
                    &self.positions[..rows * dim],
                    log_densities,
                    &mut self.gradients[..rows * dim],
                )
                .is_err()
            {
                // As in the single-chain leapfrog and batched HMC: a failed evaluation is a NaN
                // log density, hence a divergence, here of every chain in the call.
                log_densities.fill(f64::NAN);
            }
            let mut row = 0;
            self.active.retain(|&c| {
                let member = &mut self.members[c];
                let chain = &mut chains[c];
                let (point, step_size) = member.frontier();
                point.log_density = self.log_densities[row];
                point
                    .gradient
                    .copy_from_slice(&self.gradients[row * dim..(row + 1) * dim]);
                point.end_leapfrog(chain.metric, step_size);
                row += 1;
                let done = member.finish_leaf(chain.rng);
                if done {
                    stats[c] = member.finish(chain.state);
                }
                !done
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::chain::chain_rng;
    use crate::kernel::KernelState;
    use crate::log_density::{for_each_row, LogDensityError};
    use crate::mass_matrix::DiagonalMassMatrix;

    /// A standard normal that records the number of rows of every call.
    struct CountingNormal {
        rows: Mutex<Vec<usize>>,
    }

    impl LogDensity for CountingNormal {
        fn dim(&self) -> usize {
            3
        }

        fn log_density_and_gradient(
            &self,
            positions: &[f64],
            log_densities: &mut [f64],
            gradients: &mut [f64],
        ) -> Result<(), LogDensityError> {
            self.rows.lock().unwrap().push(log_densities.len());
            for_each_row(3, positions, log_densities, gradients, |q, g| {
                g.iter_mut().zip(q).for_each(|(g, x)| *g = -x);
                Ok(-0.5 * q.iter().map(|x| x * x).sum::<f64>())
            })
        }
    }

    /// Chains whose tree is complete leave the batch: every evaluated row is a leapfrog step some
    /// draw reports, and the calls shrink as trees finish.
    #[test]
    fn only_growing_trees_are_evaluated() {
        let density = CountingNormal {
            rows: Mutex::new(Vec::new()),
        };
        let step_sizes = [0.05, 0.3, 0.9, 1.6];
        let metric = DiagonalMassMatrix::identity(3);
        let mut rngs: Vec<_> = (0..4).map(|c| chain_rng(1, c)).collect();
        let mut states: Vec<_> = (0..4)
            .map(|c| KernelState::init(&density, vec![0.5 * c as f64, -0.3, 1.0]).unwrap())
            .collect();
        let mut nuts = NutsConfig::new().init_batched().unwrap();
        let mut stats = Vec::new();
        let mut n_leapfrog = 0;
        density.rows.lock().unwrap().clear();
        for _ in 0..20 {
            let mut chains: Vec<_> = rngs
                .iter_mut()
                .zip(&mut states)
                .zip(step_sizes)
                .map(|((rng, state), step_size)| BatchChain {
                    rng,
                    state,
                    step_size,
                    metric: &metric,
                })
                .collect();
            nuts.step_batch(&density, &mut chains, &mut stats);
            n_leapfrog += stats.iter().map(|s| s.n_leapfrog as usize).sum::<usize>();
        }
        let rows = density.rows.into_inner().unwrap();
        assert_eq!(rows.iter().sum::<usize>(), n_leapfrog);
        assert_eq!(rows.iter().max(), Some(&4));
        assert!(
            rows.iter().filter(|&&r| r < 4).count() > rows.len() / 4,
            "{rows:?}"
        );
    }
}
