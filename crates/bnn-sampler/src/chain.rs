//! Per-chain state (everything needed to resume bit for bit), starting points and random streams.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::adaptation::{TunedParams, Tuner};
use crate::kernels::KernelState;

/// The random number generator of a chain.
pub type ChainRng = ChaCha8Rng;

/// The random stream of chain `chain` for run seed `seed`: one ChaCha8 key per seed and one
/// stream per chain, so chains are independent and each chain's draws depend only on
/// `(seed, chain)`, never on thread scheduling.
pub fn chain_rng(seed: u64, chain: usize) -> ChainRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(chain as u64);
    rng
}

/// Where and how a chain starts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChainStart {
    /// Initial position (e.g. one member of a deep ensemble, as DEI-MCMC starts its chains).
    pub position: Vec<f64>,
    /// Initial step size; `None` uses the sampler's.
    pub step_size: Option<f64>,
    /// Initial diagonal of the inverse mass matrix; `None` uses the identity.
    pub inverse_mass_diag: Option<Vec<f64>>,
}

impl ChainStart {
    pub fn at(position: Vec<f64>) -> Self {
        Self {
            position,
            step_size: None,
            inverse_mass_diag: None,
        }
    }

    pub fn with_step_size(mut self, step_size: f64) -> Self {
        self.step_size = Some(step_size);
        self
    }

    pub fn with_inverse_mass_diag(mut self, inverse_mass_diag: Vec<f64>) -> Self {
        self.inverse_mass_diag = Some(inverse_mass_diag);
        self
    }
}

/// The complete state of one chain between two transitions. Serializing it and deserializing it
/// later continues the chain exactly where it stopped (same draws, bit for bit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainState {
    pub chain: usize,
    /// Transitions completed so far, warmup first.
    pub iteration: usize,
    pub kernel: KernelState,
    /// Step size, metric and trajectory length (stored inline: `step_size`, `metric`, ...).
    #[serde(flatten)]
    pub params: TunedParams,
    pub warmup: Tuner,
    pub rng: ChainRng,
}

impl ChainState {
    /// Whether the chain is still in its warmup.
    pub fn in_warmup(&self) -> bool {
        self.iteration < self.warmup.num_warmup()
    }
}
