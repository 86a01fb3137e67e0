//! Static-length Hamiltonian Monte Carlo, one chain or a `[C, D]` batch of chains in lockstep.

use burn::config::Config;
use rand::Rng;

use crate::draw_stats::DrawStats;
use crate::error::SamplerError;
use crate::integrator::{kick, kick_and_drift};
use crate::kernel::{BatchChain, BatchKernel, Kernel, KernelState, StepParams};
use crate::log_density::LogDensity;

/// Configuration of the HMC kernel and of its step-size adaptation target.
#[derive(Config, Debug)]
pub struct HmcConfig {
    /// Target Metropolis acceptance rate δ for the step-size adaptation. For piecewise-linear
    /// activations (ReLU) use about 0.45 (see `NutsConfig::target_accept`).
    #[config(default = 0.8)]
    pub target_accept: f64,
    /// Number of leapfrog steps `L` per transition (ignored when `trajectory_length` is set).
    #[config(default = 16)]
    pub num_steps: usize,
    /// Integration time `λ`; each transition then takes `ceil(λ / ε)` steps, so the trajectory
    /// length stays fixed while the step size adapts.
    pub trajectory_length: Option<f64>,
    /// Uniform jitter `j ∈ [0, 1)`: the number of steps (or `λ`) is multiplied by
    /// `U(1 - j, 1 + j)` each transition, which breaks the periodicities that make fixed-length
    /// HMC resonate on near-Gaussian targets (Neal 2011, §5.4.2.2).
    #[config(default = 0.0)]
    pub jitter: f64,
    /// Upper bound on steps per transition, so a tiny step size in early warmup cannot stall.
    #[config(default = 1024)]
    pub max_num_steps: usize,
    /// Partial momentum refresh angle `α ∈ (0, π/2]`; `None` draws a fresh momentum every time
    /// (`α = π/2` is the same chain).
    pub refresh_angle: Option<f64>,
    /// Energy error `H - H0` above which a trajectory is stopped and flagged divergent.
    #[config(default = 1000.0)]
    pub max_energy_error: f64,
}

impl HmcConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let invalid = |message: String| Err(SamplerError::InvalidConfig(message));
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return invalid(format!(
                "HMC target_accept must lie in (0, 1), got {}",
                self.target_accept
            ));
        }
        if self.num_steps == 0 || self.max_num_steps == 0 {
            return invalid("HMC num_steps and max_num_steps must be at least 1".into());
        }
        if let Some(length) = self.trajectory_length {
            if !(length > 0.0 && length.is_finite()) {
                return invalid(format!(
                    "HMC trajectory_length must be positive and finite, got {length}"
                ));
            }
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return invalid(format!(
                "HMC jitter must lie in [0, 1), got {}",
                self.jitter
            ));
        }
        if let Some(angle) = self.refresh_angle {
            if !(angle > 0.0 && angle <= std::f64::consts::FRAC_PI_2) {
                return invalid(format!(
                    "HMC refresh_angle must lie in (0, π/2], got {angle}"
                ));
            }
        }
        if !(self.max_energy_error > 0.0) {
            return invalid(format!(
                "HMC max_energy_error must be positive, got {}",
                self.max_energy_error
            ));
        }
        Ok(())
    }

    /// Builds the kernel; buffers are sized on first use and reused afterwards.
    pub fn init(&self) -> Result<Hmc, SamplerError> {
        self.validate()?;
        Ok(Hmc {
            config: self.clone(),
            batch: Batch::default(),
            stats: Vec::with_capacity(1),
        })
    }
}

/// Row-major `[C, D]` buffers of a batch, reused across transitions.
#[derive(Clone, Debug, Default)]
struct Batch {
    dim: usize,
    chains: usize,
    position: Vec<f64>,
    momentum: Vec<f64>,
    velocity: Vec<f64>,
    gradient: Vec<f64>,
    log_density: Vec<f64>,
    /// Momentum at the start, to be negated on rejection under partial refresh.
    initial_momentum: Vec<f64>,
    initial_energy: Vec<f64>,
    energy: Vec<f64>,
    num_steps: Vec<usize>,
    steps_taken: Vec<usize>,
    running: Vec<bool>,
}

impl Batch {
    fn resize(&mut self, chains: usize, dim: usize) {
        if self.chains == chains && self.dim == dim {
            return;
        }
        let n = chains * dim;
        *self = Batch {
            dim,
            chains,
            position: vec![0.0; n],
            momentum: vec![0.0; n],
            velocity: vec![0.0; n],
            gradient: vec![0.0; n],
            log_density: vec![0.0; chains],
            initial_momentum: vec![0.0; n],
            initial_energy: vec![0.0; chains],
            energy: vec![0.0; chains],
            num_steps: vec![0; chains],
            steps_taken: vec![0; chains],
            running: vec![false; chains],
        };
    }
}

/// The HMC kernel: settings plus reusable batch buffers.
///
/// Each transition draws a momentum, takes `L` leapfrog steps and applies a Metropolis
/// correction (Duane et al. 1987; Neal 2011, §5.3.2). With `refresh_angle` set the momentum is
/// only partially refreshed, `p ← p cos α + n sin α` with `n ~ N(0, M)` (Horowitz 1991's
/// generalized HMC, the momentum update of Zlochin & Baram's manifold stochastic dynamics). That
/// chain is reversible only if a rejected proposal also negates the momentum: the proposal is the
/// involution `(q, p) → (q', -p')` followed by a momentum flip, so acceptance keeps `p'` and
/// rejection leaves `-p`. The kernel does exactly that.
#[derive(Clone, Debug)]
pub struct Hmc {
    config: HmcConfig,
    batch: Batch,
    /// Reused by the single-chain `step`.
    stats: Vec<DrawStats>,
}

impl Hmc {
    fn num_steps<R: Rng + ?Sized>(&self, rng: &mut R, step_size: f64) -> usize {
        let base = match self.config.trajectory_length {
            Some(length) => length / step_size,
            None => self.config.num_steps as f64,
        };
        let factor = if self.config.jitter > 0.0 {
            let u: f64 = rng.random();
            1.0 + self.config.jitter * (2.0 * u - 1.0)
        } else {
            1.0
        };
        let steps = (base * factor).ceil();
        if steps.is_finite() {
            (steps as usize).clamp(1, self.config.max_num_steps)
        } else {
            self.config.max_num_steps
        }
    }

    /// Metropolis test for chain `c` at the end of its trajectory (Neal 2011, eq. 5.9).
    fn finish<R: Rng + ?Sized>(
        &self,
        batch: &mut Batch,
        c: usize,
        chain: &mut BatchChain<'_, R>,
        divergent: bool,
    ) -> DrawStats {
        let dim = batch.dim;
        let rows = c * dim..(c + 1) * dim;
        let initial_energy = batch.initial_energy[c];
        let energy_error = batch.energy[c] - initial_energy;
        let accept_prob = if divergent {
            0.0
        } else {
            (-energy_error).exp().min(1.0)
        };
        let u: f64 = chain.rng.random();
        let accepted = !divergent && u < accept_prob;
        let state = &mut *chain.state;
        let partial = self.config.refresh_angle.is_some();
        let energy = if accepted {
            state
                .position
                .copy_from_slice(&batch.position[rows.clone()]);
            state
                .gradient
                .copy_from_slice(&batch.gradient[rows.clone()]);
            state.log_density = batch.log_density[c];
            if partial {
                set_momentum(&mut state.momentum, &batch.momentum[rows], 1.0);
            }
            batch.energy[c]
        } else {
            if partial {
                set_momentum(&mut state.momentum, &batch.initial_momentum[rows], -1.0);
            }
            initial_energy
        };
        DrawStats {
            log_density: state.log_density,
            accept_stat: accept_prob,
            step_size: chain.step_size,
            tree_depth: 0,
            n_leapfrog: batch.steps_taken[c] as u32,
            divergent,
            energy,
            energy_error,
        }
    }
}

fn set_momentum(slot: &mut Option<Vec<f64>>, momentum: &[f64], sign: f64) {
    let target = slot.get_or_insert_with(Vec::new);
    target.clear();
    target.extend(momentum.iter().map(|p| sign * p));
}

impl BatchKernel for Hmc {
    /// One transition of every chain in `chains`, all leapfrog steps in lockstep: each step is a
    /// single `[C, D]` call of the log density. Chains keep their own step size, number of steps,
    /// random stream and accept/reject decision, so chain `c` of a batch makes exactly the moves it
    /// would make alone (given a log density that is deterministic per row). A chain that finished
    /// early keeps a valid position in its row so it cannot disturb the evaluation of the others;
    /// an evaluation error of the whole batch is a divergence of every chain still running.
    ///
    /// Random numbers per chain, in order: the momentum normals (`D`, or `D` more for a partial
    /// refresh), one uniform for the jitter if enabled, one uniform for the Metropolis test.
    fn step_batch<L: LogDensity + ?Sized, R: Rng + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) {
        stats.clear();
        stats.resize(chains.len(), DrawStats::default());
        if chains.is_empty() {
            return;
        }
        let dim = chains[0].state.dim();
        let mut batch = std::mem::take(&mut self.batch);
        batch.resize(chains.len(), dim);
        let refresh = self.config.refresh_angle.map(|a| (a.cos(), a.sin()));

        for (c, chain) in chains.iter_mut().enumerate() {
            let rows = c * dim..(c + 1) * dim;
            batch.position[rows.clone()].copy_from_slice(&chain.state.position);
            batch.gradient[rows.clone()].copy_from_slice(&chain.state.gradient);
            batch.log_density[c] = chain.state.log_density;
            let momentum = &mut batch.momentum[rows.clone()];
            chain.metric.sample_momentum(chain.rng, momentum);
            if let (Some((cos, sin)), Some(previous)) = (refresh, chain.state.momentum.as_ref()) {
                if previous.len() == dim {
                    for (p, old) in momentum.iter_mut().zip(previous) {
                        *p = old * cos + *p * sin;
                    }
                }
            }
            batch.initial_momentum[rows.clone()].copy_from_slice(momentum);
            let kinetic = chain
                .metric
                .velocity_and_kinetic_energy(momentum, &mut batch.velocity[rows]);
            batch.initial_energy[c] = -chain.state.log_density + kinetic;
            batch.num_steps[c] = self.num_steps(chain.rng, chain.step_size);
            batch.steps_taken[c] = 0;
            batch.running[c] = true;
        }

        let mut running = chains.len();
        while running > 0 {
            for (c, chain) in chains.iter().enumerate() {
                if batch.running[c] {
                    let rows = c * dim..(c + 1) * dim;
                    kick_and_drift(
                        chain.step_size,
                        chain.metric.inverse_diag(),
                        &mut batch.position[rows.clone()],
                        &mut batch.momentum[rows.clone()],
                        &batch.gradient[rows],
                    );
                }
            }
            if density
                .log_density_and_gradient(
                    &batch.position,
                    &mut batch.log_density,
                    &mut batch.gradient,
                )
                .is_err()
            {
                batch.log_density.iter_mut().for_each(|v| *v = f64::NAN);
            }
            for (c, chain) in chains.iter_mut().enumerate() {
                if !batch.running[c] {
                    continue;
                }
                let rows = c * dim..(c + 1) * dim;
                let kinetic = kick(
                    chain.step_size,
                    chain.metric.inverse_diag(),
                    &mut batch.momentum[rows.clone()],
                    &mut batch.velocity[rows.clone()],
                    &batch.gradient[rows.clone()],
                );
                let energy = -batch.log_density[c] + kinetic;
                batch.energy[c] = energy;
                batch.steps_taken[c] += 1;
                let energy_error = energy - batch.initial_energy[c];
                // Divergence: a non-finite energy, or an energy error above the threshold.
                let divergent =
                    !energy.is_finite() || !(energy_error <= self.config.max_energy_error);
                if divergent || batch.steps_taken[c] == batch.num_steps[c] {
                    batch.running[c] = false;
                    running -= 1;
                    stats[c] = self.finish(&mut batch, c, chain, divergent);
                    // Keep a valid point in the row for the remaining lockstep evaluations.
                    batch.position[rows.clone()].copy_from_slice(&chain.state.position);
                    batch.gradient[rows].copy_from_slice(&chain.state.gradient);
                }
            }
        }
        self.batch = batch;
    }
}

impl Kernel for Hmc {
    fn uses_leapfrog(&self) -> bool {
        true
    }

    fn step<L: LogDensity + ?Sized, R: Rng + ?Sized>(
        &mut self,
        density: &L,
        rng: &mut R,
        mut state: KernelState,
        params: StepParams<'_>,
    ) -> (KernelState, DrawStats) {
        let mut stats = std::mem::take(&mut self.stats);
        let mut chains = [BatchChain {
            rng,
            state: &mut state,
            step_size: params.step_size,
            metric: params.metric,
        }];
        self.step_batch(density, &mut chains, &mut stats);
        let draw_stats = stats[0];
        self.stats = stats;
        (state, draw_stats)
    }
}
