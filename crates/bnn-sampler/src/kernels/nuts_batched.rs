//! NUTS for C chains in lockstep: one log-density call per leapfrog step for all growing trees.

use rand::Rng;

use crate::draw_stats::DrawStats;
use crate::dynamics::{Integrator, Leapfrog, Lockstep, Stepper};
use crate::error::SamplerError;
use crate::kernels::nuts::{Nuts, NutsConfig};
use crate::kernels::{BatchChain, BatchKernel};
use crate::log_density::{LogDensity, LogDensityError};

/// Batched NUTS: every chain has its own transition in flight (`Nuts`, resumable leaf by leaf),
/// with its own directions, tree depth, step size, metric and termination; each round takes one
/// integrator step for every chain whose tree is still growing, through the shared `Lockstep`
/// driver (one density call for all of them). Chains whose trajectory is complete drop out of
/// the batch (the calls shrink) and wait for the slowest, so all chains end the transition
/// together and nothing but their `KernelState` carries over to the next one.
///
/// The per-chain arithmetic and random draws are those of `Nuts::step`, so the draws equal the
/// threaded per-chain run bit for bit when the density gives every row the value it gives alone.
#[derive(Clone, Debug)]
pub struct BatchedNuts<I = Leapfrog> {
    config: NutsConfig,
    integrator: I,
    /// One transition per batch member, reused across transitions.
    members: Vec<Nuts<I>>,
    /// Members whose trajectory is still growing.
    active: Vec<usize>,
    lockstep: Lockstep,
}

impl NutsConfig {
    /// Builds the batched kernel with the leapfrog; its buffers are sized on first use.
    pub fn init_batched(&self) -> Result<BatchedNuts, SamplerError> {
        self.init_batched_with(Leapfrog)
    }

    /// Builds the batched kernel with another integrator.
    pub fn init_batched_with<I: Integrator>(
        &self,
        integrator: I,
    ) -> Result<BatchedNuts<I>, SamplerError> {
        self.validate()?;
        Ok(BatchedNuts {
            config: self.clone(),
            integrator,
            members: Vec::new(),
            active: Vec::new(),
            lockstep: Lockstep::default(),
        })
    }
}

impl<I: Integrator> BatchKernel for BatchedNuts<I> {
    fn step_batch<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) -> Result<(), LogDensityError> {
        stats.clear();
        stats.resize(chains.len(), DrawStats::default());
        let Some(dim) = chains.first().map(|chain| chain.state.dim()) else {
            return Ok(());
        };
        let (config, integrator) = (&self.config, &self.integrator);
        self.members
            .resize_with(chains.len(), || Nuts::new(config, dim, integrator.clone()));

        self.active.clear();
        for (c, (chain, member)) in chains.iter_mut().zip(&mut self.members).enumerate() {
            member.begin(chain.rng, chain.state, chain.params);
            self.active.push(c);
        }

        while !self.active.is_empty() {
            let active = &self.active;
            let mut steppers: Vec<Stepper<'_, I>> = self
                .members
                .iter_mut()
                .zip(chains.iter())
                .enumerate()
                .filter(|(c, _)| active.binary_search(c).is_ok())
                .map(|(_, (member, chain))| member.stepper(chain.params.metric))
                .collect();
            self.lockstep.step(density, &mut steppers)?;
            drop(steppers);
            let members = &mut self.members;
            self.active.retain(|&c| {
                let member = &mut members[c];
                let chain = &mut chains[c];
                let done = member.finish_leaf(chain.rng);
                if done {
                    stats[c] = member.finish(chain.state);
                }
                !done
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::chain::chain_rng;
    use crate::kernels::{KernelState, StepParams};
    use crate::log_density::for_each_row;
    use crate::metric::DiagonalMassMatrix;

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
                    params: StepParams {
                        step_size,
                        metric: &metric,
                        trajectory_length: None,
                    },
                })
                .collect();
            nuts.step_batch(&density, &mut chains, &mut stats).unwrap();
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
