//! Draws of one scalar quantity as a chains × draws matrix, and the split into half-chains.

/// Draws of one scalar, chain-major: row `j` holds chain `j`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChainMatrix {
    values: Vec<f64>,
    n_chains: usize,
    n_draws: usize,
}

impl ChainMatrix {
    /// Copies the chains into one buffer.
    ///
    /// # Panics
    /// If the chains have different lengths: the diagnostics are undefined for ragged input,
    /// and a silent NaN would hide the caller's bug.
    pub(crate) fn from_chains<C: AsRef<[f64]>>(chains: &[C]) -> Self {
        let n_draws = chains.first().map_or(0, |c| c.as_ref().len());
        let mut values = Vec::with_capacity(n_draws * chains.len());
        for (j, chain) in chains.iter().enumerate() {
            let chain = chain.as_ref();
            assert!(
                chain.len() == n_draws,
                "all chains must have the same number of draws: chain 0 has {n_draws}, chain {j} has {}",
                chain.len()
            );
            values.extend_from_slice(chain);
        }
        Self {
            values,
            n_chains: chains.len(),
            n_draws,
        }
    }

    /// Wraps chain-major `values` of shape `n_chains × n_draws`.
    pub(crate) fn from_values(values: Vec<f64>, n_chains: usize, n_draws: usize) -> Self {
        assert_eq!(
            values.len(),
            n_chains * n_draws,
            "values do not fill {n_chains} × {n_draws}"
        );
        Self {
            values,
            n_chains,
            n_draws,
        }
    }

    pub(crate) fn n_chains(&self) -> usize {
        self.n_chains
    }

    pub(crate) fn n_draws(&self) -> usize {
        self.n_draws
    }

    /// All draws, chain after chain.
    pub(crate) fn values(&self) -> &[f64] {
        &self.values
    }

    pub(crate) fn chain(&self, j: usize) -> &[f64] {
        &self.values[j * self.n_draws..(j + 1) * self.n_draws]
    }

    pub(crate) fn chains(&self) -> impl Iterator<Item = &[f64]> + '_ {
        (0..self.n_chains).map(move |j| self.chain(j))
    }

    pub(crate) fn has_nan(&self) -> bool {
        self.values.iter().any(|v| v.is_nan())
    }

    /// R-hat needs two chains of four draws and no NaN (ArviZ's `_rhat*` validity rule).
    pub(crate) fn supports_rhat(&self) -> bool {
        self.n_chains >= 2 && self.n_draws >= 4 && !self.has_nan()
    }

    /// ESS and MCSE need four draws (of the unsplit chains) and no NaN.
    pub(crate) fn supports_ess(&self) -> bool {
        self.n_chains >= 1 && self.n_draws >= 4 && !self.has_nan()
    }

    /// The same shape with new values.
    pub(crate) fn with_values(&self, values: Vec<f64>) -> Self {
        Self::from_values(values, self.n_chains, self.n_draws)
    }

    /// Applies `f` to every draw.
    pub(crate) fn map(&self, f: impl Fn(f64) -> f64) -> Self {
        self.with_values(self.values.iter().map(|&v| f(v)).collect())
    }

    /// The `2M × ⌊N/2⌋` matrix of first and second halves (Vehtari et al. 2021, split-R̂):
    /// chain j's first half becomes row j, its second half row M + j. For odd N the middle draw
    /// `N / 2` of every chain is dropped, as in ArviZ and posterior.
    pub(crate) fn split_halves(&self) -> Self {
        self.split_halves_with(|v| v)
    }

    /// [`Self::split_halves`] of `f` applied to every draw, without the intermediate matrix.
    pub(crate) fn split_halves_with(&self, f: impl Fn(f64) -> f64) -> Self {
        let half = self.n_draws / 2;
        let mut values = Vec::with_capacity(2 * half * self.n_chains);
        for chain in self.chains() {
            values.extend(chain[..half].iter().map(|&v| f(v)));
        }
        for chain in self.chains() {
            values.extend(chain[self.n_draws - half..].iter().map(|&v| f(v)));
        }
        Self::from_values(values, 2 * self.n_chains, half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_drops_the_middle_draw_of_odd_chains() {
        let x = ChainMatrix::from_chains(&[
            vec![0.0, 1.0, 2.0, 3.0, 4.0],
            vec![5.0, 6.0, 7.0, 8.0, 9.0],
        ]);
        let split = x.split_halves();
        assert_eq!((split.n_chains(), split.n_draws()), (4, 2));
        assert_eq!(split.values(), &[0.0, 1.0, 5.0, 6.0, 3.0, 4.0, 8.0, 9.0]);
    }

    #[test]
    fn validity_rules_follow_arviz() {
        let short = ChainMatrix::from_chains(&[vec![1.0, 2.0, 3.0], vec![1.0, 2.0, 3.0]]);
        assert!(!short.supports_rhat() && !short.supports_ess());
        let single = ChainMatrix::from_chains(&[vec![1.0, 2.0, 3.0, 4.0]]);
        assert!(!single.supports_rhat() && single.supports_ess());
        let with_nan = ChainMatrix::from_chains(&[vec![1.0, f64::NAN, 3.0, 4.0], vec![1.0; 4]]);
        assert!(!with_nan.supports_rhat() && !with_nan.supports_ess());
        let empty = ChainMatrix::from_chains::<Vec<f64>>(&[]);
        assert!(!empty.supports_ess() && empty.chains().next().is_none());
    }

    #[test]
    #[should_panic(expected = "same number of draws")]
    fn ragged_chains_are_rejected() {
        ChainMatrix::from_chains(&[vec![1.0, 2.0], vec![1.0]]);
    }
}
