//! A named regression dataset: feature matrix, target matrix and their column names.

use crate::error::{ColumnRole, DataError};
use crate::matrix::Matrix;

/// Inputs `x` (one row per example) and outputs `y` (one or more target columns).
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub name: String,
    /// Where the rows came from: a file path, or `generated:<generator>(<parameters>)`.
    pub source: String,
    pub feature_names: Vec<String>,
    pub target_names: Vec<String>,
    pub x: Matrix,
    pub y: Matrix,
}

impl Dataset {
    /// Data a program already holds (plain vectors, an ndarray's `as_slice()`): `x` row-major
    /// with `n_features` values per row, `y` with `n_targets` per row. Columns are named
    /// `x0, x1, …` and `y0, …`; lengths that do not make whole rows, a mismatch in the number of
    /// rows, or a NaN or infinite value are errors.
    pub fn from_rows<T: Copy + Into<f64>>(
        name: &str,
        x: &[T],
        n_features: usize,
        y: &[T],
        n_targets: usize,
    ) -> Result<Self, DataError> {
        let invalid = |problem: String| DataError::InvalidRows {
            dataset: name.to_string(),
            problem,
        };
        if n_features == 0 || n_targets == 0 {
            return Err(invalid(format!(
                "needs at least one feature and one target (got {n_features} and {n_targets})"
            )));
        }
        if !x.len().is_multiple_of(n_features) || !y.len().is_multiple_of(n_targets) {
            return Err(invalid(format!(
                "{} x values are not whole rows of {n_features} features, or {} y values not whole rows of {n_targets} targets",
                x.len(),
                y.len()
            )));
        }
        let rows = x.len() / n_features;
        if y.len() / n_targets != rows {
            return Err(invalid(format!(
                "x has {rows} rows, y has {}",
                y.len() / n_targets
            )));
        }
        let widen = |values: &[T], what: &str, cols: usize| -> Result<Vec<f64>, DataError> {
            let values: Vec<f64> = values.iter().map(|&v| v.into()).collect();
            match values.iter().position(|v| !v.is_finite()) {
                Some(i) => Err(invalid(format!(
                    "{what} row {}, column {} is {}; every value must be finite",
                    i / cols,
                    i % cols,
                    values[i]
                ))),
                None => Ok(values),
            }
        };
        Ok(Dataset {
            name: name.to_string(),
            source: format!("in-memory:{name}"),
            feature_names: (0..n_features).map(|j| format!("x{j}")).collect(),
            target_names: (0..n_targets).map(|k| format!("y{k}")).collect(),
            x: Matrix::new(rows, n_features, widen(x, "x", n_features)?),
            y: Matrix::new(rows, n_targets, widen(y, "y", n_targets)?),
        })
    }

    pub fn n_rows(&self) -> usize {
        self.x.rows
    }

    pub fn n_features(&self) -> usize {
        self.x.cols
    }

    pub fn n_targets(&self) -> usize {
        self.y.cols
    }

    /// The rows at `indices`, keeping names and source.
    pub fn select_rows(&self, indices: &[usize]) -> Dataset {
        Dataset {
            name: self.name.clone(),
            source: self.source.clone(),
            feature_names: self.feature_names.clone(),
            target_names: self.target_names.clone(),
            x: self.x.select_rows(indices),
            y: self.y.select_rows(indices),
        }
    }

    /// Rejects a column whose values are all equal: it cannot be standardized and tells the
    /// model nothing. With fewer than two rows every column is trivially constant, so the
    /// check is left to whoever needs more rows (splits, the standardizer).
    pub fn check_no_constant_columns(&self) -> Result<(), DataError> {
        if self.n_rows() < 2 {
            return Ok(());
        }
        let parts = [
            (ColumnRole::Feature, &self.x, &self.feature_names),
            (ColumnRole::Target, &self.y, &self.target_names),
        ];
        for (role, matrix, names) in parts {
            if let Some(j) = first_constant_column(matrix) {
                return Err(DataError::ConstantColumn {
                    origin: self.source.clone(),
                    role,
                    column: j + 1,
                    name: names[j].clone(),
                    value: matrix.get(0, j),
                });
            }
        }
        Ok(())
    }
}

/// Index of the first column whose values are all bitwise-equal to the first row's.
pub(crate) fn first_constant_column(m: &Matrix) -> Option<usize> {
    (0..m.cols).find(|&j| {
        let first = m.get(0, j);
        m.iter_rows().all(|r| r[j] == first)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(x: Vec<f64>, y: Vec<f64>) -> Dataset {
        Dataset {
            name: "tiny".into(),
            source: "test".into(),
            feature_names: vec!["a".into(), "b".into()],
            target_names: vec!["t".into()],
            x: Matrix::new(y.len(), 2, x),
            y: Matrix::new(y.len(), 1, y),
        }
    }

    #[test]
    fn constant_feature_is_named() {
        let d = tiny(vec![1.0, 5.0, 2.0, 5.0, 3.0, 5.0], vec![1.0, 2.0, 3.0]);
        let err = d.check_no_constant_columns().unwrap_err();
        assert!(matches!(
            err,
            DataError::ConstantColumn { role: ColumnRole::Feature, column: 2, ref name, .. } if name == "b"
        ));
    }

    #[test]
    fn constant_target_is_named() {
        let d = tiny(vec![1.0, 5.0, 2.0, 6.0, 3.0, 7.0], vec![4.0, 4.0, 4.0]);
        let err = d.check_no_constant_columns().unwrap_err();
        assert!(matches!(
            err,
            DataError::ConstantColumn {
                role: ColumnRole::Target,
                column: 1,
                ..
            }
        ));
    }

    #[test]
    fn rows_from_memory_are_checked() {
        let d = Dataset::from_rows("mine", &[1.0f32, 2.0, 3.0, 4.0], 2, &[0.5f32, 1.5], 1).unwrap();
        assert_eq!((d.n_rows(), d.n_features(), d.n_targets()), (2, 2, 1));
        assert_eq!(d.x.row(1), &[3.0, 4.0]);
        assert_eq!(d.feature_names, ["x0", "x1"]);
        let error = Dataset::from_rows("mine", &[1.0, 2.0, 3.0], 2, &[0.5], 1).unwrap_err();
        assert!(error.to_string().contains("not whole rows"), "{error}");
        let error = Dataset::from_rows("mine", &[1.0, 2.0], 1, &[0.5], 1).unwrap_err();
        assert!(
            error.to_string().contains("x has 2 rows, y has 1"),
            "{error}"
        );
        let error = Dataset::from_rows("mine", &[1.0, f64::NAN], 1, &[0.5, 1.0], 1).unwrap_err();
        assert!(
            error.to_string().contains("x row 1, column 0 is NaN"),
            "{error}"
        );
    }

    #[test]
    fn varying_columns_pass() {
        let d = tiny(vec![1.0, 5.0, 2.0, 6.0], vec![4.0, 4.5]);
        assert!(d.check_no_constant_columns().is_ok());
    }
}
