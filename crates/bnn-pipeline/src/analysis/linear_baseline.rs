//! The linear-model baseline of the report: ordinary least squares with an intercept on the
//! standardized training data and a Gaussian noise model with the residual (maximum likelihood)
//! variance. A chain that predicts worse than this is flagged.

use bnn_model::HostData;

pub struct LinearBaseline {
    /// `[(x_cols + 1) × y_cols]`, intercept first.
    coefficients: Vec<f64>,
    sigma: Vec<f64>,
    x_cols: usize,
    y_cols: usize,
}

/// Test metrics of the baseline (standardized scale).
pub struct LinearMetrics {
    pub rmse: f64,
    pub lppd: f64,
}

impl LinearBaseline {
    /// Least squares via the normal equations (Cholesky, with a 1e-8 ridge for collinear columns).
    pub fn fit(train: &HostData) -> Option<Self> {
        let (n, p, t) = (train.rows, train.x_cols + 1, train.y_cols);
        if n <= p {
            return None;
        }
        let row = |i: usize| {
            std::iter::once(1.0).chain(
                train.x[i * train.x_cols..(i + 1) * train.x_cols]
                    .iter()
                    .copied(),
            )
        };
        let mut gram = vec![0.0; p * p];
        let mut rhs = vec![0.0; p * t];
        for i in 0..n {
            let xi: Vec<f64> = row(i).collect();
            for a in 0..p {
                for b in 0..p {
                    gram[a * p + b] += xi[a] * xi[b];
                }
                for k in 0..t {
                    rhs[a * t + k] += xi[a] * train.y[i * t + k];
                }
            }
        }
        for a in 0..p {
            gram[a * p + a] += 1e-8 * n as f64;
        }
        let chol = cholesky(&gram, p)?;
        let mut coefficients = vec![0.0; p * t];
        for k in 0..t {
            let b: Vec<f64> = (0..p).map(|a| rhs[a * t + k]).collect();
            let solution = cholesky_solve(&chol, p, &b);
            for a in 0..p {
                coefficients[a * t + k] = solution[a];
            }
        }
        let mut this = Self {
            coefficients,
            sigma: vec![1.0; t],
            x_cols: train.x_cols,
            y_cols: t,
        };
        let mut sq = vec![0.0; t];
        for i in 0..n {
            let pred = this.predict_row(&train.x[i * train.x_cols..(i + 1) * train.x_cols]);
            for k in 0..t {
                sq[k] += (train.y[i * t + k] - pred[k]).powi(2);
            }
        }
        this.sigma = sq.iter().map(|s| (s / n as f64).sqrt().max(1e-6)).collect();
        Some(this)
    }

    fn predict_row(&self, x: &[f64]) -> Vec<f64> {
        (0..self.y_cols)
            .map(|k| {
                self.coefficients[k]
                    + x.iter()
                        .enumerate()
                        .map(|(j, xj)| xj * self.coefficients[(j + 1) * self.y_cols + k])
                        .sum::<f64>()
            })
            .collect()
    }

    pub fn evaluate(&self, test: &HostData) -> LinearMetrics {
        let t = self.y_cols;
        let (mut sq, mut loglik) = (0.0, 0.0);
        for i in 0..test.rows {
            let pred = self.predict_row(&test.x[i * self.x_cols..(i + 1) * self.x_cols]);
            for k in 0..t {
                let r = test.y[i * t + k] - pred[k];
                sq += r * r;
                let s = self.sigma[k];
                loglik += -0.5 * (r / s).powi(2) - s.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
            }
        }
        LinearMetrics {
            rmse: (sq / (test.rows * t) as f64).sqrt(),
            lppd: loglik / test.rows as f64,
        }
    }
}

fn cholesky(a: &[f64], p: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; p * p];
    for i in 0..p {
        for j in 0..=i {
            let s: f64 = a[i * p + j] - (0..j).map(|k| l[i * p + k] * l[j * p + k]).sum::<f64>();
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i * p + i] = s.sqrt();
            } else {
                l[i * p + j] = s / l[j * p + j];
            }
        }
    }
    Some(l)
}

fn cholesky_solve(l: &[f64], p: usize, b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; p];
    for i in 0..p {
        z[i] = (b[i] - (0..i).map(|k| l[i * p + k] * z[k]).sum::<f64>()) / l[i * p + i];
    }
    let mut x = vec![0.0; p];
    for i in (0..p).rev() {
        x[i] = (z[i] - (i + 1..p).map(|k| l[k * p + i] * x[k]).sum::<f64>()) / l[i * p + i];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_an_exact_linear_relation_and_its_noise() {
        // y = 1 + 2 x0 − x1 + noise with sd 0.5 (deterministic pseudo-noise).
        let n = 400;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let (a, b) = ((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos());
            let noise = 0.5 * if i % 2 == 0 { 1.0 } else { -1.0 };
            x.extend([a, b]);
            y.push(1.0 + 2.0 * a - b + noise);
        }
        let data = HostData::new(x, n, 2, y, 1);
        let fit = LinearBaseline::fit(&data).unwrap();
        assert!(
            (fit.coefficients[0] - 1.0).abs() < 0.05
                && (fit.coefficients[1] - 2.0).abs() < 0.05
                && (fit.coefficients[2] + 1.0).abs() < 0.05
        );
        assert!((fit.sigma[0] - 0.5).abs() < 0.02, "{}", fit.sigma[0]);
        let m = fit.evaluate(&data);
        assert!((m.rmse - 0.5).abs() < 0.02);
        // Gaussian log density at |r| ≈ σ: −0.5 − ln σ − 0.5 ln 2π.
        assert!(
            (m.lppd - (-0.5 - 0.5f64.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln())).abs() < 0.05,
            "{}",
            m.lppd
        );
    }
}
