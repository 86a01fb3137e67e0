//! Training data as device tensors, checked once when the posterior is built.

use crate::likelihood::Likelihood;
use burn::tensor::{DType, Device, Tensor, TensorData};

/// Host-side inputs and targets, row-major. For the categorical head `y` holds one integer
/// label per row (`y_cols == 1`).
#[derive(Debug, Clone, PartialEq)]
pub struct HostData {
    pub x: Vec<f64>,
    pub rows: usize,
    pub x_cols: usize,
    pub y: Vec<f64>,
    pub y_cols: usize,
}

/// Why data cannot be used with a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataShapeError {
    #[error("x has {got} values, expected rows × columns = {rows} × {cols}")]
    XLength {
        got: usize,
        rows: usize,
        cols: usize,
    },
    #[error("y has {got} values, expected rows × columns = {rows} × {cols}")]
    YLength {
        got: usize,
        rows: usize,
        cols: usize,
    },
    #[error("the model expects {expected} input features, the data has {got}")]
    Features { expected: usize, got: usize },
    #[error("the model expects {expected} target columns, the data has {got} (leave --targets / [model] targets unset to take the data's)")]
    Targets { expected: usize, got: usize },
    #[error("{what} row {row}, column {col} is not finite ({value})")]
    NotFinite {
        what: &'static str,
        row: usize,
        col: usize,
        value: f64,
    },
    #[error("label {value} in row {row} is not an integer in 0..{classes}")]
    BadLabel {
        row: usize,
        value: f64,
        classes: usize,
    },
    #[error("no data rows")]
    Empty,
}

impl HostData {
    pub fn new(x: Vec<f64>, rows: usize, x_cols: usize, y: Vec<f64>, y_cols: usize) -> Self {
        Self {
            x,
            rows,
            x_cols,
            y,
            y_cols,
        }
    }

    /// Checks shapes, finiteness and (for classification) labels against a model.
    pub fn validate(
        &self,
        d_input: usize,
        n_targets: usize,
        likelihood: &Likelihood,
    ) -> Result<(), DataShapeError> {
        if self.rows == 0 {
            return Err(DataShapeError::Empty);
        }
        if self.x.len() != self.rows * self.x_cols {
            return Err(DataShapeError::XLength {
                got: self.x.len(),
                rows: self.rows,
                cols: self.x_cols,
            });
        }
        if self.y.len() != self.rows * self.y_cols {
            return Err(DataShapeError::YLength {
                got: self.y.len(),
                rows: self.rows,
                cols: self.y_cols,
            });
        }
        if self.x_cols != d_input {
            return Err(DataShapeError::Features {
                expected: d_input,
                got: self.x_cols,
            });
        }
        let expected_targets = if likelihood.is_regression() {
            n_targets
        } else {
            1
        };
        if self.y_cols != expected_targets {
            return Err(DataShapeError::Targets {
                expected: expected_targets,
                got: self.y_cols,
            });
        }
        for (what, values, cols) in [("x", &self.x, self.x_cols), ("y", &self.y, self.y_cols)] {
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(DataShapeError::NotFinite {
                    what,
                    row: i / cols,
                    col: i % cols,
                    value: values[i],
                });
            }
        }
        if let Likelihood::Categorical { classes } = *likelihood {
            for (row, &value) in self.y.iter().enumerate() {
                if value.fract() != 0.0 || value < 0.0 || value >= classes as f64 {
                    return Err(DataShapeError::BadLabel {
                        row,
                        value,
                        classes,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Inputs `[N, d_in]` and targets on a device: `[N, T]` real targets, or `[N, K]` one-hot labels.
#[derive(Debug, Clone)]
pub struct DeviceData {
    pub x: Tensor<2>,
    pub targets: Tensor<2>,
    pub rows: usize,
}

impl DeviceData {
    pub fn upload(data: &HostData, likelihood: &Likelihood, device: &Device, dtype: DType) -> Self {
        let x = tensor_from(&data.x, [data.rows, data.x_cols], device, dtype);
        let (targets, columns) = data.target_matrix(likelihood);
        let targets = tensor_from(&targets, [data.rows, columns], device, dtype);
        DeviceData {
            x,
            targets,
            rows: data.rows,
        }
    }
}

impl HostData {
    /// The matrix the likelihood compares outputs with: `[N, T]` real targets, or `[N, K]`
    /// one-hot rows for the categorical head. Returns the values and the column count.
    pub fn target_matrix(&self, likelihood: &Likelihood) -> (Vec<f64>, usize) {
        match *likelihood {
            Likelihood::Categorical { classes } => {
                let mut one_hot = vec![0.0; self.rows * classes];
                for (row, &label) in self.y.iter().enumerate() {
                    one_hot[row * classes + label as usize] = 1.0;
                }
                (one_hot, classes)
            }
            _ => (self.y.clone(), self.y_cols),
        }
    }
}

/// A constant (not tracked) tensor of the given dtype from host values.
pub fn tensor_from<const D: usize>(
    values: &[f64],
    shape: [usize; D],
    device: &Device,
    dtype: DType,
) -> Tensor<D> {
    let data = TensorData::new(values.to_vec(), shape).convert_dtype(dtype);
    Tensor::from_data(data, (device, dtype))
}
