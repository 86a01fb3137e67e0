//! A dense row-major `f64` matrix: the host-side layout the model crates copy into tensors.

/// `rows × cols` values stored row by row, so one data row is one contiguous slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f64>,
}

impl Matrix {
    /// Wraps row-major `data`.
    ///
    /// # Panics
    /// If `data.len() != rows * cols`; that is a programming error, not bad input.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Self {
        assert_eq!(
            data.len(),
            rows * cols,
            "Matrix::new: {rows} x {cols} needs {} values, got {}",
            rows * cols,
            data.len()
        );
        Self { rows, cols, data }
    }

    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self::new(rows, cols, vec![0.0; rows * cols])
    }

    pub fn get(&self, row: usize, col: usize) -> f64 {
        self.data[row * self.cols + col]
    }

    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    pub fn iter_rows(&self) -> impl Iterator<Item = &[f64]> + '_ {
        (0..self.rows).map(move |i| self.row(i))
    }

    /// A copy of column `j`; columns are strided, so they cannot be borrowed as a slice.
    pub fn column(&self, j: usize) -> Vec<f64> {
        assert!(
            j < self.cols,
            "column {j} out of range for {} columns",
            self.cols
        );
        self.iter_rows().map(|r| r[j]).collect()
    }

    /// The rows at `indices`, in that order (repeats allowed).
    pub fn select_rows(&self, indices: &[usize]) -> Matrix {
        let mut data = Vec::with_capacity(indices.len() * self.cols);
        for &i in indices {
            data.extend_from_slice(self.row(i));
        }
        Matrix::new(indices.len(), self.cols, data)
    }

    /// Stacks matrices with equal column counts on top of each other.
    pub fn stack_rows(parts: &[&Matrix]) -> Matrix {
        let cols = parts.first().map_or(0, |m| m.cols);
        assert!(
            parts.iter().all(|m| m.cols == cols),
            "Matrix::stack_rows: all parts need {cols} columns"
        );
        let rows = parts.iter().map(|m| m.rows).sum();
        let data = parts.iter().flat_map(|m| m.data.iter().copied()).collect();
        Matrix::new(rows, cols, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_by_two() -> Matrix {
        Matrix::new(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    }

    #[test]
    fn rows_and_columns_follow_row_major_layout() {
        let m = three_by_two();
        assert_eq!(m.row(1), &[3.0, 4.0]);
        assert_eq!(m.column(1), vec![2.0, 4.0, 6.0]);
        assert_eq!(m.get(2, 0), 5.0);
        assert_eq!(m.iter_rows().count(), 3);
    }

    #[test]
    fn select_rows_keeps_requested_order() {
        let m = three_by_two().select_rows(&[2, 0]);
        assert_eq!(m, Matrix::new(2, 2, vec![5.0, 6.0, 1.0, 2.0]));
    }

    #[test]
    fn stack_rows_appends_in_order() {
        let a = three_by_two();
        let b = Matrix::new(1, 2, vec![7.0, 8.0]);
        let s = Matrix::stack_rows(&[&a, &b]);
        assert_eq!(s.rows, 4);
        assert_eq!(s.row(3), &[7.0, 8.0]);
    }

    #[test]
    #[should_panic(expected = "needs 6 values")]
    fn new_rejects_wrong_length() {
        Matrix::new(3, 2, vec![0.0; 5]);
    }
}
