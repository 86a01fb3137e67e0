//! Running chains as one ensemble (LAPS): every round is one transition of every chain, then one
//! tuning step from all of them. The chains are stepped threaded (contiguous groups, one kernel
//! per thread) or as one batch; each chain's moves depend only on its own stream and the shared
//! parameters, and the ensemble's statistics are summed in chain order, so the draws do not
//! depend on the thread count or on batching.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use rand_distr::{Distribution, StandardNormal};

use crate::adaptation::ensemble_tuner::{
    initial_velocities, Ensemble, EnsembleMember, EnsemblePhase, MemberView,
};
use crate::adaptation::Tuner;
use crate::chain::ChainState;
use crate::draw_sink::DrawSink;
use crate::draw_stats::DrawStats;
use crate::error::SamplerError;
use crate::kernels::{BatchChain, BatchKernel, KernelState, Mams, Mclmc};
use crate::log_density::LogDensity;
use crate::sampler::{record_draw, Sampler};

impl Sampler {
    /// Runs `chains` as one ensemble: MCLMC (`burn_in`) while the ensemble burns in, MAMS with
    /// shared steps (`adjusted`) after it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_ensemble<L: LogDensity + ?Sized>(
        &self,
        density: &L,
        burn_in: Mclmc,
        adjusted: Mams,
        start_jitter: f64,
        chains: &mut [ChainState],
        recorded: &Range<usize>,
        sink: &mut (dyn DrawSink + Send),
        stop: &AtomicBool,
    ) -> Result<(), SamplerError> {
        check_ensemble(chains)?;
        let threads = if self.config().batched {
            1
        } else {
            self.config()
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                .clamp(1, chains.len())
        };
        let mut burn_in_kernels = vec![burn_in; threads];
        let mut adjusted_kernels = vec![adjusted; threads];
        if phase(&chains[0]) == EnsemblePhase::Start {
            self.start_ensemble(density, start_jitter, chains)?;
        }
        let num_draws = self.config().num_draws;
        let mut stats: Vec<DrawStats> = Vec::with_capacity(chains.len());
        while !stop.load(Ordering::Relaxed) {
            let first = &chains[0];
            if first.iteration >= first.warmup.num_warmup() + num_draws {
                break;
            }
            let phase = phase(first);
            // Phase and index of this transition, before the tuning may end the warmup.
            let warmup = first.in_warmup();
            let index = if warmup {
                first.iteration
            } else {
                first.iteration - first.warmup.num_warmup()
            };
            // While tuning, every chain moves (its statistics tune the others); while sampling,
            // a chain the sink has finished (early stop) rests.
            let mut moving: Vec<&mut ChainState> = chains
                .iter_mut()
                .filter(|chain| warmup || !sink.chain_finished(chain.chain))
                .collect();
            if moving.is_empty() {
                break;
            }
            let result = if phase == EnsemblePhase::BurnIn {
                step_all(&mut burn_in_kernels, density, &mut moving, &mut stats)
            } else {
                step_all(&mut adjusted_kernels, density, &mut moving, &mut stats)
            };
            result.map_err(|cause| SamplerError::BatchEvaluation { cause })?;
            drop(moving);
            if warmup {
                tune(chains, &stats);
            } else {
                // Sampling: the tuning is over; only the next shared number of steps is drawn.
                ensemble(chains).observe(&[]);
            }
            let mut stats = stats.iter();
            for chain in chains.iter_mut() {
                if !warmup && sink.chain_finished(chain.chain) {
                    continue;
                }
                let draw_stats = stats.next().expect("one statistic per moving chain");
                chain.iteration += 1;
                record_draw(sink, chain, (warmup, index), draw_stats, recorded)?;
            }
        }
        Ok(())
    }

    /// Separates chains that start on an earlier chain's start, points every velocity, and
    /// starts the ensemble's burn-in.
    fn start_ensemble<L: LogDensity + ?Sized>(
        &self,
        density: &L,
        start_jitter: f64,
        chains: &mut [ChainState],
    ) -> Result<(), SamplerError> {
        for c in 1..chains.len() {
            let (earlier, rest) = chains.split_at_mut(c);
            let chain = &mut rest[0];
            let duplicate = earlier
                .iter()
                .any(|other| other.kernel.position == chain.kernel.position);
            if duplicate && start_jitter > 0.0 {
                let position: Vec<f64> = chain
                    .kernel
                    .position
                    .iter()
                    .map(|&x| {
                        let z: f64 = StandardNormal.sample(&mut chain.rng);
                        x + start_jitter * x.abs().max(1.0) * z
                    })
                    .collect();
                chain.kernel =
                    KernelState::init(density, position).map_err(|e| e.for_chain(chain.chain))?;
            }
        }
        let positions: Vec<&[f64]> = chains.iter().map(|c| &c.kernel.position[..]).collect();
        let gradients: Vec<&[f64]> = chains.iter().map(|c| &c.kernel.gradient[..]).collect();
        let velocities = initial_velocities(&positions, &gradients);
        let positions: Vec<Vec<f64>> = positions.iter().map(|x| x.to_vec()).collect();
        let gradients: Vec<Vec<f64>> = gradients.iter().map(|g| g.to_vec()).collect();
        let position_refs: Vec<&[f64]> = positions.iter().map(|x| &x[..]).collect();
        let gradient_refs: Vec<&[f64]> = gradients.iter().map(|g| &g[..]).collect();
        for (chain, velocity) in chains.iter_mut().zip(velocities) {
            chain.kernel.momentum = Some(velocity);
        }
        let seed = self.config().seed;
        ensemble(chains).start(seed, &position_refs, &gradient_refs);
        Ok(())
    }
}

/// The ensemble's chains must all be LAPS chains at the same iteration, two at least.
fn check_ensemble(chains: &[ChainState]) -> Result<(), SamplerError> {
    if chains.len() < 2 {
        return Err(SamplerError::InvalidConfig(format!(
            "LAPS tunes from the ensemble of chains and needs at least 2, got {}",
            chains.len()
        )));
    }
    if let Some(chain) = chains.iter().find(|c| c.warmup.ensemble().is_none()) {
        return Err(SamplerError::InvalidChainStart {
            chain: chain.chain,
            message: "its warmup is not LAPS's ensemble warmup (a chain of another sampler)".into(),
        });
    }
    let iteration = chains[0].iteration;
    if let Some(chain) = chains.iter().find(|c| c.iteration != iteration) {
        return Err(SamplerError::InvalidChainStart {
            chain: chain.chain,
            message: format!(
                "it is at iteration {}, chain {} at {iteration}; an ensemble's chains move together",
                chain.iteration, chains[0].chain
            ),
        });
    }
    Ok(())
}

fn phase(chain: &ChainState) -> EnsemblePhase {
    chain
        .warmup
        .ensemble()
        .map_or(EnsemblePhase::Sampling, |m| m.ensemble.phase)
}

/// Every chain's ensemble warmup and parameters, to tune together.
fn ensemble(chains: &mut [ChainState]) -> Ensemble<'_> {
    let mut members: Vec<&mut EnsembleMember> = Vec::with_capacity(chains.len());
    let mut params = Vec::with_capacity(chains.len());
    for chain in chains.iter_mut() {
        let ChainState {
            warmup, params: p, ..
        } = chain;
        match warmup {
            Tuner::Ensemble(member) => members.push(member.as_mut()),
            _ => unreachable!("checked by check_ensemble"),
        }
        params.push(p);
    }
    Ensemble { members, params }
}

/// One tuning step from every chain's transition.
fn tune(chains: &mut [ChainState], stats: &[DrawStats]) {
    // The views borrow the kernel states while the ensemble borrows the tuners: split the chain.
    let mut members: Vec<&mut EnsembleMember> = Vec::with_capacity(chains.len());
    let mut params = Vec::with_capacity(chains.len());
    let mut views = Vec::with_capacity(chains.len());
    for (chain, stats) in chains.iter_mut().zip(stats) {
        let ChainState {
            warmup,
            params: p,
            kernel,
            ..
        } = chain;
        match warmup {
            Tuner::Ensemble(member) => members.push(member.as_mut()),
            _ => unreachable!("checked by check_ensemble"),
        }
        params.push(p);
        views.push(MemberView {
            position: &kernel.position,
            gradient: &kernel.gradient,
            stats,
        });
    }
    Ensemble { members, params }.observe(&views);
}

/// One transition of every chain with `kernels` (one per thread): contiguous groups of chains,
/// one group per kernel, `stats` in chain order.
fn step_all<K, L>(
    kernels: &mut [K],
    density: &L,
    chains: &mut [&mut ChainState],
    stats: &mut Vec<DrawStats>,
) -> Result<(), crate::log_density::LogDensityError>
where
    K: BatchKernel + Send,
    L: LogDensity + ?Sized,
{
    stats.clear();
    if kernels.len() == 1 {
        return step_group(&mut kernels[0], density, chains, stats);
    }
    let group = chains.len().div_ceil(kernels.len());
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = kernels
            .iter_mut()
            .zip(chains.chunks_mut(group))
            .map(|(kernel, chains)| {
                scope.spawn(move || {
                    let mut stats = Vec::with_capacity(chains.len());
                    step_group(kernel, density, chains, &mut stats).map(|()| stats)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a chain group's thread panicked"))
            .collect()
    });
    for result in results {
        stats.extend(result?);
    }
    Ok(())
}

fn step_group<K: BatchKernel, L: LogDensity + ?Sized>(
    kernel: &mut K,
    density: &L,
    chains: &mut [&mut ChainState],
    stats: &mut Vec<DrawStats>,
) -> Result<(), crate::log_density::LogDensityError> {
    let mut members: Vec<BatchChain<'_, _>> = chains
        .iter_mut()
        .map(|chain| {
            let ChainState {
                rng,
                kernel: state,
                params,
                ..
            } = &mut **chain;
            BatchChain {
                rng,
                state,
                params: params.step_params(),
            }
        })
        .collect();
    kernel.step_batch(density, &mut members, stats)
}
