//! Burn modules, likelihoods, priors, flat parameter vectors and posteriors for Bayesian neural networks.

pub mod activation;
pub mod autodiff_density;
pub mod device;
mod early_stopping;
pub mod ensemble;
pub mod flatten;
mod fused;
/// The fused operation's public face (`set_kernel_threads`, the program types).
pub use fused::fused_mlp;
pub mod layout;
pub mod likelihood;
pub mod metrics;
pub mod mlp;
pub mod model;
pub mod module_head;
pub mod module_posterior;
pub mod observations;
pub mod posterior;
pub mod predictive;
pub mod prior;
pub mod store;
pub mod unknown_name;

pub use activation::Activation;
pub use autodiff_density::AutodiffLogDensity;
pub use device::{wgpu_adapter, wgpu_test_device, DeviceError, DeviceName, WgpuAdapter};
pub use ensemble::{
    initial_parameters, EnsembleConfig, EnsembleConfigError, TrainedMember, WeightInit,
};
pub use flatten::{flatten, layout_of, load_flat_tensor, unflatten, LengthMismatch};
pub use fused_mlp::{FusedMlp, FusedProgram, GaussNewtonDensity};
pub use layout::{LayoutEntry, ParameterKind, ParameterLayout};
pub use likelihood::{Likelihood, LikelihoodError, LogSigmaPrior, ScaleLink};
pub use metrics::{
    log_sum_exp, predictive_metrics, PredictiveAccumulator, PredictiveMetrics, TargetMetrics,
};
pub use mlp::{Mlp, MlpConfig};
pub use model::{BnnConfig, BnnConfigError, BnnModel};
pub use module_head::{host_rows, module_starts, predict_with_draws, HeadError, HeadLikelihood};
pub use module_posterior::{ModuleLikelihood, ModulePosterior, ModulePosteriorError};
pub use observations::{DataShapeError, HostData};
pub use posterior::{check_dtype, GradientPath, MlpPosterior, Posterior, PosteriorError};
pub use predictive::PointPrediction;
pub use prior::{LayerPrior, Prior, PriorError, PriorSpec};
pub use store::{load_parameters, save_parameters, StoreError};
pub use unknown_name::UnknownName;
