//! Burn modules, likelihoods, priors, flat parameter vectors and posteriors for Bayesian neural networks.

pub mod activation;
pub mod autodiff_density;
pub mod device;
mod early_stopping;
pub mod ensemble;
pub mod flatten;
pub mod fused_mlp;
pub mod layout;
pub mod likelihood;
pub mod metrics;
pub mod mlp;
pub mod model;
pub mod module_posterior;
pub mod observations;
pub mod posterior;
pub mod predictive;
pub mod prior;
pub mod store;

pub use activation::Activation;
pub use autodiff_density::AutodiffLogDensity;
pub use device::DeviceName;
pub use ensemble::{initial_parameters, EnsembleConfig, TrainedMember};
pub use flatten::{flatten, layout_of, load_flat_tensor, unflatten, LengthMismatch};
pub use layout::{LayoutEntry, ParameterKind, ParameterLayout};
pub use likelihood::{Likelihood, LogSigmaPrior, ScaleLink};
pub use metrics::{log_sum_exp, predictive_metrics, PredictiveAccumulator, PredictiveMetrics};
pub use mlp::{Mlp, MlpConfig};
pub use model::{BnnConfig, BnnModel};
pub use module_posterior::{ModuleLikelihood, ModulePosterior};
pub use observations::{DataShapeError, HostData};
pub use fused_mlp::FusedMlp;
pub use posterior::{GradientPath, MlpPosterior, Posterior, PosteriorError};
pub use predictive::PointPrediction;
pub use prior::{LayerPrior, Prior, PriorSpec};
pub use store::{load_parameters, save_parameters, StoreError};
