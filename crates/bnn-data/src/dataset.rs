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
        assert!(matches!(err, DataError::ConstantColumn { role: ColumnRole::Target, column: 1, .. }));
    }

    #[test]
    fn varying_columns_pass() {
        let d = tiny(vec![1.0, 5.0, 2.0, 6.0], vec![4.0, 4.5]);
        assert!(d.check_no_constant_columns().is_ok());
    }
}
