//! A user's module with one of the built-in likelihood heads, and its posterior predictive
//! through the module's own `forward`.

use crate::flatten::{flatten, layout_of, unflatten, LengthMismatch};
use crate::likelihood::{Likelihood, LikelihoodError};
use crate::metrics::{PredictiveAccumulator, PredictiveMetrics};
use crate::module_posterior::ModuleLikelihood;
use crate::predictive::PointPrediction;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};

/// Why a built-in head does not fit a module's data.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HeadError {
    #[error("the {0:?} head samples extra parameters (log σ) that a user's module does not have; use GaussianFixed, GaussianHeteroscedastic or Categorical, or write the likelihood as a closure")]
    ExtraParameters(Likelihood),
    #[error("inputs have {x_rows} rows but targets have {y_rows}")]
    RowMismatch { x_rows: usize, y_rows: usize },
    #[error("a categorical head takes one label column, got {0}")]
    LabelColumns(usize),
    #[error(transparent)]
    Invalid(#[from] LikelihoodError),
}

/// log p(y | module) = Σ_i log p(y_i | head(forward(module, x)_i)): one of the built-in
/// [`Likelihood`] heads applied to the module's output on fixed data.
///
/// `forward(module, x)` returns `[N, K]` with `K = head.output_dim(T)` (μ then the raw scale
/// for the heteroscedastic head, logits for the categorical one). `y` is `[N, T]` targets, or
/// `[N, 1]` labels `0..classes` for the categorical head.
pub struct HeadLikelihood<F> {
    head: Likelihood,
    x: Tensor<2>,
    /// Targets as the head's log likelihood takes them (one-hot for the categorical head).
    targets: Tensor<2>,
    forward: F,
}

impl<F> HeadLikelihood<F> {
    pub fn new(
        head: Likelihood,
        x: Tensor<2>,
        y: Tensor<2>,
        forward: F,
    ) -> Result<Self, HeadError> {
        head.validate()?;
        if head.has_log_sigma() {
            return Err(HeadError::ExtraParameters(head));
        }
        let ([x_rows, _], [y_rows, y_cols]) = (x.dims(), y.dims());
        if x_rows != y_rows {
            return Err(HeadError::RowMismatch { x_rows, y_rows });
        }
        let targets = match head {
            Likelihood::Categorical { classes } => {
                if y_cols != 1 {
                    return Err(HeadError::LabelColumns(y_cols));
                }
                let labels: Tensor<1, Int> = y.clone().reshape([y_rows]).int();
                labels.one_hot(classes).float()
            }
            _ => y,
        };
        // Constants in the autodiff graph; the module's parameters are what is differentiated.
        Ok(Self {
            head,
            x: x.autodiff(),
            targets: targets.autodiff(),
            forward,
        })
    }

    pub fn head(&self) -> Likelihood {
        self.head
    }
}

impl<M, F> ModuleLikelihood<M> for HeadLikelihood<F>
where
    F: Fn(&M, Tensor<2>) -> Tensor<2> + Send + Sync,
{
    fn log_likelihood(&self, module: &M) -> Tensor<1> {
        let outputs = (self.forward)(module, self.x.clone()).unsqueeze::<3>();
        self.head.log_likelihood(outputs, &self.targets, None)
    }
}

/// The module's outputs under each draw: the draw is written into a copy of `template` and
/// the module's own `forward` runs on it, on the module's device and without autodiff.
/// Returns `[S, N, K]` for `S` draws of `forward`'s `[N, K]`.
///
/// Burn has no vectorized map over modules, so this is one forward per draw; the outputs stay
/// on the device until the caller reads them.
pub fn predict_with_draws<M, F>(
    template: &M,
    draws: &[Vec<f64>],
    forward: F,
) -> Result<Tensor<3>, LengthMismatch>
where
    M: Module,
    F: Fn(&M) -> Tensor<2>,
{
    let expected = layout_of(template).dim();
    let mut outputs = Vec::with_capacity(draws.len());
    for draw in draws {
        if draw.len() != expected {
            return Err(LengthMismatch {
                expected,
                got: draw.len(),
            });
        }
        let values: Vec<f32> = draw.iter().map(|&v| v as f32).collect();
        let module = unflatten(template.clone(), &values)?;
        outputs.push(forward(&module).without_autodiff().unsqueeze::<3>());
    }
    if outputs.is_empty() {
        return Err(LengthMismatch { expected, got: 0 });
    }
    Ok(Tensor::cat(outputs, 0))
}

impl Likelihood {
    /// Per draw and data point, the predictive distribution from `[S, N, K]` outputs (of
    /// [`predict_with_draws`]). Not for the learned-σ head, whose σ is not an output.
    pub fn predictions_of_outputs(&self, outputs: Tensor<3>) -> Vec<Vec<PointPrediction>> {
        let [s, n, k] = outputs.dims();
        let values: Vec<f64> = outputs.into_data().iter::<f64>().collect();
        (0..s)
            .map(|d| {
                (0..n)
                    .map(|i| {
                        let at = (d * n + i) * k;
                        self.point_prediction(&values[at..at + k], None)
                    })
                    .collect()
            })
            .collect()
    }

    /// RMSE, LPPD, NLL (and accuracy) of the draws' predictive on `y` (row-major, `y_cols` per
    /// row; labels for a categorical head).
    pub fn metrics_of_outputs(
        &self,
        outputs: Tensor<3>,
        y: &[f64],
        y_cols: usize,
    ) -> PredictiveMetrics {
        let mut accumulator = PredictiveAccumulator::new(y, y_cols);
        for draw in self.predictions_of_outputs(outputs) {
            accumulator.add_draw(&draw);
        }
        accumulator.finish()
    }
}

/// A host copy of a `[N, T]` tensor, row-major, for [`Likelihood::metrics_of_outputs`].
pub fn host_rows(tensor: &Tensor<2>) -> Vec<f64> {
    let data: TensorData = tensor.clone().without_autodiff().into_data();
    data.iter::<f64>().collect()
}

/// Starting points for an ensemble of a module: member `j` is `init(device)` after the device's
/// generator is seeded with `seed + j` (so each member has its own initialization), flattened.
/// That generator is the device's, shared by the whole process: reproducible starts need no other
/// thread initializing modules on the same device meanwhile.
pub fn module_starts<M: Module>(
    members: usize,
    seed: u64,
    device: &Device,
    init: impl Fn(&Device) -> M,
) -> Vec<Vec<f64>> {
    (0..members)
        .map(|j| {
            device.seed(seed + j as u64);
            flatten(&init(device)).into_iter().map(f64::from).collect()
        })
        .collect()
}
