//! Autocovariances of chains about their own means, pooled over chains for the ESS.
//!
//! Geyer's initial sequence usually stops after a few lags for a well-mixing chain, so lags are
//! computed directly and lazily at first (O(M·N) each). Once a chain turns out to need many lags,
//! every lag is computed at once with an FFT (O(M·N log N)), which bounds the cost for slowly
//! mixing chains, where BNN samplers spend most of their time.

use crate::chain_matrix::ChainMatrix;
use crate::fft::{Complex, Radix2Fft};
use crate::sample_moments::mean;

/// Biased autocovariance `γ(t) = (1/n) Σ_{i<n−t} (x_i − x̄)(x_{i+t} − x̄)` of one chain for every
/// lag `t = 0..n`, as in ArviZ's `autocov` (the `1/n` keeps the sequence positive definite).
pub fn autocovariance(chain: &[f64]) -> Vec<f64> {
    if chain.is_empty() {
        return Vec::new();
    }
    let matrix = ChainMatrix::from_values(chain.to_vec(), 1, chain.len());
    PooledAutocovariance::new(&matrix).all_lags()
}

/// The mean over chains of each chain's biased autocovariance, `(1/M) Σ_j γ_j(t)`, computed on
/// demand.
pub(crate) struct PooledAutocovariance {
    centered: ChainMatrix,
    chain_means: Vec<f64>,
    /// Lags `0..lags.len()` computed so far.
    lags: Vec<f64>,
    /// Every lag is known (the FFT ran).
    complete: bool,
    /// Beyond this lag the FFT is cheaper than continuing lag by lag.
    direct_lag_limit: usize,
}

impl PooledAutocovariance {
    pub(crate) fn new(y: &ChainMatrix) -> Self {
        let chain_means: Vec<f64> = y.chains().map(mean).collect();
        let mut centered = Vec::with_capacity(y.values().len());
        for (chain, &chain_mean) in y.chains().zip(&chain_means) {
            centered.extend(chain.iter().map(|&v| v - chain_mean));
        }
        let centered = ChainMatrix::from_values(centered, y.n_chains(), y.n_draws());
        // Direct lags cost M·N each; the FFT costs about (M/2 + 1) transforms of 2N..4N points,
        // ~5 · size · log2(size) flops each. Timing 500 × 12 × 1000 summaries put the
        // break-even near 2 log2(size) lags (20 for 500-draw split chains).
        let fft_size = fft_size_for(y.n_draws());
        let direct_lag_limit = 2 * fft_size.trailing_zeros() as usize;
        Self {
            centered,
            chain_means,
            lags: Vec::new(),
            complete: false,
            direct_lag_limit,
        }
    }

    pub(crate) fn chain_means(&self) -> &[f64] {
        &self.chain_means
    }

    /// `(1/M) Σ_j γ_j(lag)`, for `lag < n_draws`.
    pub(crate) fn at(&mut self, lag: usize) -> f64 {
        while lag >= self.lags.len() && !self.complete {
            if self.lags.len() >= self.direct_lag_limit {
                self.lags = self.fft_all_lags();
                self.complete = true;
            } else {
                // Geyer's sequence asks for lags in pairs; one pass over the draws serves both.
                let first = self.lags.len();
                let (at_first, at_next) = self.direct_lag_pair(first);
                self.lags.push(at_first);
                if first + 1 < self.centered.n_draws() {
                    self.lags.push(at_next);
                }
            }
        }
        self.lags[lag]
    }

    /// As [`Self::at`] while the lag is within the direct-lag range; `None` where `at` would run
    /// the FFT (for callers that batch the transforms of many series: [`single_chain_lags`]).
    pub(crate) fn at_direct(&mut self, lag: usize) -> Option<f64> {
        if lag >= self.lags.len() && !self.complete && lag >= self.direct_lag_limit {
            return None;
        }
        Some(self.at(lag))
    }

    /// The draws about their chain's mean, chain after chain.
    pub(crate) fn centered(&self) -> &[f64] {
        self.centered.values()
    }

    fn all_lags(self) -> Vec<f64> {
        if self.centered.n_draws() > self.direct_lag_limit {
            self.fft_all_lags()
        } else {
            (0..self.centered.n_draws())
                .map(|lag| self.direct_lag(lag))
                .collect()
        }
    }

    fn direct_lag(&self, lag: usize) -> f64 {
        self.direct_lag_pair(lag).0
    }

    /// Lags `lag` and `lag + 1` (the second is 0 when `lag + 1 = n`).
    fn direct_lag_pair(&self, lag: usize) -> (f64, f64) {
        let n = self.centered.n_draws();
        let (mut first, mut second) = (0.0, 0.0);
        for chain in self.centered.chains() {
            let (a, b) = lagged_dot_pair(chain, lag);
            first += a;
            second += b;
        }
        let scale = n as f64 * self.centered.n_chains() as f64;
        (first / scale, second / scale)
    }

    /// Wiener–Khinchin: the autocorrelation sum is the inverse transform of the power spectrum,
    /// zero-padded to at least 2N − 1 points so that the circular correlation equals the linear.
    /// Two real chains share one complex transform (as real and imaginary part): for
    /// `z = x + i y`, `|X_k|² + |Y_k|² = (|Z_k|² + |Z_{−k}|²) / 2`, and only the sum over chains
    /// is needed, so one inverse transform serves all chains.
    fn fft_all_lags(&self) -> Vec<f64> {
        let n = self.centered.n_draws();
        let size = fft_size_for(n);
        let fft = Radix2Fft::new(size);
        let mut power = vec![0.0; size];
        let mut buffer = vec![Complex::default(); size];
        let chains: Vec<&[f64]> = self.centered.chains().collect();
        for pair in chains.chunks(2) {
            buffer.fill(Complex::default());
            for (i, slot) in buffer.iter_mut().take(n).enumerate() {
                slot.re = pair[0][i];
                slot.im = pair.get(1).map_or(0.0, |second| second[i]);
            }
            fft.forward(&mut buffer);
            for (k, total) in power.iter_mut().enumerate() {
                let mirror = (size - k) % size;
                *total += 0.5 * (buffer[k].norm_squared() + buffer[mirror].norm_squared());
            }
        }
        for (slot, &p) in buffer.iter_mut().zip(&power) {
            *slot = Complex::new(p, 0.0);
        }
        fft.inverse_unscaled(&mut buffer);
        let scale = size as f64 * n as f64 * self.centered.n_chains() as f64;
        buffer[..n].iter().map(|c| c.re / scale).collect()
    }
}

/// Every lag of the biased autocovariance of one or two centered single chains of the same
/// length through one forward and one inverse transform: `z = a + i b` gives
/// `A_k = (Z_k + conj Z_{−k}) / 2` and `B_k = (Z_k − conj Z_{−k}) / 2i`, and since both power
/// spectra are real and even, `|A|² + i |B|²` transforms back to `γ_a + i γ_b`. Half the work of
/// two separate single-chain transforms. `fft` must be planned for `fft_size_for(a.len())`.
pub(crate) fn single_chain_lags(
    a: &[f64],
    b: Option<&[f64]>,
    fft: &Radix2Fft,
    buffer: &mut Vec<Complex>,
) -> (Vec<f64>, Option<Vec<f64>>) {
    let n = a.len();
    let size = fft_size_for(n);
    buffer.clear();
    buffer.resize(size, Complex::default());
    for (i, slot) in buffer.iter_mut().take(n).enumerate() {
        slot.re = a[i];
        slot.im = b.map_or(0.0, |b| b[i]);
    }
    fft.forward(buffer);
    let spectra: Vec<Complex> = (0..size)
        .map(|k| {
            let (z, mirror) = (buffer[k], buffer[(size - k) % size]);
            // 4|A_k|² = |Z_k + conj Z_{−k}|², 4|B_k|² = |Z_k − conj Z_{−k}|².
            let power_a = Complex::new(z.re + mirror.re, z.im - mirror.im).norm_squared();
            let power_b = Complex::new(z.re - mirror.re, z.im + mirror.im).norm_squared();
            Complex::new(0.25 * power_a, 0.25 * power_b)
        })
        .collect();
    buffer.copy_from_slice(&spectra);
    fft.inverse_unscaled(buffer);
    let scale = size as f64 * n as f64;
    let lags_a = buffer[..n].iter().map(|c| c.re / scale).collect();
    let lags_b = b.map(|_| buffer[..n].iter().map(|c| c.im / scale).collect());
    (lags_a, lags_b)
}

pub(crate) fn fft_size_for(n_draws: usize) -> usize {
    (2 * n_draws.max(1)).next_power_of_two()
}

/// `(Σ_i c_i c_{i+lag}, Σ_i c_i c_{i+lag+1})` in one pass, with independent accumulators so
/// that the loop pipelines (and vectorizes).
fn lagged_dot_pair(chain: &[f64], lag: usize) -> (f64, f64) {
    let n = chain.len();
    if lag + 1 >= n {
        let single = if lag < n { chain[0] * chain[lag] } else { 0.0 };
        return (single, 0.0);
    }
    // Both sums run over i < n − lag − 1; the first has one more term, added at the end.
    let count = n - lag - 1;
    let (base, near, far) = (
        &chain[..count],
        &chain[lag..lag + count],
        &chain[lag + 1..lag + 1 + count],
    );
    let mut first = [0.0; 4];
    let mut second = [0.0; 4];
    let blocks = count / 4 * 4;
    for i in (0..blocks).step_by(4) {
        for k in 0..4 {
            first[k] += base[i + k] * near[i + k];
            second[k] += base[i + k] * far[i + k];
        }
    }
    let (mut first_tail, mut second_tail) = (0.0, 0.0);
    for i in blocks..count {
        first_tail += base[i] * near[i];
        second_tail += base[i] * far[i];
    }
    first_tail += chain[count] * chain[n - 1];
    (
        (first[0] + first[1]) + (first[2] + first[3]) + first_tail,
        (second[0] + second[1]) + (second[2] + second[3]) + second_tail,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(chain: &[f64]) -> Vec<f64> {
        let n = chain.len();
        let m = chain.iter().sum::<f64>() / n as f64;
        (0..n)
            .map(|t| {
                (0..n - t)
                    .map(|i| (chain[i] - m) * (chain[i + t] - m))
                    .sum::<f64>()
                    / n as f64
            })
            .collect()
    }

    fn test_chain(n: usize, seed: f64) -> Vec<f64> {
        // A deterministic, autocorrelated, non-periodic sequence.
        let mut state = 0.0;
        (0..n)
            .map(|i| {
                state = 0.8 * state + ((i as f64 * seed).sin() * 1e4).fract();
                state
            })
            .collect()
    }

    #[test]
    fn fft_and_direct_lags_agree_with_the_definition() {
        for n in [1, 2, 5, 16, 17, 300] {
            let chain = test_chain(n, 1.3);
            let expected = naive(&chain);
            let matrix = ChainMatrix::from_values(chain.clone(), 1, n);
            let pooled = PooledAutocovariance::new(&matrix);
            let via_fft = pooled.fft_all_lags();
            let direct: Vec<f64> = (0..n).map(|t| pooled.direct_lag(t)).collect();
            for t in 0..n {
                let scale = expected[0].abs().max(1e-300);
                assert!(
                    (via_fft[t] - expected[t]).abs() < 1e-13 * scale,
                    "n={n} t={t} fft"
                );
                assert!(
                    (direct[t] - expected[t]).abs() < 1e-13 * scale,
                    "n={n} t={t} direct"
                );
            }
            assert_eq!(autocovariance(&chain).len(), n);
        }
    }

    #[test]
    fn pooled_lags_average_the_chains_across_the_fft_switch() {
        let chains: Vec<Vec<f64>> = (0..3).map(|j| test_chain(200, 0.7 + j as f64)).collect();
        let singles: Vec<Vec<f64>> = chains.iter().map(|c| naive(c)).collect();
        let mut pooled = PooledAutocovariance::new(&ChainMatrix::from_chains(&chains));
        for t in 0..200 {
            let expected = (singles[0][t] + singles[1][t] + singles[2][t]) / 3.0;
            assert!(
                (pooled.at(t) - expected).abs() < 1e-13 * singles[0][0],
                "lag {t}"
            );
        }
        assert!(pooled.complete, "200 lags must have switched to the FFT");
    }
}
