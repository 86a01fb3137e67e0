//! Posteriors over flat parameter vectors: the trait, and the built-in batched MLP posterior.

use crate::autodiff_density::positions_data;
use crate::ensemble::EnsembleConfigError;
use crate::flatten::layout_of;
use crate::fused::fused_mlp::{FusedMlp, FusedProgram, LayerOffsets};
use crate::layout::{ParameterKind, ParameterLayout};
use crate::likelihood::Likelihood;
use crate::model::{BnnConfig, BnnConfigError};
use crate::observations::{tensor_from, DataShapeError, DeviceData, HostData};
use crate::prior::PriorError;
use crate::unknown_name::UnknownName;
use bnn_kernels::KernelError;
use bnn_sampler::{IsokineticPath, LogDensityError};
use burn::tensor::{DType, Device, Int, Tensor, TensorData};
use std::ops::Range;

/// log p(θ | data) up to a constant, for a batch of flat parameter vectors.
///
/// Implementations build the value from Burn tensor operations so that its gradient comes from
/// Burn's autodiff; [`crate::AutodiffLogDensity`] turns any `Posterior` into the sampler's
/// `LogDensity`.
pub trait Posterior: Send + Sync {
    /// Names, shapes and offsets of the D coordinates.
    fn layout(&self) -> &ParameterLayout;

    /// The device the evaluation runs on (autodiff enabled).
    fn device(&self) -> &Device;

    /// The float type positions are converted to before evaluation.
    fn dtype(&self) -> DType {
        DType::F32
    }

    /// `theta`: `[C, D]` (tracked for gradients by the caller) → `[C]` log posterior densities.
    fn log_posterior(&self, theta: Tensor<2>) -> Tensor<1>;

    /// Writes log posterior and gradient of a host `[C, D]` batch without going through tensors
    /// and returns `true`, where the posterior has such a path; `false` where it has not (the
    /// default: [`crate::AutodiffLogDensity`] then uses `log_posterior` and Burn's autodiff). A
    /// path here must give the numbers of the autodiff path to the last bit.
    fn host_log_posterior_and_gradient(
        &self,
        _positions: &[f64],
        _values: &mut [f64],
        _gradients: &mut [f64],
    ) -> bool {
        false
    }

    /// Log posterior `[C]` and gradient `[C, D]` of a host `[C, D]` batch through the posterior's
    /// own device operation, with no autodiff graph and both read back in one transfer, where it
    /// has one (then `Some`, with the numbers of the autodiff path to the last bit); `None` (the
    /// default) where it has not. On a GPU a graph and a second read-back cost more per call than
    /// the gradient of a small network.
    fn device_log_posterior_and_gradient(
        &self,
        _positions: &[f64],
        _chains: usize,
    ) -> Option<Result<(TensorData, TensorData), LogDensityError>> {
        None
    }

    /// Runs many chains' isokinetic paths (fresh; path `i` with the step size and `√Σ` of
    /// `parameters[i]`; `bnn_sampler::PathIntegrator`) on the posterior's device, every stage's
    /// gradient there and one read-back per path, where it can
    /// ([`Posterior::integrates_paths_on_device`]; then `Some`); `None` (the default) where it
    /// cannot. The arithmetic is the device's float type, not the host's f64.
    fn device_isokinetic_paths(
        &self,
        _paths: &mut [IsokineticPath],
        _parameters: &[(f64, &[f64])],
    ) -> Option<Result<(), LogDensityError>> {
        None
    }

    /// Whether [`Posterior::device_isokinetic_paths`] runs here.
    fn integrates_paths_on_device(&self) -> bool {
        false
    }

    /// The log posterior alone (a forward pass) of a host `[C, D]` batch, where the posterior has
    /// such a path (then `true`, with the values of the gradient path to the last bit): what a
    /// surrogate-force leaf or a Metropolis test needs, at a fraction of a gradient's cost.
    fn host_log_posterior(&self, _positions: &[f64], _values: &mut [f64]) -> bool {
        false
    }

    /// The number of data rows `N` the log likelihood sums over, where the posterior can be
    /// estimated from subsets of them ([`Posterior::minibatch_log_posterior`]); `None` (the
    /// default) where it cannot.
    fn minibatch_rows(&self) -> Option<usize> {
        None
    }

    /// The minibatch estimate `log prior(θ_c) + (N / B) Σ_{n ∈ rows_c} log p(yₙ | θ_c)` for
    /// `theta` `[C, D]` (tracked for gradients by the caller), chain `c` on the rows
    /// `rows[c·B..(c+1)·B]`; `None` where the posterior has no minibatch form.
    fn minibatch_log_posterior(&self, _theta: Tensor<2>, _rows: &[usize]) -> Option<Tensor<1>> {
        None
    }

    /// The same estimate from host memory, with gradients where asked for, where the posterior
    /// has such a path (then `true`); `false` otherwise.
    fn host_minibatch_log_posterior(
        &self,
        _rows: &[usize],
        _positions: &[f64],
        _values: &mut [f64],
        _gradients: Option<&mut [f64]>,
    ) -> bool {
        false
    }
}

/// Why a posterior could not be built (or an ensemble trained). Each message names its cause;
/// a typed cause (the model's, the prior's, the ensemble's settings, the fused kernel's) is also
/// `source()`, which the CLI's report does not repeat.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PosteriorError {
    #[error("invalid model config: {0}")]
    Config(String),
    #[error("invalid model config: {0}")]
    Model(#[from] BnnConfigError),
    #[error("invalid model config: {0}")]
    Prior(#[from] PriorError),
    #[error("invalid model config: {0}")]
    Ensemble(#[from] EnsembleConfigError),
    #[error("data do not fit the model: {0}")]
    Data(DataShapeError),
    #[error("the device does not support {0:?} arithmetic")]
    UnsupportedDType(DType),
    #[error("wgpu computes the posteriors in F32 only, not {0:?}: its shaders evaluate exp, tanh and log in f32 whatever the tensor type, and NVIDIA's Vulkan compiler rejects those shaders in f64; use DType::F32 on wgpu, or a CPU device for f64")]
    GpuNeedsF32(DType),
    #[error("the fused MLP kernel cannot be built: {0}")]
    Fused(#[from] KernelError),
    #[error("the fused MLP kernel cannot be built: this device has no fused MLP description")]
    NoFusedDescription,
}

/// Whether the posteriors can compute in `dtype` on `device`. On wgpu only f32: Burn's shaders
/// evaluate exp, tanh and log in f32 even for f64 tensors (so f64 buys no precision there), and
/// NVIDIA's Vulkan compiler refuses those f64 shaders outright ("NVVM compilation failed", which
/// poisons the device; seen on an H100 with driver 580.159), so asking is an error, not a panic
/// halfway through a run.
pub fn check_dtype(device: &Device, dtype: DType) -> Result<(), PosteriorError> {
    use burn::backend::DispatchDevice;
    if !device.supports_dtype(dtype) {
        return Err(PosteriorError::UnsupportedDType(dtype));
    }
    let on_gpu = matches!(
        device.clone().without_autodiff().as_dispatch(),
        DispatchDevice::Cube(_)
    );
    if on_gpu && dtype != DType::F32 {
        return Err(PosteriorError::GpuNeedsF32(dtype));
    }
    Ok(())
}

impl From<DataShapeError> for PosteriorError {
    fn from(error: DataShapeError) -> Self {
        Self::Data(error)
    }
}

/// How the built-in posterior computes its log likelihood and gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GradientPath {
    /// The fused operation with a handwritten backward ([`crate::fused::fused_mlp`]): the host kernel
    /// on the CPU backends (Flex, NdArray), one kernel per call on wgpu
    /// ([`crate::fused::fused_mlp::FusedProgram::DeviceKernel`]; the tensor program where it does not apply).
    #[default]
    Auto,
    /// The fused operation as batched backend tensor operations on every device (on the CPU
    /// this is slower than the host kernel; it exists to compare and test the wgpu program).
    TensorOps,
    /// Burn's tensor graph everywhere (the reference the fused paths are tested against).
    Plain,
}

impl GradientPath {
    pub const ALL: [GradientPath; 3] = [
        GradientPath::Auto,
        GradientPath::TensorOps,
        GradientPath::Plain,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GradientPath::Auto => "auto",
            GradientPath::TensorOps => "tensor_ops",
            GradientPath::Plain => "plain",
        }
    }
}

impl std::str::FromStr for GradientPath {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('-', "_");
        GradientPath::ALL
            .into_iter()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| {
                UnknownName::new(
                    "gradient path",
                    s,
                    GradientPath::ALL.map(GradientPath::name),
                )
            })
    }
}

/// Slices of one dense layer inside θ.
#[derive(Debug, Clone)]
struct LayerSlices {
    weight: Range<usize>,
    bias: Range<usize>,
    d_in: usize,
    d_out: usize,
}

/// The built-in posterior: an MLP evaluated for C parameter vectors at once with batched
/// matrix products (`[1, N, d_in] @ [C, d_in, d_out]`), plus the log prior.
pub struct MlpPosterior {
    config: BnnConfig,
    layout: ParameterLayout,
    device: Device,
    dtype: DType,
    data: DeviceData,
    layers: Vec<LayerSlices>,
    log_sigma_index: Option<usize>,
    prior_quadratic: Tensor<2>,
    prior_absolute: Option<Tensor<2>>,
    prior_constant: f64,
    fused: Option<FusedMlp>,
}

impl MlpPosterior {
    /// Builds the posterior on `device` (autodiff is enabled on it here) in float type `dtype`.
    pub fn new(
        config: BnnConfig,
        data: &HostData,
        device: &Device,
        dtype: DType,
    ) -> Result<Self, PosteriorError> {
        config.validate()?;
        data.validate(config.d_input, config.n_targets, &config.likelihood)?;
        let device = device.clone().autodiff();
        check_dtype(&device, dtype)?;
        // The layout comes from the real Burn module so that it matches `flatten`/`unflatten`.
        let layout = layout_of(&config.init(&device.clone().without_autodiff()));
        let mut layers = Vec::new();
        let mut log_sigma_index = None;
        let mut entries = layout.entries.iter().peekable();
        while let Some(entry) = entries.next() {
            match entry.kind {
                ParameterKind::Weight => {
                    let bias = entries
                        .next_if(|e| e.kind == ParameterKind::Bias && e.layer == entry.layer);
                    let bias = bias.expect("every MLP layer has a bias");
                    layers.push(LayerSlices {
                        weight: entry.range(),
                        bias: bias.range(),
                        d_in: entry.shape[0],
                        d_out: entry.shape[1],
                    });
                }
                ParameterKind::Likelihood => log_sigma_index = Some(entry.offset),
                _ => unreachable!("the MLP has only weights, biases and log σ"),
            }
        }
        let coefficients = config.prior.coefficients(&layout)?;
        let d = layout.dim();
        let to_row = |v: &[f64]| tensor_from(v, [1, d], &device, dtype);
        let prior_quadratic = to_row(&coefficients.quadratic);
        let prior_absolute = coefficients
            .has_laplace()
            .then(|| to_row(&coefficients.absolute));
        let fused = if FusedMlp::supports(&device) {
            let offsets: Vec<LayerOffsets> = layers
                .iter()
                .map(|l| LayerOffsets {
                    d_in: l.d_in,
                    d_out: l.d_out,
                    weight_offset: l.weight.start,
                    bias_offset: l.bias.start,
                })
                .collect();
            let fused = FusedMlp::new(
                &offsets,
                config.activation,
                &config.likelihood,
                log_sigma_index,
                d,
                data,
                coefficients.clone(),
            )
            .and_then(|f| f.with_program(FusedMlp::default_program(&device), &device))?;
            Some(fused)
        } else {
            None
        };
        let data = DeviceData::upload(data, &config.likelihood, &device, dtype);
        Ok(Self {
            config,
            layout,
            device,
            dtype,
            data,
            layers,
            log_sigma_index,
            prior_quadratic,
            prior_absolute,
            prior_constant: coefficients.constant,
            fused,
        })
    }

    /// Chooses how the log likelihood is evaluated (default [`GradientPath::Auto`]).
    pub fn with_gradient_path(mut self, path: GradientPath) -> Self {
        self.fused = match path {
            GradientPath::Plain => None,
            GradientPath::Auto => self.fused.map(|f| {
                let program = FusedMlp::default_program(&self.device);
                f.with_program(program, &self.device)
                    .expect("the default program runs on its device")
            }),
            GradientPath::TensorOps => self.fused.map(|f| {
                f.with_program(FusedProgram::TensorOps, &self.device)
                    .expect("tensor ops run on every device")
            }),
        };
        self
    }

    /// Caps the bytes of the fused tensor program's largest intermediate per call: calls with
    /// more chains run in blocks of chains (see [`FusedMlp::with_max_tensor_bytes`]). The
    /// default limit is the device's largest buffer.
    pub fn with_max_tensor_bytes(mut self, bytes: u64) -> Self {
        self.fused = self.fused.map(|f| f.with_max_tensor_bytes(bytes));
        self
    }

    /// How the device kernel's gradient phase gives parameters to threads (see
    /// [`FusedMlp::with_gradient_tile`]); the same numbers either way, to compare speeds on a GPU.
    pub fn with_gradient_tile(mut self, tile: crate::fused_mlp::GradientTile) -> Self {
        self.fused = self.fused.map(|f| f.with_gradient_tile(tile));
        self
    }

    /// Where the device kernel reads the inputs (see [`FusedMlp::with_input_columns`]); the
    /// same numbers either way, to compare speeds on a GPU.
    pub fn with_input_columns(mut self, columns: crate::fused_mlp::InputColumns) -> Self {
        self.fused = self.fused.map(|f| f.with_input_columns(columns));
        self
    }

    /// Whether evaluations go through the fused operation (any path but `Plain`).
    pub fn uses_fused_kernel(&self) -> bool {
        self.fused.is_some()
    }

    /// What computes the gradient: "host_kernel", "device_kernel", "tensor_ops" or "plain" (Burn's graph).
    pub fn gradient_program(&self) -> &'static str {
        match self.fused.as_ref().map(FusedMlp::program) {
            Some(FusedProgram::HostKernel) => "host_kernel",
            Some(FusedProgram::TensorOps) => "tensor_ops",
            Some(FusedProgram::DeviceKernel) => "device_kernel",
            None => "plain",
        }
    }

    pub fn config(&self) -> &BnnConfig {
        &self.config
    }

    /// Number of sampled parameters D.
    pub fn layout_dim(&self) -> usize {
        self.layout.dim()
    }

    /// The Bayesian Gauss–Newton metric `G(θ) = Σ_n J_nᵀ Λ_n J_n + P` of Zlochin & Baram's
    /// manifold stochastic dynamics at one position (dense `[D, D]`, row major; see
    /// [`FusedMlp::gauss_newton_metric`]). Needs the fused kernel's model description, which
    /// every device builds; an error names a wrong length of `theta`.
    pub fn gauss_newton_metric(&self, theta: &[f64]) -> Result<Vec<f64>, PosteriorError> {
        let d = self.layout.dim();
        if theta.len() != d {
            return Err(PosteriorError::Config(format!(
                "θ has {} values, the model {d}",
                theta.len()
            )));
        }
        let fused = self
            .fused
            .as_ref()
            .ok_or(PosteriorError::NoFusedDescription)?;
        Ok(fused.gauss_newton_metric(theta))
    }

    /// The posterior for manifold stochastic dynamics (f64 potential, Gauss–Newton metric and
    /// its derivatives; [`FusedMlp::riemannian_density`]): every head, Normal and Laplace priors.
    pub fn riemannian_density(&self) -> Result<crate::GaussNewtonDensity, PosteriorError> {
        let fused = self
            .fused
            .as_ref()
            .ok_or(PosteriorError::NoFusedDescription)?;
        Ok(fused.riemannian_density()?)
    }

    /// Position of the first learned log σ in θ, when the likelihood has them (one per target,
    /// consecutive).
    pub fn log_sigma_index(&self) -> Option<usize> {
        self.log_sigma_index
    }

    /// Network outputs `[C, N, K]` for a batch θ `[C, D]` on inputs `x` `[N, d_in]`.
    pub fn forward_batch(&self, theta: &Tensor<2>, x: &Tensor<2>) -> Tensor<3> {
        let c = theta.dims()[0];
        if c == 1 {
            // One chain: plain 2-D products skip the batch broadcasting (measurably cheaper on
            // the CPU backends for the small matrices of BNN regression).
            return self.forward_single(theta, x).unsqueeze::<3>();
        }
        self.forward_rows(theta, x.clone().unsqueeze::<3>())
    }

    /// `[N, K]` outputs for a single θ `[1, D]`.
    fn forward_single(&self, theta: &Tensor<2>, x: &Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        let mut h = x.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            let w = theta
                .clone()
                .slice([0..1, layer.weight.clone()])
                .reshape([layer.d_in, layer.d_out]);
            let b = theta.clone().slice([0..1, layer.bias.clone()]);
            h = h.matmul(w) + b;
            if i < last {
                h = self.config.activation.apply(h);
            }
        }
        h
    }

    /// Network outputs `[C, B, K]` for θ `[C, D]` on inputs `x` `[C, B, d_in]` (each chain its
    /// own rows) or `[1, B, d_in]` (rows shared, broadcast over the chains).
    fn forward_rows(&self, theta: &Tensor<2>, x: Tensor<3>) -> Tensor<3> {
        let c = theta.dims()[0];
        let last = self.layers.len() - 1;
        let mut h = x;
        for (i, layer) in self.layers.iter().enumerate() {
            let w = theta.clone().slice([0..c, layer.weight.clone()]).reshape([
                c,
                layer.d_in,
                layer.d_out,
            ]);
            let b = theta
                .clone()
                .slice([0..c, layer.bias.clone()])
                .reshape([c, 1, layer.d_out]);
            h = h.matmul(w) + b;
            if i < last {
                h = self.config.activation.apply(h);
            }
        }
        h
    }

    /// The learned log σ's of each chain, `[C, T]`, when the likelihood has them.
    fn log_sigma(&self, theta: &Tensor<2>) -> Option<Tensor<2>> {
        let c = theta.dims()[0];
        let t = self.config.n_targets;
        self.log_sigma_index
            .map(|i| theta.clone().slice([0..c, i..i + t]))
    }

    /// log prior of the network weights, `[C]` (the log σ prior is part of its likelihood head).
    pub fn log_prior(&self, theta: &Tensor<2>) -> Tensor<1> {
        let c = theta.dims()[0];
        let mut lp = (theta.clone().powi_scalar(2) * self.prior_quadratic.clone())
            .sum_dim(1)
            .mul_scalar(-0.5);
        if let Some(absolute) = &self.prior_absolute {
            lp = lp - (theta.clone().abs() * absolute.clone()).sum_dim(1);
        }
        lp.reshape([c]).add_scalar(self.prior_constant)
    }

    /// Log likelihood of the training data, `[C]`.
    pub fn log_likelihood(&self, theta: &Tensor<2>) -> Tensor<1> {
        if let Some(fused) = &self.fused {
            return fused.log_likelihood(theta.clone());
        }
        let outputs = self.forward_batch(theta, &self.data.x);
        self.config
            .likelihood
            .log_likelihood(outputs, &self.data.targets, self.log_sigma(theta))
    }
}

impl Posterior for MlpPosterior {
    fn layout(&self) -> &ParameterLayout {
        &self.layout
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn dtype(&self) -> DType {
        self.dtype
    }

    fn log_posterior(&self, theta: Tensor<2>) -> Tensor<1> {
        if let Some(fused) = &self.fused {
            return fused.log_posterior(theta);
        }
        self.log_prior(&theta) + self.log_likelihood(&theta)
    }

    /// The host kernel called directly when the fused operation runs it (CPU backends).
    fn host_log_posterior_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> bool {
        self.fused.as_ref().is_some_and(|f| {
            f.host_log_posterior_and_gradient(self.dtype, positions, values, gradients)
        })
    }

    fn host_log_posterior(&self, positions: &[f64], values: &mut [f64]) -> bool {
        self.fused
            .as_ref()
            .is_some_and(|f| f.host_log_posterior(self.dtype, positions, values))
    }

    /// The fused operation on a CubeCL device (wgpu), called without the graph.
    fn device_log_posterior_and_gradient(
        &self,
        positions: &[f64],
        chains: usize,
    ) -> Option<Result<(TensorData, TensorData), LogDensityError>> {
        let dim = self.layout().dim();
        self.fused
            .as_ref()?
            .device_log_posterior_and_gradient(&self.device, || {
                positions_data(positions, chains, dim, self.dtype)
            })
    }

    /// MCLMC's, MAMS's and LAPS's paths on a CubeCL device (wgpu) with the fused operation.
    fn device_isokinetic_paths(
        &self,
        paths: &mut [IsokineticPath],
        parameters: &[(f64, &[f64])],
    ) -> Option<Result<(), LogDensityError>> {
        self.fused
            .as_ref()?
            .device_isokinetic_paths(&self.device, self.dtype, paths, parameters)
    }

    fn integrates_paths_on_device(&self) -> bool {
        self.fused
            .as_ref()
            .is_some_and(|f| f.runs_paths_on(&self.device))
    }

    /// Every head but the learned σ, whose prior on log σ sits inside its likelihood term (a
    /// scaled minibatch would scale that prior too).
    fn minibatch_rows(&self) -> Option<usize> {
        (!matches!(
            self.config.likelihood,
            Likelihood::GaussianLearnedSigma { .. }
        ))
        .then_some(self.data.rows)
    }

    /// Burn's graph on the gathered rows (`select`, then `[C, B, ·]` batched products): the
    /// path on every device that has no host kernel.
    fn minibatch_log_posterior(&self, theta: Tensor<2>, rows: &[usize]) -> Option<Tensor<1>> {
        let n = self.minibatch_rows()?;
        let c = theta.dims()[0];
        if c == 0 || rows.is_empty() || !rows.len().is_multiple_of(c) {
            return None;
        }
        let b = rows.len() / c;
        let indices: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
        let indices = Tensor::<1, Int>::from_ints(TensorData::new(indices, [c * b]), &self.device);
        let [_, features] = self.data.x.dims();
        let [_, columns] = self.data.targets.dims();
        let x = self
            .data
            .x
            .clone()
            .select(0, indices.clone())
            .reshape([c, b, features]);
        let y = self
            .data
            .targets
            .clone()
            .select(0, indices)
            .reshape([c, b, columns]);
        let outputs = self.forward_rows(&theta, x);
        let likelihood =
            self.config
                .likelihood
                .log_likelihood_of_rows(outputs, y, self.log_sigma(&theta));
        Some(self.log_prior(&theta) + likelihood.mul_scalar(n as f64 / b as f64))
    }

    fn host_minibatch_log_posterior(
        &self,
        rows: &[usize],
        positions: &[f64],
        values: &mut [f64],
        gradients: Option<&mut [f64]>,
    ) -> bool {
        self.minibatch_rows().is_some()
            && self.fused.as_ref().is_some_and(|f| {
                f.host_minibatch_log_posterior(self.dtype, rows, positions, values, gradients)
            })
    }
}
