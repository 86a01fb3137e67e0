//! Per chain: how its warmup ended, and whether its draws look stationary (in `summary.json` and
//! `bnn diagnose`).

use crate::storage::run_dir::RunDir;
use crate::storage::stored_chains::stored_checkpoint;
use anyhow::{Context, Result};
use bnn_sampler::{BurnInEnd, WarmupCheck, WarmupEnd};
use serde::Serialize;
use std::path::Path;

/// A chain is called stationary when at most this share of its draws diverged...
pub const MAX_DIVERGENT_SHARE: f64 = 0.10;
/// ...and its mean acceptance in the last tenth of its draws is within this of the first tenth's.
pub const MAX_ACCEPT_CHANGE: f64 = 0.1;

/// One chain's warmup and the stationarity of its draws.
#[derive(Debug, Clone, Serialize)]
pub struct ChainStationarity {
    pub chain: usize,
    /// Warmup iterations the chain ran (rows of its adaptation file).
    pub warmup_iterations: usize,
    /// `planned` (the fixed policy, or a sampler with its own tuner), `stationary` (a check at
    /// the final step size and metric passed) or `cap` (the stationary policy's `max_warmup`);
    /// `unknown (no checkpoint)` where the chain's checkpoint is gone.
    pub warmup_ended: &'static str,
    /// The stationary policy's check windows, in order (empty for the fixed policy).
    pub warmup_checks: Vec<WarmupCheck>,
    pub draws: usize,
    pub divergent_draws: usize,
    pub accept_first_tenth: f64,
    pub accept_last_tenth: f64,
    /// `stationary`, or what failed: `divergent` (> 10% of the draws), `acceptance drift`
    /// (first and last tenth differ by more than 0.1), or both joined by `, `.
    pub verdict: String,
}

impl ChainStationarity {
    pub fn is_stationary(&self) -> bool {
        self.verdict == "stationary"
    }
}

/// Every chain of a run directory, from its draws and adaptation files and its checkpoint; empty
/// when the draws carry no sampler statistics or a chain has fewer than 20 draws.
pub fn chain_stationarity(dir: &RunDir, chains: usize) -> Result<Vec<ChainStationarity>> {
    let mut verdicts = Vec::with_capacity(chains);
    for chain in 0..chains {
        if !dir.draws(chain).exists() {
            // A shard's directory holds some of the chains.
            continue;
        }
        let Some(transitions) = transitions(&dir.draws(chain))? else {
            return Ok(Vec::new());
        };
        if transitions.len() < 20 {
            return Ok(Vec::new());
        }
        let warmup_iterations = match std::fs::read_to_string(dir.adaptation(chain)) {
            Ok(text) => text.lines().count().saturating_sub(1),
            Err(_) => 0,
        };
        let checkpoint = stored_checkpoint(dir, chain)?;
        // An ensemble's burn-in (LAPS) ends by its own signal or at its cap.
        let ensemble_end = checkpoint.as_ref().and_then(|checkpoint| {
            checkpoint
                .state
                .warmup
                .ensemble()
                .map(|member| match member.ensemble.burn_in_end {
                    Some(BurnInEnd::Converged) => "burn-in converged",
                    Some(BurnInEnd::Cap) => "burn-in cap",
                    None => "running",
                })
        });
        let stationary = checkpoint.as_ref().map(|checkpoint| {
            checkpoint
                .state
                .warmup
                .stan_windows()
                .and_then(|w| w.stationary())
        });
        let (warmup_ended, warmup_checks) = match stationary {
            _ if ensemble_end.is_some() => (ensemble_end.unwrap_or_default(), Vec::new()),
            None => ("unknown (no checkpoint)", Vec::new()),
            Some(None) => ("planned", Vec::new()),
            Some(Some(s)) => (
                match s.end() {
                    Some(WarmupEnd::Stationary) => "stationary",
                    Some(WarmupEnd::Cap) => "cap",
                    None => "running",
                },
                s.checks().to_vec(),
            ),
        };
        verdicts.push(judge(
            chain,
            warmup_iterations,
            warmup_ended,
            warmup_checks,
            &transitions,
        ));
    }
    Ok(verdicts)
}

fn judge(
    chain: usize,
    warmup_iterations: usize,
    warmup_ended: &'static str,
    warmup_checks: Vec<WarmupCheck>,
    transitions: &[(f64, bool)],
) -> ChainStationarity {
    let tenth = transitions.len() / 10;
    let mean = |part: &[(f64, bool)]| part.iter().map(|t| t.0).sum::<f64>() / part.len() as f64;
    let accept_first_tenth = mean(&transitions[..tenth]);
    let accept_last_tenth = mean(&transitions[transitions.len() - tenth..]);
    let divergent_draws = transitions.iter().filter(|t| t.1).count();
    let mut failed = Vec::new();
    if divergent_draws as f64 > MAX_DIVERGENT_SHARE * transitions.len() as f64 {
        failed.push("divergent");
    }
    if (accept_last_tenth - accept_first_tenth).abs() > MAX_ACCEPT_CHANGE {
        failed.push("acceptance drift");
    }
    ChainStationarity {
        chain,
        warmup_iterations,
        warmup_ended,
        warmup_checks,
        draws: transitions.len(),
        divergent_draws,
        accept_first_tenth,
        accept_last_tenth,
        verdict: if failed.is_empty() {
            "stationary".into()
        } else {
            failed.join(", ")
        },
    }
}

/// `(accept_stat__, divergent__)` of every row of a draws file; `None` without those columns.
fn transitions(path: &Path) -> Result<Option<Vec<(f64, bool)>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (Some(accept), Some(divergent)) = (column("accept_stat__"), column("divergent__")) else {
        return Ok(None);
    };
    let last = accept.max(divergent);
    let mut rows = Vec::new();
    for line in lines {
        let cells: Vec<&str> = line.splitn(last + 2, ',').collect();
        if cells.len() <= last {
            continue;
        }
        let a: f64 = cells[accept].trim().parse().unwrap_or(f64::NAN);
        rows.push((a, cells[divergent].trim() != "0"));
    }
    Ok(Some(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_is_judged_by_its_divergences_and_its_acceptance_drift() {
        let steady: Vec<(f64, bool)> = (0..100).map(|i| (0.8, i % 50 == 0)).collect();
        let verdict = judge(0, 150, "stationary", Vec::new(), &steady);
        assert_eq!(verdict.verdict, "stationary");
        assert_eq!(verdict.divergent_draws, 2);
        let falling: Vec<(f64, bool)> = (0..100)
            .map(|i| (if i < 50 { 0.9 } else { 0.5 }, i >= 80))
            .collect();
        let verdict = judge(1, 100, "planned", Vec::new(), &falling);
        assert_eq!(verdict.verdict, "divergent, acceptance drift");
        assert!(!verdict.is_stationary());
        assert!((verdict.accept_first_tenth - 0.9).abs() < 1e-12);
        assert!((verdict.accept_last_tenth - 0.5).abs() < 1e-12);
    }
}
