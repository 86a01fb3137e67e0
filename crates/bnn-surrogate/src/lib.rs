//! Latent Hamiltonian neural networks (L-HNN; Dhulipala, Che & Shields 2023, J. Comput. Phys.
//! 492:112425) as cheap surrogate forces for Hamiltonian samplers.
//!
//! The pieces, in the order they are used:
//! - `training_data`: chained leapfrog trajectories on the true gradient of a
//!   [`bnn_sampler::LogDensity`], recording each phase point `(q, p)` and its time derivatives
//!   `(p, ∇ log p(q))` ([`TrajectoryDataConfig`], [`TrajectoryData`]);
//! - `latent_hnn`: the network as a Burn module, a sine MLP whose `m` latent outputs sum to
//!   `H_θ(q, p)`, with `∂H_θ/∂(q, p)` in closed form so training needs only a first-order backward
//!   pass ([`LatentHnnConfig`], [`LatentHnn`]);
//! - `train`: minibatch Adam (coupled L2 decay) on the Hamilton's-equations residual
//!   `‖∂H/∂p − dq/dt‖² + ‖∂H/∂q + dp/dt‖²` ([`LhnnTrainingConfig`], [`TrainedLhnn`]);
//! - `surrogate`: the trained weights in plain f64 ([`LhnnSurrogate`]), serializable, and a
//!   [`bnn_sampler::dynamics::surrogate::SurrogateGradient`] giving `−∂H_θ/∂q` at `p = 0`, a
//!   conservative force for surrogate NUTS.
//!
//! ```no_run
//! use bnn_surrogate::{LatentHnnConfig, LhnnTrainingConfig, TrajectoryDataConfig};
//! # fn run(target: &dyn bnn_sampler::LogDensity, start: &[f64]) -> Result<(), Box<dyn std::error::Error>> {
//! let data = TrajectoryDataConfig::new().with_seed(1).generate(target, start)?;
//! let network = LatentHnnConfig::new(target.dim());
//! let trained = LhnnTrainingConfig::new().train(&network, &data, &burn::tensor::Device::flex(), |_, _| {})?;
//! let json = serde_json::to_string(&trained.surrogate)?;
//! # Ok(()) }
//! ```

pub mod latent_hnn;
pub mod surrogate;
pub mod train;
pub mod training_data;

pub use latent_hnn::{LatentHnn, LatentHnnConfig, LatentHnnConfigError};
pub use surrogate::{DenseLayer, LhnnSurrogate, SurrogateWeightsError};
pub use train::{
    LhnnTrainingConfig, LhnnTrainingConfigError, LossRecord, TrainedLhnn, TrainingError,
};
pub use training_data::{
    TrajectoryData, TrajectoryDataConfig, TrajectoryDataConfigError, TrajectoryError,
};
