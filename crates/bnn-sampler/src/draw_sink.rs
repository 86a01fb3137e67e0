//! Where draws go as they are produced: the `DrawSink` trait and the in-memory `CollectedDraws`.

use crate::chain::ChainState;
use crate::draw_stats::DrawStats;

/// Error type a sink may return; it stops the run.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// One draw as the runner hands it out.
#[derive(Clone, Copy, Debug)]
pub struct Draw<'a> {
    pub chain: usize,
    /// Index within its phase: warmup draws count from 0, sampling draws count from 0 again.
    pub index: usize,
    pub warmup: bool,
    pub position: &'a [f64],
    pub stats: &'a DrawStats,
    /// The chain's complete state right after this transition (what a checkpoint saves: resuming
    /// from it continues with the next draw).
    pub state: &'a ChainState,
}

/// Receives every draw (warmup and sampling) as soon as it is made, so storage can stream to disk
/// instead of holding all draws in memory. Draws of one chain arrive in order; draws of
/// different chains interleave arbitrarily when chains run on several threads.
pub trait DrawSink {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError>;

    /// Whether `chain` should stop before its planned number of draws (for example because its
    /// expanding-window LPPD has converged). Asked after every draw; the default never stops.
    fn chain_finished(&self, _chain: usize) -> bool {
        false
    }
}

/// The draws of one chain, positions row-major `[n, D]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChainDraws {
    pub positions: Vec<f64>,
    pub stats: Vec<DrawStats>,
    pub warmup_positions: Vec<f64>,
    pub warmup_stats: Vec<DrawStats>,
}

/// Keeps every sampling draw (and optionally the warmup draws) in memory: for tests and small runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectedDraws {
    dim: usize,
    keep_warmup: bool,
    chains: Vec<ChainDraws>,
}

impl CollectedDraws {
    pub fn new(num_chains: usize, dim: usize) -> Self {
        Self {
            dim,
            keep_warmup: false,
            chains: vec![ChainDraws::default(); num_chains],
        }
    }

    /// Also keep the warmup draws.
    pub fn with_warmup(mut self, keep_warmup: bool) -> Self {
        self.keep_warmup = keep_warmup;
        self
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn num_chains(&self) -> usize {
        self.chains.len()
    }

    pub fn chain(&self, chain: usize) -> &ChainDraws {
        &self.chains[chain]
    }

    /// Number of sampling draws of `chain`.
    pub fn num_draws(&self, chain: usize) -> usize {
        self.chains[chain].stats.len()
    }

    /// Sampling draw `index` of `chain`.
    pub fn draw(&self, chain: usize, index: usize) -> &[f64] {
        &self.chains[chain].positions[index * self.dim..(index + 1) * self.dim]
    }

    pub fn stats(&self, chain: usize) -> &[DrawStats] {
        &self.chains[chain].stats
    }

    /// Every sampling draw as its own vector, chains one after another (e.g. to load each into
    /// a module for predictions).
    pub fn positions(&self) -> Vec<Vec<f64>> {
        self.chains
            .iter()
            .flat_map(|chain| chain.positions.chunks(self.dim.max(1)).map(<[f64]>::to_vec))
            .collect()
    }

    /// `f(position)` for every sampling draw, one series per chain (the input format of the
    /// convergence diagnostics).
    pub fn map<F: Fn(&[f64]) -> f64>(&self, f: F) -> Vec<Vec<f64>> {
        self.chains
            .iter()
            .map(|chain| {
                chain
                    .positions
                    .chunks_exact(self.dim.max(1))
                    .map(&f)
                    .collect()
            })
            .collect()
    }

    /// Coordinate `d` of every sampling draw, one series per chain.
    pub fn coordinate(&self, d: usize) -> Vec<Vec<f64>> {
        self.map(|position| position[d])
    }

    /// A statistic of every sampling draw, one series per chain.
    pub fn stat<F: Fn(&DrawStats) -> f64>(&self, f: F) -> Vec<Vec<f64>> {
        self.chains
            .iter()
            .map(|chain| chain.stats.iter().map(&f).collect())
            .collect()
    }
}

impl DrawSink for CollectedDraws {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
        if draw.position.len() != self.dim {
            return Err(format!(
                "draw has {} coordinates, the collector expects {}",
                draw.position.len(),
                self.dim
            )
            .into());
        }
        if draw.chain >= self.chains.len() {
            self.chains.resize(draw.chain + 1, ChainDraws::default());
        }
        let chain = &mut self.chains[draw.chain];
        if draw.warmup {
            if self.keep_warmup {
                chain.warmup_positions.extend_from_slice(draw.position);
                chain.warmup_stats.push(*draw.stats);
            }
        } else {
            chain.positions.extend_from_slice(draw.position);
            chain.stats.push(*draw.stats);
        }
        Ok(())
    }
}
