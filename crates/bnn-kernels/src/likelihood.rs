//! Likelihood heads: log p(y | outputs) and its derivative with respect to the outputs.

use crate::real::Real;
use crate::spec::KernelHead;

const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_8;

/// Value of a head, and the derivatives with respect to the sampled log σ of each target
/// column (empty for the other heads).
pub(crate) struct HeadValue {
    pub log_likelihood: f64,
    pub d_log_sigma: Vec<f64>,
}

/// The network's outputs and targets for one evaluation.
pub(crate) struct HeadInput<'a, R> {
    /// `[N, K]` row major.
    pub outputs: &'a [R],
    /// `[N, T]` row major (one-hot `[N, K]` for the categorical head).
    pub targets: &'a [R],
    pub rows: usize,
    pub outputs_per_row: usize,
    pub target_columns: usize,
    /// θ's log σ of each target column (`[T]`), for the learned-σ head.
    pub log_sigma: Option<&'a [R]>,
}

/// Evaluates the head; when `d_outputs` is given it receives ∂ log p / ∂ outputs (`[N, K]`).
#[inline(always)]
pub(crate) fn evaluate<R: Real>(
    head: KernelHead,
    input: &HeadInput<R>,
    mut d_outputs: Option<&mut [R]>,
) -> HeadValue {
    let (n, k, t) = (input.rows, input.outputs_per_row, input.target_columns);
    let out = input.outputs;
    let y = input.targets;
    match head {
        KernelHead::Heteroscedastic {
            softplus,
            sigma_min,
            sigma_max,
        } => {
            let mut total = 0.0f64;
            for i in 0..n {
                let mut row_total = R::ZERO;
                for j in 0..t {
                    let mean = out[i * k + j];
                    let raw = out[i * k + t + j];
                    // log σ and d log σ / d raw (zero where the clip is active, as in autodiff).
                    let (log_sd, d_log_sd) = if softplus {
                        softplus_log_sd(raw, sigma_min, sigma_max)
                    } else {
                        let (lo, hi) = (R::from_f64(sigma_min.ln()), R::from_f64(sigma_max.ln()));
                        let inside = if raw >= lo && raw <= hi {
                            R::ONE
                        } else {
                            R::ZERO
                        };
                        (raw.max(lo).min(hi), inside)
                    };
                    let inv_sd = (-log_sd).exp();
                    let z = (y[i * t + j] - mean) * inv_sd;
                    row_total += R::from_f64(-0.5) * z * z - log_sd;
                    if let Some(d) = d_outputs.as_deref_mut() {
                        d[i * k + j] = z * inv_sd;
                        d[i * k + t + j] = (z * z - R::ONE) * d_log_sd;
                    }
                }
                total += row_total.to_f64();
            }
            HeadValue {
                log_likelihood: total - HALF_LOG_2PI * (n * t) as f64,
                d_log_sigma: Vec::new(),
            }
        }
        KernelHead::Fixed { sigma } => {
            let precision = R::from_f64(1.0 / (sigma * sigma));
            let squares = residual_squares(0.0, out, y, d_outputs, precision);
            HeadValue {
                log_likelihood: fixed_sigma_log_likelihood(squares, n * t, sigma),
                d_log_sigma: Vec::new(),
            }
        }
        KernelHead::LearnedSigma {
            prior_mean,
            prior_sd,
            ..
        } => {
            // One σ per target column: σ_t² scales column t's residuals only.
            let log_sigma = input
                .log_sigma
                .expect("the learned-σ head reads log σ from θ");
            let precision: Vec<f64> = log_sigma
                .iter()
                .map(|s| (-2.0 * s.to_f64()).exp())
                .collect();
            let squares = column_residual_squares(out, y, t, d_outputs, &precision);
            let count = n as f64;
            let mut log_likelihood = 0.0;
            let mut d_log_sigma = Vec::with_capacity(t);
            for ((s, &precision), squares) in log_sigma.iter().zip(&precision).zip(squares) {
                let s = s.to_f64();
                let z = (s - prior_mean) / prior_sd;
                log_likelihood += -0.5 * squares * precision
                    - count * (s + HALF_LOG_2PI)
                    - 0.5 * z * z
                    - prior_sd.ln()
                    - HALF_LOG_2PI;
                d_log_sigma.push(squares * precision - count - z / prior_sd);
            }
            HeadValue {
                log_likelihood,
                d_log_sigma,
            }
        }
        KernelHead::Categorical => {
            let mut total = 0.0f64;
            for i in 0..n {
                let row = &out[i * k..(i + 1) * k];
                let labels = &y[i * k..(i + 1) * k];
                let max = row.iter().fold(row[0], |m, &v| m.max(v));
                let sum_exp: f64 = row.iter().map(|&v| (v - max).exp().to_f64()).sum();
                let log_norm = max.to_f64() + sum_exp.ln();
                let mut label_mass = 0.0f64;
                for (&v, &l) in row.iter().zip(labels) {
                    total += l.to_f64() * (v.to_f64() - log_norm);
                    label_mass += l.to_f64();
                }
                if let Some(d) = d_outputs.as_deref_mut() {
                    for c in 0..k {
                        let p = (row[c].to_f64() - log_norm).exp();
                        d[i * k + c] = R::from_f64(labels[c].to_f64() - label_mass * p);
                    }
                }
            }
            HeadValue {
                log_likelihood: total,
                d_log_sigma: Vec::new(),
            }
        }
    }
}

/// The fixed-σ head's log likelihood of `count` residuals whose squares sum to `squares`.
#[inline(always)]
pub(crate) fn fixed_sigma_log_likelihood(squares: f64, count: usize, sigma: f64) -> f64 {
    -0.5 * squares / (sigma * sigma) - count as f64 * (sigma.ln() + HALF_LOG_2PI)
}

/// `start` + Σ (y − f)², row after row, writing `precision · (y − f)` into `d_outputs` when
/// given. The running sum may start from an earlier chunk's: chunks then add the same numbers
/// in the same order as one pass.
#[inline(always)]
pub(crate) fn residual_squares<R: Real>(
    start: f64,
    out: &[R],
    y: &[R],
    d_outputs: Option<&mut [R]>,
    precision: R,
) -> f64 {
    // Accumulated in f64: thousands of f32 squares would otherwise lose ~1e-6 relative.
    let mut total = start;
    match d_outputs {
        Some(d) => {
            for ((d, &f), &y) in d.iter_mut().zip(out).zip(y) {
                let r = y - f;
                total += (r * r).to_f64();
                *d = r * precision;
            }
        }
        None => {
            for (&f, &y) in out.iter().zip(y) {
                let r = y - f;
                total += (r * r).to_f64();
            }
        }
    }
    total
}

/// Σ_i (y_it − f_it)² per column t of `[N, T]` rows, writing `precision_t · (y − f)` into
/// `d_outputs` when given. One column is [`residual_squares`] itself (same order, same bits).
#[inline(always)]
fn column_residual_squares<R: Real>(
    out: &[R],
    y: &[R],
    columns: usize,
    d_outputs: Option<&mut [R]>,
    precision: &[f64],
) -> Vec<f64> {
    if columns == 1 {
        return vec![residual_squares(
            0.0,
            out,
            y,
            d_outputs,
            R::from_f64(precision[0]),
        )];
    }
    let mut totals = vec![0.0f64; columns];
    let scale: Vec<R> = precision.iter().map(|&p| R::from_f64(p)).collect();
    match d_outputs {
        Some(d) => {
            for ((d, f), y) in d
                .chunks_exact_mut(columns)
                .zip(out.chunks_exact(columns))
                .zip(y.chunks_exact(columns))
            {
                for t in 0..columns {
                    let r = y[t] - f[t];
                    totals[t] += (r * r).to_f64();
                    d[t] = r * scale[t];
                }
            }
        }
        None => {
            for (f, y) in out.chunks_exact(columns).zip(y.chunks_exact(columns)) {
                for t in 0..columns {
                    let r = y[t] - f[t];
                    totals[t] += (r * r).to_f64();
                }
            }
        }
    }
    totals
}

/// log clamp(softplus(raw), σ_min, σ_max) and its derivative (computed in f64: this link is
/// rare and the head is a small part of the cost).
#[inline(always)]
fn softplus_log_sd<R: Real>(raw: R, sigma_min: f64, sigma_max: f64) -> (R, R) {
    let x = raw.to_f64();
    let softplus = x.max(0.0) + (-x.abs()).exp().ln_1p();
    let inside = softplus >= sigma_min && softplus <= sigma_max;
    let sd = softplus.clamp(sigma_min, sigma_max);
    let logistic = 1.0 / (1.0 + (-x).exp());
    let d = if inside { logistic / sd } else { 0.0 };
    (R::from_f64(sd.ln()), R::from_f64(d))
}
