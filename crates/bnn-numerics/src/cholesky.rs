//! The Cholesky factorization `A = L Lᵀ` of a symmetric positive definite matrix, with the
//! operations the Riemannian samplers need of a metric: `L z`, `A⁻¹ b` and `log det A`.

/// `A = L Lᵀ` with `L` lower triangular, stored row major (the upper triangle is zero).
#[derive(Clone, Debug, PartialEq)]
pub struct Cholesky {
    dim: usize,
    factor: Vec<f64>,
    log_det: f64,
}

/// Why a matrix could not be factored.
#[derive(Clone, Debug, PartialEq)]
pub enum CholeskyError {
    /// The slice does not hold `dim × dim` values.
    Shape { dim: usize, values: usize },
    /// Pivot `index` is not positive (or not finite): the matrix is not positive definite there.
    NotPositiveDefinite { index: usize, pivot: f64 },
}

impl std::fmt::Display for CholeskyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CholeskyError::Shape { dim, values } => write!(
                f,
                "a {dim} × {dim} matrix needs {} values, got {values}",
                dim * dim
            ),
            CholeskyError::NotPositiveDefinite { index, pivot } => {
                write!(f, "the matrix is not positive definite: pivot {index} of its Cholesky factorization is {pivot}")
            }
        }
    }
}

impl std::error::Error for CholeskyError {}

impl Cholesky {
    /// Factors `matrix` (`[dim, dim]`, row major; only its lower triangle is read).
    pub fn new(matrix: &[f64], dim: usize) -> Result<Self, CholeskyError> {
        if matrix.len() != dim * dim {
            return Err(CholeskyError::Shape {
                dim,
                values: matrix.len(),
            });
        }
        let mut factor = vec![0.0; dim * dim];
        let mut log_det = 0.0;
        for j in 0..dim {
            let row_j = &factor[j * dim..j * dim + j];
            let pivot = matrix[j * dim + j] - row_j.iter().map(|l| l * l).sum::<f64>();
            if !(pivot > 0.0 && pivot.is_finite()) {
                return Err(CholeskyError::NotPositiveDefinite { index: j, pivot });
            }
            let diagonal = pivot.sqrt();
            log_det += 2.0 * diagonal.ln();
            factor[j * dim + j] = diagonal;
            for i in j + 1..dim {
                let (upper, lower) = factor.split_at_mut(i * dim);
                let dot: f64 = upper[j * dim..j * dim + j]
                    .iter()
                    .zip(&lower[..j])
                    .map(|(a, b)| a * b)
                    .sum();
                lower[j] = (matrix[i * dim + j] - dot) / diagonal;
            }
        }
        Ok(Self {
            dim,
            factor,
            log_det,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// `log det A`.
    pub fn log_det(&self) -> f64 {
        self.log_det
    }

    /// The factor `L`, row major.
    pub fn factor(&self) -> &[f64] {
        &self.factor
    }

    /// `L z` into `out`: with `z ~ N(0, I)` a draw from `N(0, A)`.
    pub fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        for (i, o) in out.iter_mut().enumerate().take(self.dim) {
            *o = self.factor[i * self.dim..i * self.dim + i + 1]
                .iter()
                .zip(z)
                .map(|(l, z)| l * z)
                .sum();
        }
    }

    /// `A⁻¹ b_r` for every row `b_r` of `rhs` (`[m, dim]`, row major) into the rows of `out`:
    /// the substitutions run over all right-hand sides at once (contiguous, vectorized updates),
    /// each sum in the same order as [`Cholesky::solve`], so every row equals its `solve` bit
    /// for bit.
    pub fn solve_many(&self, rhs: &[f64], out: &mut [f64]) {
        let n = self.dim;
        if n == 0 {
            return;
        }
        let m = rhs.len() / n;
        // Work on the transpose: row i holds coordinate i of every right-hand side.
        let mut t = vec![0.0; n * m];
        for (r, row) in rhs.chunks_exact(n).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                t[i * m + r] = v;
            }
        }
        let mut sum = vec![0.0; m];
        for i in 0..n {
            sum.fill(0.0);
            for j in 0..i {
                let l = self.factor[i * n + j];
                for (s, y) in sum.iter_mut().zip(&t[j * m..(j + 1) * m]) {
                    *s += l * y;
                }
            }
            let diagonal = self.factor[i * n + i];
            for (y, s) in t[i * m..(i + 1) * m].iter_mut().zip(&sum) {
                *y = (*y - s) / diagonal;
            }
        }
        for i in (0..n).rev() {
            sum.fill(0.0);
            for k in i + 1..n {
                let l = self.factor[k * n + i];
                for (s, y) in sum.iter_mut().zip(&t[k * m..(k + 1) * m]) {
                    *s += l * y;
                }
            }
            let diagonal = self.factor[i * n + i];
            for (y, s) in t[i * m..(i + 1) * m].iter_mut().zip(&sum) {
                *y = (*y - s) / diagonal;
            }
        }
        for (r, row) in out.chunks_exact_mut(n).enumerate().take(m) {
            for (i, o) in row.iter_mut().enumerate() {
                *o = t[i * m + r];
            }
        }
    }

    /// `A⁻¹ b` into `out` (forward, then back substitution).
    pub fn solve(&self, b: &[f64], out: &mut [f64]) {
        let n = self.dim;
        for i in 0..n {
            let row = &self.factor[i * n..i * n + i];
            out[i] = (b[i] - row.iter().zip(&out[..i]).map(|(l, y)| l * y).sum::<f64>())
                / self.factor[i * n + i];
        }
        for i in (0..n).rev() {
            let tail: f64 = (i + 1..n).map(|k| self.factor[k * n + i] * out[k]).sum();
            out[i] = (out[i] - tail) / self.factor[i * n + i];
        }
    }
}
