//! Bridges a tensor-valued [`Posterior`] to the sampler's host-side `LogDensity` through Burn's autodiff.

use crate::posterior::Posterior;
use bnn_sampler::{
    IsokineticPath, LogDensity, LogDensityError, MinibatchDensity, PathIntegrator,
    RiemannianDensity,
};
use burn::tensor::{DType, Tensor, TensorData};
use rayon::prelude::*;

/// Evaluates value and gradient of a [`Posterior`] with one forward and one backward pass per
/// batch: positions go to the device as `[C, D]`, values `[C]` and gradients `[C, D]` come back.
///
/// A posterior with a host path of its own ([`Posterior::host_log_posterior_and_gradient`]: the
/// built-in MLP on the CPU backends) or a device path without a graph
/// ([`Posterior::device_log_posterior_and_gradient`]: the built-in MLP on wgpu) is evaluated
/// through it instead, with the same numbers; [`AutodiffLogDensity::through_autodiff`] turns
/// that off (the reference in tests and benches).
pub struct AutodiffLogDensity<P> {
    posterior: P,
    /// Whether the posterior's own paths (host kernel, device without a graph) are taken.
    direct_paths: bool,
    /// The same posterior with its metric, for manifold stochastic dynamics.
    riemannian: Option<Box<dyn RiemannianDensity + Send + Sync>>,
}

impl<P: Posterior> AutodiffLogDensity<P> {
    pub fn new(posterior: P) -> Self {
        Self {
            posterior,
            direct_paths: true,
            riemannian: None,
        }
    }

    /// Attaches the posterior's metric (e.g. [`crate::MlpPosterior::riemannian_density`]), which
    /// MSD reaches through [`LogDensity::riemannian`].
    pub fn with_riemannian(
        mut self,
        riemannian: impl RiemannianDensity + Send + Sync + 'static,
    ) -> Self {
        self.riemannian = Some(Box::new(riemannian));
        self
    }

    /// Always goes through tensors and Burn's autodiff, even where the posterior has a host or
    /// device path of its own.
    pub fn through_autodiff(mut self) -> Self {
        self.direct_paths = false;
        self
    }

    pub fn posterior(&self) -> &P {
        &self.posterior
    }
}

impl<P: Posterior> LogDensity for AutodiffLogDensity<P> {
    fn riemannian(&self) -> Option<&dyn RiemannianDensity> {
        self.riemannian
            .as_deref()
            .map(|r| r as &dyn RiemannianDensity)
    }

    fn minibatch(&self) -> Option<&dyn MinibatchDensity> {
        self.posterior
            .minibatch_rows()
            .map(|_| self as &dyn MinibatchDensity)
    }

    /// The posterior's own device paths (the built-in MLP on wgpu), unless told to go through
    /// autodiff.
    fn path_integrator(&self) -> Option<&dyn PathIntegrator> {
        (self.direct_paths && self.posterior.integrates_paths_on_device())
            .then_some(self as &dyn PathIntegrator)
    }

    fn dim(&self) -> usize {
        self.posterior.layout().dim()
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let d = self.dim();
        let c = log_densities.len();
        if positions.len() != c * d || gradients.len() != c * d {
            return Err(LogDensityError::fatal(format!(
                "batch of {c} positions in dimension {d} needs {} values, got positions {} and gradients {}",
                c * d,
                positions.len(),
                gradients.len()
            )));
        }
        if self.direct_paths {
            if self
                .posterior
                .host_log_posterior_and_gradient(positions, log_densities, gradients)
            {
                return Ok(());
            }
            if let Some(read) = self
                .posterior
                .device_log_posterior_and_gradient(positions, c)
            {
                let (values, gradient) = read?;
                copy_into(&values, log_densities);
                copy_into(&gradient, gradients);
                return Ok(());
            }
        }
        let theta = self.upload(positions, c);
        let values = self.posterior.log_posterior(theta.clone());
        self.read_back(theta, values, log_densities, gradients)
    }

    /// The value alone: through the posterior's forward-only host path where it has one (the
    /// built-in MLP on the CPU backends; the same bits as the gradient path), else through the
    /// gradient path with the gradients dropped.
    fn log_density(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let d = self.dim();
        if positions.len() != log_densities.len() * d {
            return Err(LogDensityError::fatal(format!(
                "batch of {} positions in dimension {d} needs {} values, got {}",
                log_densities.len(),
                log_densities.len() * d,
                positions.len()
            )));
        }
        if self.direct_paths && self.posterior.host_log_posterior(positions, log_densities) {
            return Ok(());
        }
        let mut gradients = vec![0.0; positions.len()];
        self.log_density_and_gradient(positions, log_densities, &mut gradients)
    }
}

impl<P: Posterior> PathIntegrator for AutodiffLogDensity<P> {
    fn integrate(
        &self,
        paths: &mut [IsokineticPath],
        parameters: &[(f64, &[f64])],
    ) -> Result<bool, LogDensityError> {
        match self.posterior.device_isokinetic_paths(paths, parameters) {
            Some(result) => result.map(|()| true),
            None => Ok(false),
        }
    }
}

impl<P: Posterior> AutodiffLogDensity<P> {
    /// A host `[C, D]` batch as a tracked tensor in the posterior's float type.
    fn upload(&self, positions: &[f64], c: usize) -> Tensor<2> {
        let dtype = self.posterior.dtype();
        let data = positions_data(positions, c, self.dim(), dtype);
        Tensor::<2>::from_data(data, (self.posterior.device(), dtype)).require_grad()
    }

    /// Backward from `values` and both read back to the host.
    fn read_back(
        &self,
        theta: Tensor<2>,
        values: Tensor<1>,
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        // Burn seeds backward with ones of the root's shape, so backward from the `[C]` values
        // is the gradient of their sum (one graph node fewer than `sum().backward()`); chains
        // do not share parameters, so row c of the result is ∇ log p(θ_c).
        let grads = values.backward();
        let gradient = theta
            .grad(&grads)
            .ok_or_else(|| LogDensityError::fatal("log posterior does not depend on θ"))?;
        // Read as they are: a reshape of the tracked values would register one more graph node.
        read(values, log_densities)?;
        read(gradient, gradients)
    }
}

fn read<const D: usize>(t: Tensor<D>, out: &mut [f64]) -> Result<(), LogDensityError> {
    let data = t
        .try_into_data()
        .map_err(|e| LogDensityError::fatal("reading from the device failed").with_source(e))?;
    copy_into(&data, out);
    Ok(())
}

/// A host `[C, D]` batch as tensor data in float type `dtype`: straight to it, one host copy
/// instead of two.
pub(crate) fn positions_data(positions: &[f64], c: usize, d: usize, dtype: DType) -> TensorData {
    match dtype {
        DType::F32 => TensorData::new(to_f32(positions), [c, d]),
        _ => TensorData::new(positions.to_vec(), [c, d]).convert_dtype(dtype),
    }
}

/// Data read from a device, as f64 in `out` (in parallel chunks when f32 and large).
fn copy_into(data: &TensorData, out: &mut [f64]) {
    match data.as_slice::<f32>() {
        Ok(values) if values.len() >= PARALLEL_VALUES => out
            .par_chunks_mut(CONVERT_CHUNK)
            .zip(values.par_chunks(CONVERT_CHUNK))
            .for_each(|(o, v)| o.iter_mut().zip(v).for_each(|(o, &v)| *o = v as f64)),
        _ => out
            .iter_mut()
            .zip(data.iter::<f64>())
            .for_each(|(o, v)| *o = v),
    }
}

/// Batches of at least this many values convert between f64 and f32 on rayon's threads: at 1024
/// chains of 451 parameters, one-thread conversions cost a tenth of the GPU's gradient.
const PARALLEL_VALUES: usize = 1 << 15;
const CONVERT_CHUNK: usize = 1 << 13;

fn to_f32(values: &[f64]) -> Vec<f32> {
    if values.len() < PARALLEL_VALUES {
        return values.iter().map(|&v| v as f32).collect();
    }
    let mut out = vec![0.0f32; values.len()];
    out.par_chunks_mut(CONVERT_CHUNK)
        .zip(values.par_chunks(CONVERT_CHUNK))
        .for_each(|(o, v)| o.iter_mut().zip(v).for_each(|(o, &v)| *o = v as f32));
    out
}

/// The posterior's minibatch estimate ([`Posterior::minibatch_log_posterior`]): through its host
/// path where it has one, else Burn's graph on the device.
impl<P: Posterior> MinibatchDensity for AutodiffLogDensity<P> {
    fn num_rows(&self) -> usize {
        self.posterior.minibatch_rows().unwrap_or(0)
    }

    fn minibatch_log_density(
        &self,
        rows: &[usize],
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: Option<&mut [f64]>,
    ) -> Result<(), LogDensityError> {
        let (d, c) = (self.dim(), log_densities.len());
        let n = self.num_rows();
        let shapes_fit = c > 0
            && positions.len() == c * d
            && gradients.as_ref().is_none_or(|g| g.len() == c * d)
            && !rows.is_empty()
            && rows.len().is_multiple_of(c);
        if !shapes_fit {
            return Err(LogDensityError::fatal(format!(
                "a minibatch call of {c} chains in dimension {d} got {} positions and {} rows",
                positions.len(),
                rows.len()
            )));
        }
        if let Some(&row) = rows.iter().find(|&&r| r >= n) {
            return Err(LogDensityError::fatal(format!(
                "minibatch row {row} is beyond the {n} data rows"
            )));
        }
        let mut gradients = gradients;
        if self.direct_paths
            && self.posterior.host_minibatch_log_posterior(
                rows,
                positions,
                log_densities,
                gradients.as_deref_mut(),
            )
        {
            return Ok(());
        }
        let theta = self.upload(positions, c);
        let values = self
            .posterior
            .minibatch_log_posterior(theta.clone(), rows)
            .ok_or_else(|| LogDensityError::fatal("the posterior has no minibatch form"))?;
        match gradients {
            Some(g) => self.read_back(theta, values, log_densities, g),
            None => read(values, log_densities),
        }
    }
}
