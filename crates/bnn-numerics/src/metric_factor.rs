//! A position-dependent metric `G = P + BᵀB` (`P` diagonal and positive, `B` the `r × D` rows
//! of the likelihood's curvature) held in whichever form makes its operations cheaper: a dense
//! Cholesky factor (`O(D³)` to factor, `O(D²)` per solve) when `r ≥ D`, or the diagonal plus
//! low-rank form (Woodbury: `O(r²D + r³)` to factor, `O(rD)` per solve) when `r < D` — a wide
//! network on few data points.

use crate::cholesky::{Cholesky, CholeskyError};

/// `G` factored, with `G⁻¹b`, `log det G` and draws from `N(0, G)`.
#[derive(Clone, Debug, PartialEq)]
pub enum MetricFactor {
    Dense(Cholesky),
    LowRank(LowRankMetric),
}

/// `G = diag(P) + BᵀB` through the capacitance matrix `C = I + B P⁻¹ Bᵀ` (`r × r`):
/// `G⁻¹ = P⁻¹ − P⁻¹Bᵀ C⁻¹ B P⁻¹`, `log det G = Σ log P_i + log det C`.
#[derive(Clone, Debug, PartialEq)]
pub struct LowRankMetric {
    diagonal: Vec<f64>,
    /// `B`, `[rank, dim]` row major.
    rows: Vec<f64>,
    rank: usize,
    capacitance: Cholesky,
    log_det: f64,
}

impl LowRankMetric {
    /// Factors `diag(diagonal) + BᵀB` for `rows` = `B` (`[rank, dim]`, row major). Every diagonal
    /// entry must be positive (a prior's precision).
    pub fn new(diagonal: Vec<f64>, rows: Vec<f64>) -> Result<Self, CholeskyError> {
        let dim = diagonal.len();
        if let Some((index, &pivot)) = diagonal
            .iter()
            .enumerate()
            .find(|(_, p)| !(**p > 0.0 && p.is_finite()))
        {
            return Err(CholeskyError::NotPositiveDefinite { index, pivot });
        }
        if dim == 0 || !rows.len().is_multiple_of(dim) {
            return Err(CholeskyError::Shape {
                dim,
                values: rows.len(),
            });
        }
        let rank = rows.len() / dim;
        let scaled: Vec<f64> = rows
            .chunks_exact(dim)
            .flat_map(|row| row.iter().zip(&diagonal).map(|(b, p)| b / p))
            .collect();
        let mut capacitance = vec![0.0; rank * rank];
        for i in 0..rank {
            for j in 0..=i {
                let value: f64 = scaled[i * dim..(i + 1) * dim]
                    .iter()
                    .zip(&rows[j * dim..(j + 1) * dim])
                    .map(|(a, b)| a * b)
                    .sum();
                capacitance[i * rank + j] = value + if i == j { 1.0 } else { 0.0 };
                capacitance[j * rank + i] = capacitance[i * rank + j];
            }
        }
        let capacitance = Cholesky::new(&capacitance, rank)?;
        let log_det = diagonal.iter().map(|p| p.ln()).sum::<f64>() + capacitance.log_det();
        Ok(Self {
            diagonal,
            rows,
            rank,
            capacitance,
            log_det,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    fn solve(&self, b: &[f64], out: &mut [f64]) {
        let dim = self.diagonal.len();
        for ((o, b), p) in out.iter_mut().zip(b).zip(&self.diagonal) {
            *o = b / p;
        }
        let projected: Vec<f64> = self
            .rows
            .chunks_exact(dim)
            .map(|row| row.iter().zip(&*out).map(|(a, y)| a * y).sum())
            .collect();
        let mut inner = vec![0.0; self.rank];
        self.capacitance.solve(&projected, &mut inner);
        for (row, s) in self.rows.chunks_exact(dim).zip(&inner) {
            for ((o, a), p) in out.iter_mut().zip(row).zip(&self.diagonal) {
                *o -= s * a / p;
            }
        }
    }
}

impl MetricFactor {
    /// The cheaper form of `diag(diagonal) + BᵀB`: low rank when `B` has fewer rows than
    /// columns and the diagonal is positive, else the dense matrix `dense(B)` factored.
    pub fn choose(
        diagonal: &[f64],
        rows: Vec<f64>,
        dense: impl FnOnce(&[f64]) -> Vec<f64>,
    ) -> Result<Self, CholeskyError> {
        let dim = diagonal.len();
        if dim > 0 && rows.len() / dim < dim && diagonal.iter().all(|p| *p > 0.0 && p.is_finite()) {
            return LowRankMetric::new(diagonal.to_vec(), rows).map(MetricFactor::LowRank);
        }
        Cholesky::new(&dense(&rows), dim).map(MetricFactor::Dense)
    }

    pub fn dim(&self) -> usize {
        match self {
            MetricFactor::Dense(c) => c.dim(),
            MetricFactor::LowRank(l) => l.diagonal.len(),
        }
    }

    /// `log det G`.
    pub fn log_det(&self) -> f64 {
        match self {
            MetricFactor::Dense(c) => c.log_det(),
            MetricFactor::LowRank(l) => l.log_det,
        }
    }

    /// `G⁻¹ b` into `out`.
    pub fn solve(&self, b: &[f64], out: &mut [f64]) {
        match self {
            MetricFactor::Dense(c) => c.solve(b, out),
            MetricFactor::LowRank(l) => l.solve(b, out),
        }
    }

    /// `G⁻¹ b_r` for every row of `rhs` (`[m, dim]`) into the rows of `out`, each equal to its
    /// [`MetricFactor::solve`].
    pub fn solve_many(&self, rhs: &[f64], out: &mut [f64]) {
        match self {
            MetricFactor::Dense(c) => c.solve_many(rhs, out),
            MetricFactor::LowRank(l) => {
                let dim = l.diagonal.len();
                for (b, o) in rhs.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
                    l.solve(b, o);
                }
            }
        }
    }

    /// Standard normals one draw from `N(0, G)` takes: `dim` (dense), `dim + rank` (low rank).
    pub fn normals(&self) -> usize {
        match self {
            MetricFactor::Dense(c) => c.dim(),
            MetricFactor::LowRank(l) => l.diagonal.len() + l.rank,
        }
    }

    /// A draw from `N(0, G)` into `out` from `normals()` standard normals `z`: `L z` (dense),
    /// `√P z₁ + Bᵀ z₂` (low rank: covariance `P + BᵀB`).
    pub fn correlate(&self, z: &[f64], out: &mut [f64]) {
        match self {
            MetricFactor::Dense(c) => c.factor_times(z, out),
            MetricFactor::LowRank(l) => {
                let dim = l.diagonal.len();
                for ((o, z), p) in out.iter_mut().zip(&z[..dim]).zip(&l.diagonal) {
                    *o = p.sqrt() * z;
                }
                for (row, z) in l.rows.chunks_exact(dim).zip(&z[dim..]) {
                    for (o, a) in out.iter_mut().zip(row) {
                        *o += a * z;
                    }
                }
            }
        }
    }
}

/// What a Riemannian sampler needs of the position-dependent part of its Hamiltonian,
/// `φ(θ, p) = ½ log det G(θ) + ½ pᵀ G(θ)⁻¹ p`, at one point.
#[derive(Clone, Debug, PartialEq)]
pub struct RiemannianTerms {
    /// `G(θ)` factored.
    pub metric: MetricFactor,
    /// `G⁻¹ p`.
    pub velocity: Vec<f64>,
    /// `½ pᵀ G⁻¹ p`.
    pub kinetic_energy: f64,
    /// `∇_θ φ`: `½ tr(G⁻¹ ∂_i G) − ½ uᵀ ∂_i G u` with `u = G⁻¹p`.
    pub gradient: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `diag(P) + BᵀB` dense.
    fn dense(diagonal: &[f64], rows: &[f64]) -> Vec<f64> {
        let dim = diagonal.len();
        let mut g = vec![0.0; dim * dim];
        for row in rows.chunks_exact(dim) {
            for i in 0..dim {
                for j in 0..dim {
                    g[i * dim + j] += row[i] * row[j];
                }
            }
        }
        for i in 0..dim {
            g[i * dim + i] += diagonal[i];
        }
        g
    }

    #[test]
    fn the_low_rank_form_solves_and_measures_like_the_dense_one() {
        let dim = 7;
        let diagonal: Vec<f64> = (0..dim).map(|i| 0.5 + i as f64 * 0.3).collect();
        let rows: Vec<f64> = (0..3 * dim)
            .map(|i| ((i * 7 % 11) as f64 - 5.0) / 3.0)
            .collect();
        let low = MetricFactor::choose(&diagonal, rows.clone(), |_| {
            unreachable!("3 rows < 7 columns: low rank")
        })
        .unwrap();
        assert!(matches!(low, MetricFactor::LowRank(ref l) if l.rank() == 3));
        let full = Cholesky::new(&dense(&diagonal, &rows), dim).unwrap();
        assert!((low.log_det() - full.log_det()).abs() < 1e-10);
        let b: Vec<f64> = (0..dim).map(|i| (i as f64 - 3.0) / 2.0).collect();
        let (mut x, mut y) = (vec![0.0; dim], vec![0.0; dim]);
        low.solve(&b, &mut x);
        full.solve(&b, &mut y);
        for i in 0..dim {
            assert!((x[i] - y[i]).abs() < 1e-10, "{x:?} vs {y:?}");
        }
        // Draws have covariance G: E[n nᵀ] = √P √P + BᵀB, checked exactly through the linear
        // map z ↦ n (its Gram matrix).
        let normals = low.normals();
        assert_eq!(normals, dim + 3);
        let mut map = vec![vec![0.0; dim]; normals];
        for (k, column) in map.iter_mut().enumerate() {
            let mut z = vec![0.0; normals];
            z[k] = 1.0;
            low.correlate(&z, column);
        }
        let g = dense(&diagonal, &rows);
        for i in 0..dim {
            for j in 0..dim {
                let covariance: f64 = map.iter().map(|c| c[i] * c[j]).sum();
                assert!((covariance - g[i * dim + j]).abs() < 1e-10);
            }
        }
        // Many right-hand sides at once: each equals its own solve, bit for bit, in both forms.
        let many: Vec<f64> = (0..5 * dim)
            .map(|i| ((i * 3 % 13) as f64 - 6.0) / 4.0)
            .collect();
        for factor in [low.clone(), MetricFactor::Dense(full.clone())] {
            let mut together = vec![0.0; many.len()];
            factor.solve_many(&many, &mut together);
            for (b, got) in many.chunks_exact(dim).zip(together.chunks_exact(dim)) {
                let mut alone = vec![0.0; dim];
                factor.solve(b, &mut alone);
                assert_eq!(got, &alone[..]);
            }
        }
        // More rows than columns: the dense form.
        let tall: Vec<f64> = (0..9 * 3).map(|i| (i % 5) as f64).collect();
        let chosen =
            MetricFactor::choose(&[1.0; 3], tall.clone(), |rows| dense(&[1.0; 3], rows)).unwrap();
        assert!(matches!(chosen, MetricFactor::Dense(_)));
    }
}
