//! Per-column standardization `(v - mean) / sd` of features and targets, and its inverse for
//! reporting predictions in original units.

use crate::column_moments::mean_and_sd;
use crate::dataset::{first_constant_column, Dataset};
use crate::error::{ColumnRole, DataError};
use crate::matrix::Matrix;
use crate::split::Split;

/// Which rows the means and standard deviations are computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatsSource {
    /// Only the training rows, so nothing about the test rows leaks into training.
    #[default]
    TrainingSplit,
    /// All rows of the original dataset. The DEI-MCMC reference code (Sommer et al., 2024)
    /// standardized before splitting; use this to reproduce its numbers exactly.
    FullData,
}

/// Column means and standard deviations of features (`x_*`) and targets (`y_*`).
///
/// Standard deviations use divisor `n` (numpy's default `ddof=0`), as the DEI-MCMC reference
/// code did.
#[derive(Debug, Clone, PartialEq)]
pub struct Standardizer {
    pub x_mean: Vec<f64>,
    pub x_sd: Vec<f64>,
    pub y_mean: Vec<f64>,
    pub y_sd: Vec<f64>,
}

/// The parts of a [`Split`] after standardization; row order and indices are the split's.
#[derive(Debug, Clone, PartialEq)]
pub struct StandardizedSplit {
    pub train: Dataset,
    pub valid: Option<Dataset>,
    pub test: Dataset,
}

impl Standardizer {
    /// Fits on bare matrices; errors name columns by position (`x3`, `y1`).
    pub fn fit(x: &Matrix, y: &Matrix) -> Result<Self, DataError> {
        let numbered = |prefix: &str, n: usize| (1..=n).map(|j| format!("{prefix}{j}")).collect();
        let dataset = Dataset {
            name: "data".into(),
            source: "matrices".into(),
            feature_names: numbered("x", x.cols),
            target_names: numbered("y", y.cols),
            x: x.clone(),
            y: y.clone(),
        };
        Self::fit_dataset(&dataset, "the fitting data")
    }

    /// Fits on a dataset; `fitted_on` describes the rows in error messages ("the training split").
    pub fn fit_dataset(data: &Dataset, fitted_on: &str) -> Result<Self, DataError> {
        if data.n_rows() < 2 {
            return Err(DataError::TooFewRows {
                dataset: data.name.clone(),
                rows: data.n_rows(),
                needed: 2,
                purpose: format!("standardization statistics over {fitted_on}"),
            });
        }
        let parts = [
            (ColumnRole::Feature, &data.x, &data.feature_names),
            (ColumnRole::Target, &data.y, &data.target_names),
        ];
        for (role, matrix, names) in parts {
            // Checked by equality, not by sd == 0: rounding can leave a tiny non-zero sd for
            // a column of equal values.
            if let Some(j) = first_constant_column(matrix) {
                return Err(DataError::ZeroSpread {
                    role,
                    column: j + 1,
                    name: names[j].clone(),
                    fitted_on: fitted_on.to_string(),
                });
            }
        }
        let (x_mean, x_sd) = column_moments(&data.x);
        let (y_mean, y_sd) = column_moments(&data.y);
        Ok(Self {
            x_mean,
            x_sd,
            y_mean,
            y_sd,
        })
    }

    pub fn transform_x(&self, x: &Matrix) -> Matrix {
        map_columns(x, &self.x_mean, &self.x_sd, |v, mean, sd| (v - mean) / sd)
    }

    pub fn transform_y(&self, y: &Matrix) -> Matrix {
        map_columns(y, &self.y_mean, &self.y_sd, |v, mean, sd| (v - mean) / sd)
    }

    /// Standardized target values (or predictive means) back to original units.
    pub fn inverse_y_mean(&self, values: &Matrix) -> Matrix {
        map_columns(values, &self.y_mean, &self.y_sd, |v, mean, sd| {
            v * sd + mean
        })
    }

    /// Standardized spreads (predictive or noise standard deviations) back to original units;
    /// a spread is shift-invariant, so only the scale applies.
    pub fn inverse_y_scale(&self, sds: &Matrix) -> Matrix {
        map_columns(sds, &self.y_mean, &self.y_sd, |v, _, sd| v * sd)
    }

    pub fn transform_dataset(&self, data: &Dataset) -> Dataset {
        Dataset {
            x: self.transform_x(&data.x),
            y: self.transform_y(&data.y),
            ..data.clone()
        }
    }
}

/// Standardizes every part of `split` with statistics from `source`.
pub fn standardize_split(
    split: &Split,
    source: StatsSource,
) -> Result<(StandardizedSplit, Standardizer), DataError> {
    scale_split(split, source, false)
}

/// As [`standardize_split`] for the features only: the targets are class labels and stay as
/// they are (the standardizer's target map is the identity).
pub fn standardize_features_only(
    split: &Split,
    source: StatsSource,
) -> Result<(StandardizedSplit, Standardizer), DataError> {
    scale_split(split, source, true)
}

fn scale_split(
    split: &Split,
    source: StatsSource,
    keep_targets: bool,
) -> Result<(StandardizedSplit, Standardizer), DataError> {
    let mut standardizer = match source {
        StatsSource::TrainingSplit => {
            Standardizer::fit_dataset(&split.train, "the training split")?
        }
        StatsSource::FullData => {
            Standardizer::fit_dataset(&split.original_rows(), "the full dataset")?
        }
    };
    if keep_targets {
        standardizer.y_mean.fill(0.0);
        standardizer.y_sd.fill(1.0);
    }
    let standardized = StandardizedSplit {
        train: standardizer.transform_dataset(&split.train),
        valid: split
            .valid
            .as_ref()
            .map(|v| standardizer.transform_dataset(v)),
        test: standardizer.transform_dataset(&split.test),
    };
    Ok((standardized, standardizer))
}

fn column_moments(m: &Matrix) -> (Vec<f64>, Vec<f64>) {
    (0..m.cols).map(|j| mean_and_sd(&m.column(j))).unzip()
}

/// # Panics
/// If `m` does not have one column per statistic: a caller mixed up feature and target data.
fn map_columns(m: &Matrix, mean: &[f64], sd: &[f64], f: impl Fn(f64, f64, f64) -> f64) -> Matrix {
    assert_eq!(
        m.cols,
        mean.len(),
        "standardizer was fitted on {} columns but got a matrix with {}",
        mean.len(),
        m.cols
    );
    let data = m
        .data
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            let j = k % m.cols;
            f(v, mean[j], sd[j])
        })
        .collect();
    Matrix::new(m.rows, m.cols, data)
}
