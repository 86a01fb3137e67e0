//! The built-in MLP log likelihood as one Burn operation with a handwritten backward.
//!
//! Burn's backend-extension mechanism (`#[backend_extension]`) registers
//! [`FusedMlpBackend::fused_mlp_log_density`] as a primitive of the Flex and NdArray CPU
//! backends, of the CubeCL backend (wgpu and the other GPU runtimes), and of `Autodiff` over
//! them. Its autodiff implementation computes value and gradient together, keeps the `[C, D]`
//! gradient as the operation's saved state, and on the backward pass scales it by the incoming
//! gradient. To Burn's autodiff this is one node: `theta.grad(&values.sum().backward())` works
//! as for any other operation.
//!
//! Three programs compute the pair ([`FusedProgram`]): the host kernel of `bnn-kernels` (CPU
//! backends only), one CubeCL kernel per call (the `cube_network` module, the default on wgpu
//! where it covers the model) and the same forward/handwritten backward as batched backend tensor
//! operations (`ops_gradient`, every backend; wgpu's fallback).
//!
//! Why: the plain tensor graph of a small BNN spends most of its time in scalar `tanhf`/`expf`
//! and per-operation overhead (see the issue-6 note); the host kernel is 5–10× faster on the CPU.
//! The plain autodiff path stays as the reference both programs are tested against.
// NdArray is deprecated upstream but remains a supported backend here.
#![allow(deprecated)]

use crate::activation::{Activation, LEAKY_RELU_SLOPE};
use crate::likelihood::{Likelihood, ScaleLink, SIGMA_MAX, SIGMA_MIN};
use crate::observations::HostData;
use crate::prior::PriorCoefficients;
use bnn_kernels::Real;
use bnn_kernels::{
    KernelActivation, KernelData, KernelError, KernelHead, KernelLayer, KernelSpec, MlpKernel,
    OutputPoint, Workspace,
};
use bnn_sampler::{IsokineticPath, LogDensityError, MetricAt, RiemannianDensity};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    backend_extension, Autodiff, Backend, Cube, DispatchDevice, Flex, NdArray, TensorMetadata,
};
use burn::tensor::{DType, Device, Shape, Slice, Tensor, TensorData};
use rayon::prelude::*;
use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::LocalKey;

pub use crate::fused::cube_network::{DeviceLayout, GradientTile, InputColumns};
use crate::fused::ops_gradient::{self, DeviceTensors};
pub use crate::fused::terms::Terms;

/// Which program computes the fused value and gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FusedProgram {
    /// The `bnn-kernels` host kernel (Flex and NdArray devices only).
    HostKernel,
    /// Batched tensor operations of the device's backend with a handwritten backward (any device).
    TensorOps,
    /// One CubeCL kernel per call for the whole density and gradient, one cube per chain
    /// (the `cube_network` module; wgpu and the other CubeCL runtimes). A model it does not cover
    /// (the learned-σ head; a net whose θ and row tables exceed the device's shared memory) runs
    /// the tensor program instead.
    DeviceKernel,
}

/// The model and training data the fused operation evaluates, shared by every call.
///
/// Holds host copies of the data in f32 and f64 so that each call reads θ only.
#[derive(Clone, Debug)]
pub struct FusedMlp {
    inner: Arc<FusedMlpInner>,
    program: FusedProgram,
    /// Cap on the bytes of the largest intermediate tensor of one tensor-program run; `None`:
    /// the device's largest buffer (see [`FusedMlp::with_max_tensor_bytes`]).
    max_tensor_bytes: Option<u64>,
    /// The device kernel's layout (see [`FusedMlp::with_gradient_tile`] and
    /// [`FusedMlp::with_input_columns`]).
    device_layout: DeviceLayout,
}

#[derive(Debug)]
struct FusedMlpInner {
    kernel: MlpKernel,
    rows: usize,
    x32: Vec<f32>,
    y32: Vec<f32>,
    x64: Vec<f64>,
    y64: Vec<f64>,
    prior: PriorCoefficients,
    /// Whether any coordinate has a Laplace (|θ|) term.
    prior_has_laplace: bool,
    /// Data and prior uploaded for [`FusedProgram::TensorOps`], one entry per (backend, device,
    /// float type) seen; uploaded on first use so that each call moves only θ.
    device_tensors: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
}

/// One layer's slices of θ, as `MlpPosterior` found them in the layout.
#[derive(Debug, Clone, Copy)]
pub struct LayerOffsets {
    pub d_in: usize,
    pub d_out: usize,
    pub weight_offset: usize,
    pub bias_offset: usize,
}

impl FusedMlp {
    /// Builds the operation for a validated model and its (validated) training data; it runs
    /// the host kernel on CPU devices and the tensor program elsewhere until
    /// [`FusedMlp::with_program`] says otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        layers: &[LayerOffsets],
        activation: Activation,
        likelihood: &Likelihood,
        log_sigma_offset: Option<usize>,
        dim: usize,
        data: &HostData,
        prior: PriorCoefficients,
    ) -> Result<Self, KernelError> {
        if prior.quadratic.len() != dim || prior.absolute.len() != dim {
            return Err(KernelError(format!(
                "prior coefficients for {} coordinates, θ has {dim}",
                prior.quadratic.len()
            )));
        }
        let (targets, target_columns) = data.target_matrix(likelihood);
        let head = match *likelihood {
            Likelihood::GaussianHeteroscedastic { link } => KernelHead::Heteroscedastic {
                softplus: link == ScaleLink::Softplus,
                sigma_min: SIGMA_MIN,
                sigma_max: SIGMA_MAX,
            },
            Likelihood::GaussianFixed { sigma } => KernelHead::Fixed { sigma },
            Likelihood::GaussianLearnedSigma { prior } => KernelHead::LearnedSigma {
                log_sigma_offset: log_sigma_offset
                    .ok_or_else(|| KernelError("the learned-σ head needs log σ in θ".into()))?,
                prior_mean: prior.mean,
                prior_sd: prior.sd,
            },
            Likelihood::Categorical { .. } => KernelHead::Categorical,
        };
        let activation = match activation {
            Activation::Tanh => KernelActivation::Tanh,
            Activation::Relu => KernelActivation::Relu,
            Activation::LeakyRelu => KernelActivation::LeakyRelu {
                slope: LEAKY_RELU_SLOPE,
            },
            Activation::Sigmoid => KernelActivation::Sigmoid,
            Activation::Silu => KernelActivation::Silu,
            Activation::Gelu => KernelActivation::Gelu,
            Activation::Softplus => KernelActivation::Softplus,
            Activation::TruncRelu => KernelActivation::TruncRelu,
            Activation::Identity => KernelActivation::Identity,
        };
        let layers = layers
            .iter()
            .map(|l| KernelLayer {
                d_in: l.d_in,
                d_out: l.d_out,
                weight_offset: l.weight_offset,
                bias_offset: l.bias_offset,
            })
            .collect();
        let spec = KernelSpec {
            layers,
            activation,
            head,
            target_columns,
            dim,
        };
        if !ops_gradient::pieces_tile_theta(&spec) {
            return Err(KernelError(
                "the layers' weights and biases (and log σ) do not tile θ".into(),
            ));
        }
        let kernel = MlpKernel::new(spec)?;
        let rows = data.rows;
        if targets.len() != rows * target_columns {
            return Err(KernelError(format!(
                "{} target values for {rows} rows × {target_columns} columns",
                targets.len()
            )));
        }
        let inner = FusedMlpInner {
            kernel,
            rows,
            x32: data.x.iter().map(|&v| v as f32).collect(),
            y32: targets.iter().map(|&v| v as f32).collect(),
            x64: data.x.clone(),
            y64: targets,
            prior_has_laplace: prior.absolute.iter().any(|&b| b != 0.0),
            prior,
            device_tensors: Mutex::new(Vec::new()),
        };
        Ok(Self {
            inner: Arc::new(inner),
            program: FusedProgram::HostKernel,
            max_tensor_bytes: None,
            device_layout: DeviceLayout::from_env(),
        })
    }

    /// Chooses the program; [`FusedProgram::HostKernel`] on a device without it is an error, as
    /// is [`FusedProgram::DeviceKernel`] off the CubeCL devices. Where the device kernel does not
    /// cover the model (the learned-σ head; θ and a block of rows beyond 16 KiB of shared memory
    /// even at 16 rows per block) the operation runs the tensor program instead.
    pub fn with_program(
        mut self,
        program: FusedProgram,
        device: &Device,
    ) -> Result<Self, KernelError> {
        if program == FusedProgram::HostKernel && !Self::host_kernel_runs_on(device) {
            return Err(KernelError(format!(
                "the host kernel runs on the flex and ndarray devices, not on {device:?}"
            )));
        }
        let cube = matches!(
            device.clone().without_autodiff().as_dispatch(),
            DispatchDevice::Cube(_)
        );
        if program == FusedProgram::DeviceKernel && !cube {
            return Err(KernelError(format!(
                "the device kernel runs on the CubeCL devices (wgpu), not on {device:?}"
            )));
        }
        let covered = crate::fused::cube_network::covers(self.inner.kernel.spec());
        self.program = if program == FusedProgram::DeviceKernel && !covered {
            FusedProgram::TensorOps
        } else {
            program
        };
        Ok(self)
    }

    /// The Bayesian Gauss–Newton metric at `theta` on the training rows
    /// ([`bnn_kernels::gauss_newton_metric`], dense `[D, D]` row major, f64 on the host): the
    /// likelihood's Fisher information through the network's Jacobian plus the prior's precision
    /// (a Normal prior's 1/sd²; a Laplace prior is flat in curvature away from 0 and adds none;
    /// a learned log σ its Normal prior's 1/sd²). What manifold stochastic dynamics moves by.
    ///
    /// # Panics
    /// If `theta` is not of length D.
    pub fn gauss_newton_metric(&self, theta: &[f64]) -> Vec<f64> {
        bnn_kernels::gauss_newton_metric(
            self.inner.kernel.spec(),
            &self.inner.x64,
            theta,
            &self.metric_prior_precision(),
        )
    }

    /// The prior's part of the metric: Normal precisions, a Laplace factor's Fisher information
    /// 1/scale² ([`bnn_kernels::DiagonalPrior::metric_diagonal`]), a learned log σ's 1/sd².
    fn metric_prior_precision(&self) -> Vec<f64> {
        let prior = &self.inner.prior;
        let mut precision = bnn_kernels::DiagonalPrior {
            quadratic: &prior.quadratic,
            absolute: &prior.absolute,
            constant: prior.constant,
        }
        .metric_diagonal();
        let spec = self.inner.kernel.spec();
        if let KernelHead::LearnedSigma {
            log_sigma_offset,
            prior_sd,
            ..
        } = spec.head
        {
            for p in &mut precision[log_sigma_offset..log_sigma_offset + spec.target_columns] {
                *p += 1.0 / (prior_sd * prior_sd);
            }
        }
        precision
    }

    /// The posterior as a [`RiemannianDensity`] for manifold stochastic dynamics: the f64
    /// potential (every head, Normal and Laplace priors) and the Bayesian Gauss–Newton metric
    /// with its derivatives on the training rows.
    pub fn riemannian_density(&self) -> Result<GaussNewtonDensity, KernelError> {
        let prior = &self.inner.prior;
        Ok(GaussNewtonDensity {
            spec: self.inner.kernel.spec().clone(),
            x: self.inner.x64.clone(),
            y: self.inner.y64.clone(),
            quadratic: prior.quadratic.clone(),
            absolute: prior.absolute.clone(),
            constant: prior.constant,
            metric_precision: self.metric_prior_precision(),
        })
    }

    /// Caps the bytes of the largest intermediate tensor (`[chains, rows, width]` activations)
    /// of one run of the tensor program: a call with more chains runs in consecutive blocks of
    /// chains. Without a cap the device's largest buffer is the limit (on wgpu, e.g., Mesa's
    /// lavapipe allows 128 MiB: concrete at 4096 chains needs 216 MB). Lower it to bound the
    /// device memory of one call; results do not depend on it. No effect on the host kernel.
    pub fn with_max_tensor_bytes(mut self, bytes: u64) -> Self {
        self.max_tensor_bytes = Some(bytes);
        self
    }

    /// How the device kernel's gradient phase gives parameters to threads (default: one each,
    /// or `BNN_DEVICE_GRADIENT_TILE`). Same sums in the same order either way; only the speed on
    /// a GPU differs. No effect off the device kernel.
    pub fn with_gradient_tile(mut self, tile: GradientTile) -> Self {
        self.device_layout.gradient_tile = tile;
        self
    }

    /// Where the device kernel reads the inputs (default: copied into shared memory, or
    /// `BNN_DEVICE_INPUT_COLUMNS`). Same products and sums either way; only the shared memory
    /// per cube and the speed on a GPU differ. No effect off the device kernel.
    pub fn with_input_columns(mut self, columns: InputColumns) -> Self {
        self.device_layout.input_columns = columns;
        self
    }

    /// The program the operation runs.
    pub fn program(&self) -> FusedProgram {
        self.program
    }

    /// Whether `device` (with or without autodiff) runs the fused operation at all.
    pub fn supports(device: &Device) -> bool {
        matches!(
            device.clone().without_autodiff().as_dispatch(),
            DispatchDevice::Flex(_) | DispatchDevice::NdArray(_) | DispatchDevice::Cube(_)
        )
    }

    /// Whether `device` runs the host kernel (the CPU backends).
    pub fn host_kernel_runs_on(device: &Device) -> bool {
        matches!(
            device.clone().without_autodiff().as_dispatch(),
            DispatchDevice::Flex(_) | DispatchDevice::NdArray(_)
        )
    }

    /// The program a device uses by default: the host kernel where it runs, the device kernel
    /// on the CubeCL devices, else tensor ops.
    pub fn default_program(device: &Device) -> FusedProgram {
        if Self::host_kernel_runs_on(device) {
            FusedProgram::HostKernel
        } else if matches!(
            device.clone().without_autodiff().as_dispatch(),
            DispatchDevice::Cube(_)
        ) {
            FusedProgram::DeviceKernel
        } else {
            FusedProgram::TensorOps
        }
    }

    /// On a CubeCL device: the device kernel when chosen and it covers the model and device,
    /// else the tensor program.
    fn evaluate_cube(
        &self,
        theta: FloatTensor<Cube>,
        terms: Terms,
        with_gradient: bool,
    ) -> (FloatTensor<Cube>, Option<FloatTensor<Cube>>) {
        if self.program == FusedProgram::DeviceKernel {
            let data = self.device_tensors::<Cube>(&theta.device(), theta.dtype());
            let spec = self.inner.kernel.spec();
            if let Some(result) = crate::fused::cube_network::evaluate(
                spec,
                &data,
                self.inner.prior.constant,
                theta.clone(),
                terms,
                with_gradient,
                self.device_layout,
            ) {
                return result;
            }
        }
        self.evaluate_tensor_ops::<Cube>(theta, terms, with_gradient)
    }

    /// The device copies of data and prior for backend `B`, uploaded on first use.
    fn device_tensors<B: Backend>(
        &self,
        device: &B::Device,
        dtype: DType,
    ) -> Arc<DeviceTensors<B>> {
        let mut cache = self
            .inner
            .device_tensors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for entry in cache.iter() {
            if let Ok(found) = Arc::clone(entry).downcast::<DeviceTensors<B>>() {
                if &found.device == device && found.dtype == dtype {
                    return found;
                }
            }
        }
        let m = &self.inner;
        let uploaded = Arc::new(DeviceTensors::<B>::upload(
            &m.x64,
            &m.y64,
            m.rows,
            m.kernel.spec(),
            &m.prior,
            device,
            dtype,
        ));
        cache.push(uploaded.clone());
        uploaded
    }

    /// Value `[C]` and, when asked, gradient `[C, D]` through [`FusedProgram::TensorOps`], in
    /// blocks of chains small enough for the device's buffers.
    fn evaluate_tensor_ops<B: ops_gradient::FusedStages>(
        &self,
        theta: FloatTensor<B>,
        terms: Terms,
        with_gradient: bool,
    ) -> (FloatTensor<B>, Option<FloatTensor<B>>) {
        let data = self.device_tensors::<B>(&theta.device(), theta.dtype());
        let spec = self.inner.kernel.spec();
        let [c, d] = [theta.shape()[0], theta.shape()[1]];
        let per_chain =
            ops_gradient::largest_tensor_bytes_per_chain(spec, self.inner.rows, theta.dtype());
        let limit = self
            .max_tensor_bytes
            .or_else(|| B::max_tensor_bytes(&theta));
        let block = ops_gradient::chains_per_block(c, per_chain, limit);
        let run = |theta| {
            ops_gradient::evaluate::<B>(
                spec,
                &data,
                self.inner.prior.constant,
                theta,
                terms,
                with_gradient,
            )
        };
        if block >= c {
            return run(theta);
        }
        let mut values = Vec::with_capacity(c.div_ceil(block));
        let mut gradients = Vec::with_capacity(c.div_ceil(block));
        for start in (0..c).step_by(block) {
            let rows = Slice::from(start..(start + block).min(c));
            let (value, gradient) = run(B::float_slice(theta.clone(), &[rows, Slice::from(0..d)]));
            values.push(value);
            gradients.extend(gradient);
        }
        let gradient = with_gradient.then(|| B::float_cat(gradients, 0));
        (B::float_cat(values, 0), gradient)
    }

    /// Log likelihood `[C]` of each row of θ `[C, D]`, differentiable with respect to θ.
    pub fn log_likelihood(&self, theta: Tensor<2>) -> Tensor<1> {
        self.call(theta, Terms::Likelihood)
    }

    /// Log posterior (likelihood + prior) `[C]`: one autodiff node for the whole density.
    pub fn log_posterior(&self, theta: Tensor<2>) -> Tensor<1> {
        self.call(theta, Terms::Posterior)
    }

    fn call(&self, theta: Tensor<2>, terms: Terms) -> Tensor<1> {
        let out = <burn::backend::Dispatch as FusedMlpBackend>::fused_mlp_log_density(
            theta.into_dispatch(),
            FusedCall {
                model: self.clone(),
                terms,
            },
        );
        Tensor::<1>::from_dispatch(out)
    }

    /// Adds the log prior `constant − ½ Σ a θ² − Σ b |θ|` and its gradient, chain by chain.
    /// Without Laplace terms (every b = 0, the usual Gaussian priors) the |θ| sums are skipped:
    /// adding those zeros changes no bit, and their sign branches cost a microsecond per chain
    /// of a 150-parameter net (mispredicted on random signs).
    fn add_prior<R: Real>(&self, thetas: &[R], values: &mut [f64], gradients: Option<&mut [R]>) {
        let prior = &self.inner.prior;
        let diagonal = bnn_kernels::DiagonalPrior {
            quadratic: &prior.quadratic,
            absolute: &prior.absolute,
            constant: prior.constant,
        };
        diagonal.add_log_density(self.inner.prior_has_laplace, thetas, values, gradients);
    }

    fn dim(&self) -> usize {
        self.inner.kernel.spec().dim
    }

    /// Runs the kernel on host values in θ's float type; `gradients` as in [`MlpKernel::evaluate`].
    fn evaluate_host(
        &self,
        theta: &TensorData,
        terms: Terms,
        with_gradient: bool,
    ) -> (Vec<f64>, Option<TensorData>) {
        let d = self.dim();
        let c = theta.shape()[0];
        let m = &self.inner;
        let mut values = vec![0.0f64; c];
        let gradient = match theta.dtype() {
            DType::F64 => {
                let thetas = theta.as_slice::<f64>().expect("checked dtype");
                let mut grads = with_gradient.then(|| vec![0.0f64; c * d]);
                let data = KernelData {
                    x: &m.x64,
                    y: &m.y64,
                    rows: m.rows,
                };
                self.evaluate_chains(
                    data,
                    thetas,
                    &mut values,
                    grads.as_deref_mut(),
                    terms,
                    &WORKSPACE_F64,
                );
                grads.map(|g| TensorData::new(g, [c, d]))
            }
            _ => {
                let converted;
                let thetas = match theta.as_slice::<f32>() {
                    Ok(s) => s,
                    Err(_) => {
                        converted = theta.clone().convert::<f32>();
                        converted.as_slice::<f32>().expect("converted to f32")
                    }
                };
                let mut grads = with_gradient.then(|| vec![0.0f32; c * d]);
                let data = KernelData {
                    x: &m.x32,
                    y: &m.y32,
                    rows: m.rows,
                };
                self.evaluate_chains(
                    data,
                    thetas,
                    &mut values,
                    grads.as_deref_mut(),
                    terms,
                    &WORKSPACE_F32,
                );
                grads.map(|g| TensorData::new(g, [c, d]).convert_dtype(theta.dtype()))
            }
        };
        (values, gradient)
    }
}

impl FusedMlp {
    /// Log posterior and its gradient for a row-major `[C, D]` batch of f64 positions, straight
    /// from host memory: no tensors, no autodiff graph. Returns `false` (and writes nothing)
    /// unless this operation runs the host kernel. The numbers are those of the autodiff path in float type `dtype` to the
    /// last bit (positions rounded to f32 and values read back through f32 when `dtype` is f32;
    /// tested in `tests/fused_gradient.rs`): at one chain per call the tensor round trip costs
    /// more than the whole kernel of a small network.
    pub fn host_log_posterior_and_gradient(
        &self,
        dtype: DType,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> bool {
        self.host_evaluate(dtype, positions, values, Some(gradients))
    }

    /// The log posterior alone of a host `[C, D]` batch (forward pass only: no backward, no
    /// gradient buffers), with the values [`Self::host_log_posterior_and_gradient`] gives, bit
    /// for bit; `false` where the operation has no host kernel.
    pub fn host_log_posterior(&self, dtype: DType, positions: &[f64], values: &mut [f64]) -> bool {
        self.host_evaluate(dtype, positions, values, None)
    }

    /// Log posterior `[C]` and gradient `[C, D]` of `theta()` (a `[C, D]` batch already in the
    /// evaluation's float type, built only where this path runs) on a CubeCL device: the same
    /// device operation as the autodiff path, without the graph, and both results read back in
    /// one transfer. `None` off the CubeCL devices. The bits are the autodiff path's: its
    /// backward only multiplies this gradient by the seed's ones.
    ///
    /// Why: on an H200 a call cost ~400 µs whatever its size (issue 48), for two read-back
    /// round trips, the graph, and the backward's one multiply kernel.
    pub fn device_log_posterior_and_gradient(
        &self,
        device: &Device,
        theta: impl FnOnce() -> TensorData,
    ) -> Option<Result<(TensorData, TensorData), LogDensityError>> {
        // One look at the device per call: the host kernel, or a device that is not CubeCL's,
        // has no device path.
        let cube_device = self.cube_device(device)?;
        let theta = upload::<Cube>(theta(), &cube_device);
        let (values, gradient) = self.evaluate_cube(theta, Terms::Posterior, true);
        let gradient = gradient.expect("asked for the gradient");
        Some(crate::fused::cube_paths::read_all(vec![values, gradient]).map(|[v, g]| (v, g)))
    }

    /// Runs many chains' isokinetic paths (fresh; path `i` with the step size and `√Σ` of
    /// `parameters[i]`; see `bnn_sampler::PathIntegrator`) on a CubeCL device in `dtype`, every
    /// stage's gradient from the fused operation on the device, with one upload and one
    /// read-back for the whole path. `None` off the CubeCL devices (the host kernel) and for
    /// float types without a kernel.
    pub fn device_isokinetic_paths(
        &self,
        device: &Device,
        dtype: DType,
        paths: &mut [IsokineticPath],
        parameters: &[(f64, &[f64])],
    ) -> Option<Result<(), LogDensityError>> {
        let cube_device = self.cube_device(device)?;
        crate::fused::cube_paths::integrate(&cube_device, dtype, paths, parameters, |theta| {
            let (values, gradient) = self.evaluate_cube(theta, Terms::Posterior, true);
            (values, gradient.expect("asked for the gradient"))
        })
    }

    /// Whether [`FusedMlp::device_isokinetic_paths`] runs on `device`.
    pub fn runs_paths_on(&self, device: &Device) -> bool {
        self.cube_device(device).is_some()
    }

    /// `device` as a CubeCL device when the fused operation runs there without the host kernel.
    fn cube_device(&self, device: &Device) -> Option<burn_cubecl::CubeDevice> {
        if self.program == FusedProgram::HostKernel {
            return None;
        }
        match device.clone().without_autodiff().as_dispatch() {
            DispatchDevice::Cube(cube_device) => Some(cube_device.clone()),
            _ => None,
        }
    }

    /// Both of the above: the host kernel in `dtype`, gradients when asked for.
    fn host_evaluate(
        &self,
        dtype: DType,
        positions: &[f64],
        values: &mut [f64],
        gradients: Option<&mut [f64]>,
    ) -> bool {
        if self.program != FusedProgram::HostKernel {
            return false;
        }
        let m = &self.inner;
        match dtype {
            DType::F64 => {
                let data = KernelData {
                    x: &m.x64,
                    y: &m.y64,
                    rows: m.rows,
                };
                self.evaluate_chains(
                    data,
                    positions,
                    values,
                    gradients,
                    Terms::Posterior,
                    &WORKSPACE_F64,
                );
            }
            DType::F32 => HOST_BUFFERS_F32.with_borrow_mut(|(thetas, grads)| {
                thetas.clear();
                thetas.extend(positions.iter().map(|&v| v as f32));
                let data = KernelData {
                    x: &m.x32,
                    y: &m.y32,
                    rows: m.rows,
                };
                match gradients {
                    Some(gradients) => {
                        grads.clear();
                        grads.resize(positions.len(), 0.0);
                        self.evaluate_chains(
                            data,
                            thetas,
                            values,
                            Some(grads),
                            Terms::Posterior,
                            &WORKSPACE_F32,
                        );
                        for (g, &h) in gradients.iter_mut().zip(grads.iter()) {
                            *g = h as f64;
                        }
                    }
                    None => self.evaluate_chains(
                        data,
                        thetas,
                        values,
                        None,
                        Terms::Posterior,
                        &WORKSPACE_F32,
                    ),
                }
                // The autodiff path stores the values in an f32 tensor before the sampler reads them.
                for v in values.iter_mut() {
                    *v = *v as f32 as f64;
                }
            }),
            _ => return false,
        }
        true
    }

    /// The minibatch estimate `log prior + (N / B) Σ_{n ∈ rows_c} log p(yₙ | θ_c)` of a host
    /// `[C, D]` batch, chain `c` on `rows[c·B..(c+1)·B]`, with gradients where asked for: each
    /// chain's rows gathered into a per-thread buffer, then the host kernel on them. `false`
    /// (nothing written) unless this operation runs the host kernel.
    pub fn host_minibatch_log_posterior(
        &self,
        dtype: DType,
        rows: &[usize],
        positions: &[f64],
        values: &mut [f64],
        gradients: Option<&mut [f64]>,
    ) -> bool {
        if self.program != FusedProgram::HostKernel {
            return false;
        }
        let (d, c) = (self.dim(), values.len());
        let b = rows.len() / c.max(1);
        let m = &self.inner;
        let scale = m.rows as f64 / b as f64;
        match dtype {
            DType::F64 => MINIBATCH_F64.with_borrow_mut(|gathered| {
                let mut gradients = gradients;
                for (chain, value) in values.iter_mut().enumerate() {
                    let theta = &positions[chain * d..(chain + 1) * d];
                    let gradient = gradients
                        .as_deref_mut()
                        .map(|g| &mut g[chain * d..(chain + 1) * d]);
                    self.minibatch_chain(
                        (&m.x64, &m.y64),
                        &rows[chain * b..(chain + 1) * b],
                        theta,
                        value,
                        gradient,
                        scale,
                        gathered,
                        &WORKSPACE_F64,
                    );
                }
            }),
            DType::F32 => MINIBATCH_F32.with_borrow_mut(|gathered| {
                let mut theta = vec![0.0f32; d];
                let mut gradient = vec![0.0f32; d];
                let mut gradients = gradients;
                for (chain, value) in values.iter_mut().enumerate() {
                    for (t, &p) in theta.iter_mut().zip(&positions[chain * d..(chain + 1) * d]) {
                        *t = p as f32;
                    }
                    let with_gradient = gradients.is_some();
                    self.minibatch_chain(
                        (&m.x32, &m.y32),
                        &rows[chain * b..(chain + 1) * b],
                        &theta,
                        value,
                        with_gradient.then_some(&mut gradient[..]),
                        scale,
                        gathered,
                        &WORKSPACE_F32,
                    );
                    if let Some(g) = gradients.as_deref_mut() {
                        for (out, &h) in g[chain * d..(chain + 1) * d].iter_mut().zip(&gradient) {
                            *out = h as f64;
                        }
                    }
                    *value = *value as f32 as f64;
                }
            }),
            _ => return false,
        }
        true
    }

    /// One chain of [`Self::host_minibatch_log_posterior`].
    #[allow(clippy::too_many_arguments)]
    fn minibatch_chain<R: Real>(
        &self,
        (x, y): (&[R], &[R]),
        rows: &[usize],
        theta: &[R],
        value: &mut f64,
        mut gradient: Option<&mut [R]>,
        scale: f64,
        gathered: &mut (Vec<R>, Vec<R>),
        workspace: &'static LocalKey<RefCell<Workspace<R>>>,
    ) {
        let n = self.inner.rows;
        let (features, columns) = (x.len() / n, y.len() / n);
        let (xs, ys) = gathered;
        xs.clear();
        ys.clear();
        for &r in rows {
            xs.extend_from_slice(&x[r * features..(r + 1) * features]);
            ys.extend_from_slice(&y[r * columns..(r + 1) * columns]);
        }
        let data = KernelData {
            x: xs,
            y: ys,
            rows: rows.len(),
        };
        let values = std::slice::from_mut(value);
        workspace
            .with_borrow_mut(|ws| {
                self.inner
                    .kernel
                    .evaluate(data, theta, values, gradient.as_deref_mut(), ws)
            })
            .expect("shapes were validated when the operation was built");
        values[0] *= scale;
        if let Some(g) = gradient.as_deref_mut() {
            for v in g.iter_mut() {
                *v = R::from_f64(v.to_f64() * scale);
            }
        }
        self.add_prior(theta, values, gradient);
    }

    /// The host kernel (and prior) over the chains of one call. Chains are independent, so a
    /// call with enough work is split into contiguous blocks of chains over Rayon's pool (the
    /// batched samplers make one call for all chains); every chain is computed by the same code
    /// whatever the split, so results do not depend on the thread count.
    #[allow(clippy::too_many_arguments)]
    fn evaluate_chains<R: Real>(
        &self,
        data: KernelData<'_, R>,
        thetas: &[R],
        values: &mut [f64],
        gradients: Option<&mut [R]>,
        terms: Terms,
        workspace: &'static LocalKey<RefCell<Workspace<R>>>,
    ) {
        let (c, d) = (values.len(), self.dim());
        let run = |values: &mut [f64], thetas: &[R], mut gradients: Option<&mut [R]>| {
            workspace
                .with_borrow_mut(|ws| {
                    self.inner
                        .kernel
                        .evaluate(data, thetas, values, gradients.as_deref_mut(), ws)
                })
                .expect("shapes were validated when the operation was built");
            if terms == Terms::Posterior {
                self.add_prior(thetas, values, gradients);
            }
        };
        let threads = rayon::current_num_threads();
        // Rough cost of one chain in multiply-adds. Below ~400k per call (~100 µs) waking a
        // sleeping Rayon worker costs about what the split saves (measured on 2 cores).
        let work_per_chain = data.rows
            * self
                .inner
                .kernel
                .spec()
                .layers
                .iter()
                .map(|l| l.d_in * l.d_out)
                .sum::<usize>();
        if threads < 2 || c < 2 || c * work_per_chain < PARALLEL_WORK_THRESHOLD {
            return run(values, thetas, gradients);
        }
        let per_block = c.div_ceil(threads.min(c));
        let blocks = values
            .par_chunks_mut(per_block)
            .zip(thetas.par_chunks(per_block * d));
        match gradients {
            Some(g) => blocks
                .zip(g.par_chunks_mut(per_block * d))
                .for_each(|((v, t), g)| run(v, t, Some(g))),
            None => blocks.for_each(|(v, t)| run(v, t, None)),
        }
    }
}

/// Caps the threads the host kernel splits a batched call over (Rayon's global pool). Takes
/// effect only before the first batched call of the process: Rayon fixes its pool then, and a
/// later call is ignored (the numbers do not depend on the thread count either way).
pub fn set_kernel_threads(threads: usize) {
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build_global();
}

/// Multiply-adds per call from which the host kernel splits chains over threads.
const PARALLEL_WORK_THRESHOLD: usize = 400_000;

thread_local! {
    /// One kernel workspace per thread: sampler threads never share buffers, and nothing is
    /// allocated per call after the first.
    static WORKSPACE_F32: RefCell<Workspace<f32>> = RefCell::new(Workspace::default());
    static WORKSPACE_F64: RefCell<Workspace<f64>> = RefCell::new(Workspace::default());
    /// Each chain's minibatch rows (inputs, targets) for [`FusedMlp::host_minibatch_log_posterior`].
    static MINIBATCH_F32: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    static MINIBATCH_F64: RefCell<(Vec<f64>, Vec<f64>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    /// f32 copies of positions and gradients for [`FusedMlp::host_log_posterior_and_gradient`].
    static HOST_BUFFERS_F32: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The argument of the fused operation besides θ.
#[derive(Debug, Clone)]
pub struct FusedCall {
    pub model: FusedMlp,
    pub terms: Terms,
}

/// The fused MLP log density as a Burn backend operation.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
pub trait FusedMlpBackend: Backend {
    /// θ `[C, D]` → log likelihood or log posterior `[C]`.
    fn fused_mlp_log_density(theta: FloatTensor<Self>, call: FusedCall) -> FloatTensor<Self>;
}

/// Value and gradient in one pass, for the autodiff implementation.
pub trait FusedMlpGradient: Backend {
    /// θ `[C, D]` → (log density `[C]`, gradient `[C, D]`).
    fn fused_mlp_value_and_gradient(
        theta: FloatTensor<Self>,
        call: &FusedCall,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

/// Host data as a tensor of backend `B` on `device`.
fn upload<B: Backend>(data: TensorData, device: &B::Device) -> FloatTensor<B> {
    B::float_from_data(data, device)
}

/// Reads a host backend's tensor (the future of a CPU backend is ready at once).
fn read_host<B: Backend>(tensor: FloatTensor<B>) -> TensorData {
    let future = B::float_into_data(tensor);
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(result) =
            std::future::Future::poll(future.as_mut(), &mut context)
        {
            return result.expect("reading a CPU tensor cannot fail");
        }
        std::thread::yield_now();
    }
}

/// The operation on a CPU backend: the host kernel, or the tensor program when chosen.
fn cpu_value<B: ops_gradient::FusedStages>(
    theta: FloatTensor<B>,
    call: &FusedCall,
) -> FloatTensor<B> {
    if call.model.program == FusedProgram::TensorOps {
        return call
            .model
            .evaluate_tensor_ops::<B>(theta, call.terms, false)
            .0;
    }
    let device = theta.device();
    let dtype = theta.dtype();
    let (values, _) = call
        .model
        .evaluate_host(&read_host::<B>(theta), call.terms, false);
    let c = values.len();
    B::float_from_data(TensorData::new(values, [c]).convert_dtype(dtype), &device)
}

fn cpu_value_and_gradient<B: ops_gradient::FusedStages>(
    theta: FloatTensor<B>,
    call: &FusedCall,
) -> (FloatTensor<B>, FloatTensor<B>) {
    if call.model.program == FusedProgram::TensorOps {
        let (value, gradient) = call.model.evaluate_tensor_ops::<B>(theta, call.terms, true);
        return (value, gradient.expect("asked for the gradient"));
    }
    let device = theta.device();
    let dtype = theta.dtype();
    let (values, gradient) = call
        .model
        .evaluate_host(&read_host::<B>(theta), call.terms, true);
    let c = values.len();
    let values = B::float_from_data(TensorData::new(values, [c]).convert_dtype(dtype), &device);
    let gradient = B::float_from_data(gradient.expect("asked for the gradient"), &device);
    (values, gradient)
}

macro_rules! cpu_backend {
    ($backend:ty) => {
        impl FusedMlpBackend for $backend {
            fn fused_mlp_log_density(
                theta: FloatTensor<Self>,
                call: FusedCall,
            ) -> FloatTensor<Self> {
                cpu_value::<Self>(theta, &call)
            }
        }
        impl FusedMlpGradient for $backend {
            fn fused_mlp_value_and_gradient(
                theta: FloatTensor<Self>,
                call: &FusedCall,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                cpu_value_and_gradient::<Self>(theta, call)
            }
        }
    };
}

cpu_backend!(Flex);
cpu_backend!(NdArray);

impl ops_gradient::FusedStages for Flex {}
impl ops_gradient::FusedStages for NdArray {}

/// The CubeCL runtimes (wgpu, CUDA, ...) have no host kernel: the device kernel or the tensor
/// program.
impl FusedMlpBackend for Cube {
    fn fused_mlp_log_density(theta: FloatTensor<Self>, call: FusedCall) -> FloatTensor<Self> {
        call.model.evaluate_cube(theta, call.terms, false).0
    }
}

impl FusedMlpGradient for Cube {
    fn fused_mlp_value_and_gradient(
        theta: FloatTensor<Self>,
        call: &FusedCall,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (value, gradient) = call.model.evaluate_cube(theta, call.terms, true);
        (value, gradient.expect("asked for the gradient"))
    }
}

/// Backward of the fused operation: ∂L/∂θ = (∂L/∂value) ⊙ ∇ log p, row by row.
#[derive(Debug)]
struct FusedMlpBackward;

impl<B: Backend> Backward<B, 1> for FusedMlpBackward {
    /// The `[C, D]` gradient computed together with the value.
    type State = FloatTensor<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let gradient = ops.state;
        unary::<B, _>(ops.parents, ops.node, grads, |upstream| {
            let c = upstream.shape()[0];
            B::float_mul(B::float_reshape(upstream, Shape::new([c, 1])), gradient)
        });
    }
}

impl<B: FusedMlpBackend + FusedMlpGradient, C: CheckpointStrategy> FusedMlpBackend
    for Autodiff<B, C>
{
    fn fused_mlp_log_density(theta: FloatTensor<Self>, call: FusedCall) -> FloatTensor<Self> {
        let (primitive, node) = theta.into_parts();
        match FusedMlpBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (values, gradient) = B::fused_mlp_value_and_gradient(primitive, &call);
                prep.finish(gradient, values)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_mlp_log_density(primitive, call)),
        }
    }
}

/// The built-in MLP's posterior with its Gauss–Newton metric ([`FusedMlp::riemannian_density`]).
#[derive(Clone, Debug)]
pub struct GaussNewtonDensity {
    spec: KernelSpec,
    x: Vec<f64>,
    y: Vec<f64>,
    quadratic: Vec<f64>,
    absolute: Vec<f64>,
    constant: f64,
    metric_precision: Vec<f64>,
}

impl RiemannianDensity for GaussNewtonDensity {
    fn dim(&self) -> usize {
        self.spec.dim
    }

    /// `log p = −U` and `∇ log p = −∇U` of the f64 potential (negation is exact).
    fn evaluate(&self, position: &[f64], gradient: &mut [f64]) -> Result<f64, LogDensityError> {
        let prior = bnn_kernels::DiagonalPrior {
            quadratic: &self.quadratic,
            absolute: &self.absolute,
            constant: self.constant,
        };
        let (potential, g) =
            bnn_kernels::posterior_potential(&self.spec, &self.x, &self.y, position, prior)
                .map_err(|e| {
                    // A non-finite value is this point's (a divergence); a shape mismatch is not.
                    let error = if matches!(e, bnn_kernels::PotentialError::NonFinite { .. }) {
                        LogDensityError::recoverable(e.to_string())
                    } else {
                        LogDensityError::fatal(e.to_string())
                    };
                    error.with_source(e)
                })?;
        gradient.copy_from_slice(&g);
        gradient.iter_mut().for_each(|g| *g = -*g);
        Ok(-potential)
    }

    fn metric_at(&self, position: &[f64]) -> Result<MetricAt, LogDensityError> {
        if position.len() != self.spec.dim {
            return Err(LogDensityError::fatal(format!(
                "θ has {} values, the model {}",
                position.len(),
                self.spec.dim
            )));
        }
        let point = OutputPoint::new(&self.spec, &self.x, position);
        // A metric that is not positive definite here fails this point only: a divergence.
        let metric = point
            .metric(&self.spec, &self.metric_precision)
            .map_err(|e| LogDensityError::recoverable(e.to_string()).with_source(e))?;
        Ok(MetricAt {
            metric,
            cache: Box::new(point),
        })
    }

    fn log_det_gradient(&self, point: &MetricAt) -> Result<Vec<f64>, LogDensityError> {
        Ok(bnn_kernels::log_det_gradient(
            &self.spec,
            &self.x,
            Self::network(point)?,
            &point.metric,
        ))
    }

    fn kinetic_gradient(
        &self,
        point: &MetricAt,
        velocity: &[f64],
    ) -> Result<Vec<f64>, LogDensityError> {
        Ok(bnn_kernels::kinetic_gradient(
            &self.spec,
            &self.x,
            Self::network(point)?,
            velocity,
        ))
    }
}

impl GaussNewtonDensity {
    /// The network at a point this density made.
    fn network(point: &MetricAt) -> Result<&OutputPoint, LogDensityError> {
        point
            .cache
            .downcast_ref::<OutputPoint>()
            .ok_or_else(|| LogDensityError::fatal("a metric point from another density"))
    }
}
