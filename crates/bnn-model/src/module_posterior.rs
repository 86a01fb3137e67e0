//! A posterior for any user-defined Burn module plus a likelihood.

use crate::flatten::{layout_of, load_flat_tensor};
use crate::layout::ParameterLayout;
use crate::posterior::Posterior;
use crate::prior::{PriorError, PriorSpec};
use burn::module::Module;
use burn::tensor::{DType, Device, Tensor, TensorData};

/// The data term of a user's model: log p(data | module) as a one-element tensor.
///
/// It must be built from Burn tensor operations on the module's forward pass, so that Burn's
/// autodiff can differentiate it with respect to the module's parameters.
pub trait ModuleLikelihood<M>: Send + Sync {
    fn log_likelihood(&self, module: &M) -> Tensor<1>;
}

impl<M, F> ModuleLikelihood<M> for F
where
    F: Fn(&M) -> Tensor<1> + Send + Sync,
{
    fn log_likelihood(&self, module: &M) -> Tensor<1> {
        self(module)
    }
}

/// Why a [`ModulePosterior`] could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModulePosteriorError {
    #[error("the module has no float parameters to sample")]
    NoFloatParameters,
    #[error(transparent)]
    Prior(#[from] PriorError),
}

/// Posterior over the float parameters of any Burn module: the prior comes from a
/// [`PriorSpec`] over the module's layout, the likelihood from the user.
///
/// Each chain's row of θ is loaded into a copy of the module with [`load_flat_tensor`], so the
/// forward pass is the user's own code; chains are evaluated one after another (the built-in
/// [`crate::MlpPosterior`] batches them instead).
pub struct ModulePosterior<M: Module, L> {
    template: M,
    likelihood: L,
    layout: ParameterLayout,
    device: Device,
    prior_quadratic: Tensor<2>,
    prior_absolute: Tensor<2>,
    prior_constant: f64,
}

impl<M: Module + Send + Sync, L: ModuleLikelihood<M>> ModulePosterior<M, L> {
    /// `template` only provides the structure; its values are replaced by θ at every call.
    pub fn new(
        template: M,
        likelihood: L,
        prior: &PriorSpec,
        device: &Device,
    ) -> Result<Self, ModulePosteriorError> {
        let device = device.clone().autodiff();
        let template = template.to_device(&device);
        let layout = layout_of(&template);
        if layout.dim() == 0 {
            return Err(ModulePosteriorError::NoFloatParameters);
        }
        let coefficients = prior.coefficients(&layout)?;
        let row = |v: Vec<f64>| {
            Tensor::from_data(
                TensorData::new(v, [1, layout.dim()]).convert::<f32>(),
                &device,
            )
        };
        Ok(Self {
            template,
            likelihood,
            prior_quadratic: row(coefficients.quadratic.clone()),
            prior_absolute: row(coefficients.absolute.clone()),
            prior_constant: coefficients.constant,
            layout,
            device,
        })
    }
}

impl<M: Module + Send + Sync, L: ModuleLikelihood<M>> Posterior for ModulePosterior<M, L> {
    fn layout(&self) -> &ParameterLayout {
        &self.layout
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn dtype(&self) -> DType {
        DType::F32
    }

    fn log_posterior(&self, theta: Tensor<2>) -> Tensor<1> {
        let [c, d] = theta.dims();
        let log_likelihoods: Vec<Tensor<1>> = (0..c)
            .map(|chain| {
                let row = theta.clone().slice([chain..chain + 1, 0..d]).reshape([d]);
                let module = load_flat_tensor(self.template.clone(), row)
                    .expect("θ has the layout's dimension");
                self.likelihood.log_likelihood(&module)
            })
            .collect();
        let prior = (theta.clone().powi_scalar(2) * self.prior_quadratic.clone())
            .sum_dim(1)
            .mul_scalar(-0.5)
            - (theta.abs() * self.prior_absolute.clone()).sum_dim(1);
        Tensor::cat(log_likelihoods, 0) + prior.reshape([c]).add_scalar(self.prior_constant)
    }
}
