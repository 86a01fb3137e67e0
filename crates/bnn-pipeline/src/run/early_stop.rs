//! Early stopping of converged chains during sampling (off by default): each kept draw updates
//! the chain's expanding-window test LPPD (Sommer et al. 2024, Eq. 8), and the chain ends once
//! the last ϖ values have settled within ε (Eq. 9).

use anyhow::Result;
use bnn_diagnostics::{CumulativeLppd, LppdConvergence};

/// Pointwise test log-likelihoods `log p(y_i | θ)` of one parameter vector.
pub type PointwiseLogLikelihood<'a> = Box<dyn Fn(&[f64]) -> Result<Vec<f64>> + Send + 'a>;

pub struct EarlyStop<'a> {
    rule: LppdConvergence,
    pointwise: PointwiseLogLikelihood<'a>,
    chains: Vec<(CumulativeLppd, Vec<f64>)>,
}

impl<'a> EarlyStop<'a> {
    pub fn new(
        rule: LppdConvergence,
        n_test: usize,
        chains: usize,
        pointwise: PointwiseLogLikelihood<'a>,
    ) -> Self {
        Self {
            rule,
            pointwise,
            chains: (0..chains)
                .map(|_| (CumulativeLppd::new(n_test), Vec::new()))
                .collect(),
        }
    }

    /// Adds a kept draw of `chain`; true once the chain has converged. The draw is rounded to
    /// f32 first, as it is stored, so replaying the stored draws after a resume reaches the same
    /// decision at the same draw.
    pub fn observe(&mut self, chain: usize, position: &[f64]) -> Result<bool> {
        let stored: Vec<f64> = position.iter().map(|&v| f64::from(v as f32)).collect();
        let pointwise = (self.pointwise)(&stored)?;
        let (lppd, history) = &mut self.chains[chain];
        history.push(lppd.push(&pointwise));
        Ok(self.rule.is_converged(history))
    }
}
