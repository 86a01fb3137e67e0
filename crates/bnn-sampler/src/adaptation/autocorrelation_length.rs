//! The last tuning phase of the microcanonical samplers: keep the positions of a run at fixed
//! parameters and measure how many transitions one effective sample costs.

use serde::{Deserialize, Serialize};

/// Positions kept transition after transition (every `stride`-th coordinate, as f32: at most
/// `max_coordinates` of them), and the mean autocorrelation time over the kept coordinates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KeptPositions {
    stride: usize,
    coordinates: usize,
    values: Vec<f32>,
    transitions: usize,
}

impl KeptPositions {
    pub fn new(dim: usize, max_coordinates: usize) -> Self {
        let stride = dim.div_ceil(max_coordinates.max(1)).max(1);
        Self {
            stride,
            coordinates: dim.div_ceil(stride),
            values: Vec::new(),
            transitions: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn push(&mut self, position: &[f64]) {
        self.values
            .extend(position.iter().step_by(self.stride).map(|&x| x as f32));
        self.transitions += 1;
    }

    /// `mean_i(transitions / ESS_i)` over the kept coordinates whose ESS is defined (single-chain
    /// ESS, Geyer's initial monotone sequence via bnn-diagnostics); `None` with fewer than 4
    /// transitions or no defined ESS. Frees the kept positions.
    pub fn take_transitions_per_effective_sample(&mut self) -> Option<f64> {
        let steps = self.transitions;
        let values = std::mem::take(&mut self.values);
        self.transitions = 0;
        if steps < 4 || values.len() != steps * self.coordinates {
            return None;
        }
        // Coordinates in blocks (an even number, so the slow mixers pair up in the FFT) to keep
        // the f64 copies small.
        const BLOCK: usize = 64;
        let mut sum = 0.0;
        let mut counted = 0usize;
        for first in (0..self.coordinates).step_by(BLOCK) {
            let block: Vec<Vec<f64>> = (first..(first + BLOCK).min(self.coordinates))
                .map(|j| {
                    (0..steps)
                        .map(|t| f64::from(values[t * self.coordinates + j]))
                        .collect()
                })
                .collect();
            for ess in bnn_diagnostics::ess_identity_each(&block) {
                if ess.is_finite() && ess > 0.0 {
                    sum += steps as f64 / ess;
                    counted += 1;
                }
            }
        }
        (counted > 0).then(|| sum / counted as f64)
    }
}
