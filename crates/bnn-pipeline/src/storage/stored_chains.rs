//! What a run directory's checkpoints say of its draws files: how many draws each chain kept and
//! why chains differ in length, so that a cut draws file is an error, never a silent loss.

use crate::storage::draw_store::Checkpoint;
use crate::storage::run_dir::RunDir;
use anyhow::{bail, Context as _, Result};
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Chain `chain`'s checkpoint, if the directory has one.
pub fn stored_checkpoint(dir: &RunDir, chain: usize) -> Result<Option<Checkpoint>> {
    let path = dir.checkpoint(chain);
    if path.exists() {
        Checkpoint::load(&path).map(Some)
    } else {
        Ok(None)
    }
}

/// `sampling.json`'s record of a finished sampling: the draws each chain kept (written since
/// runs record them; `None` in older directories).
#[derive(Debug, Clone, Default)]
pub struct FinishedSampling {
    pub chain_draws: Option<std::collections::BTreeMap<usize, usize>>,
}

/// The directory's finished-sampling record, or `None` while sampling has not finished (no
/// `sampling.json`, or one that does not say `"status": "finished"`).
pub fn finished_sampling(dir: &RunDir) -> Result<Option<FinishedSampling>> {
    let path = dir.sampling();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a sampling record", path.display()))?;
    if value["status"] != "finished" {
        return Ok(None);
    }
    let chain_draws = value["chain_draws"].as_object().map(|map| {
        map.iter()
            .filter_map(|(chain, n)| Some((chain.parse().ok()?, n.as_u64()? as usize)))
            .collect()
    });
    Ok(Some(FinishedSampling { chain_draws }))
}

/// How many of the `rows` draws in chain `chain`'s file a reader may use, checked against what
/// the run recorded: the chain's checkpoint, or (without one) the per-chain counts of a
/// finished run's `sampling.json`.
///
/// - Fewer rows than recorded: the file was cut (by hand, by a copy, by a full disk), and
///   reading it would drop draws without a word. Refused.
/// - More rows than recorded, in a finished run: rows were added after sampling (or the file is
///   another run's). Refused.
/// - More rows than the checkpoint, in a run that has not finished: the tail of an interrupted
///   session, which a resume rewrites; the reader takes the checkpointed rows, the last
///   complete state.
/// - A run directory with neither record for the chain cannot be checked. Refused.
pub fn check_draw_count(dir: &RunDir, chain: usize, rows: usize) -> Result<usize> {
    let finished = finished_sampling(dir)?;
    let draws = dir.draws(chain);
    let recorded = match (stored_checkpoint(dir, chain)?, &finished) {
        (Some(checkpoint), _) => Some((checkpoint.kept_draws, dir.checkpoint(chain))),
        (None, Some(record)) => record
            .chain_draws
            .as_ref()
            .and_then(|counts| counts.get(&chain))
            .map(|&n| (n, dir.sampling())),
        (None, None) => None,
    };
    let Some((expected, source)) = recorded else {
        match finished {
            Some(_) => bail!(
                "{} has no checkpoint ({}) and {} records no draw count for chain {chain}: how many draws it must hold cannot be checked (restore the checkpoint, or sample the run again)",
                draws.display(),
                dir.checkpoint(chain).display(),
                dir.sampling().display()
            ),
            None => bail!(
                "chain {chain} of {} has no checkpoint yet ({}), so none of its draws is known to be complete; continue the run with `bnn sample --resume {}`",
                dir.root().display(),
                dir.checkpoint(chain).display(),
                dir.root().display()
            ),
        }
    };
    if rows < expected {
        bail!(
            "{} holds {rows} draws but {} records {expected}: the file was cut or damaged after sampling, \
             and using it would silently drop {} draws (restore the file, or sample the run again)",
            draws.display(),
            source.display(),
            expected - rows
        );
    }
    if rows > expected && finished.is_some() {
        bail!(
            "{} holds {rows} draws but {} records {expected}: {} rows were added after sampling finished, or the file belongs to another run (restore the file, or sample the run again)",
            draws.display(),
            source.display(),
            rows - expected
        );
    }
    Ok(expected)
}

/// Refuses a run whose sampling has not finished, saying where each chain stands.
pub fn require_finished(dir: &RunDir, chains: &[usize], draws: usize, what: &str) -> Result<()> {
    if finished_sampling(dir)?.is_some() {
        return Ok(());
    }
    let lengths: Vec<usize> = chains
        .iter()
        .map(|&c| count_draw_rows(&dir.draws(c)).unwrap_or(0))
        .collect();
    let reason = unequal_lengths_reason(dir, chains, &lengths, draws)?;
    let root = dir.root().display();
    if reason.contains("--resume") {
        bail!("{root} has not finished sampling, so {what} would use a partial run: {reason}")
    }
    bail!("{root} has not finished sampling, so {what} would use a partial run ({reason}); continue it with `bnn sample --resume {root}` first")
}

/// Complete draw rows in a draws file (newline-terminated lines after the header; a row cut
/// mid-way is not counted), without parsing them.
pub fn count_draw_rows(path: &Path) -> Result<usize> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let (mut rows, mut line, mut header_seen) = (0, Vec::new(), false);
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {}", path.display()))?;
        if read == 0 {
            break;
        }
        let complete = line.last() == Some(&b'\n');
        if line.first() == Some(&b'#') || line == b"\n" {
            continue;
        }
        if !header_seen {
            header_seen = true;
        } else if complete {
            rows += 1;
        }
    }
    Ok(rows)
}

/// Why the chains `chains` (with `lengths` draws in their files) differ in length, from what
/// their checkpoints recorded: chains ended by the early-stopping rule, chains not yet finished
/// (each runs its warmup, whose length the stationary policy may have grown, then `draws`).
pub fn unequal_lengths_reason(
    dir: &RunDir,
    chains: &[usize],
    lengths: &[usize],
    draws: usize,
) -> Result<String> {
    let (mut early, mut unfinished, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for (&chain, &length) in chains.iter().zip(lengths) {
        match stored_checkpoint(dir, chain)? {
            Some(checkpoint) if checkpoint.finished_early => {
                early.push(format!("{chain} ({length} draws)"))
            }
            Some(checkpoint)
                if checkpoint.state.iteration < checkpoint.state.warmup.num_warmup() + draws =>
            {
                unfinished.push(format!(
                    "{chain} ({length} draws, iteration {} of {})",
                    checkpoint.state.iteration,
                    checkpoint.state.warmup.num_warmup() + draws
                ))
            }
            Some(_) => {}
            None => unknown.push(chain.to_string()),
        }
    }
    let mut parts = Vec::new();
    if !early.is_empty() {
        parts.push(format!(
            "chains {} were ended by the early-stopping rule (their test LPPD converged)",
            early.join(", ")
        ));
    }
    if !unfinished.is_empty() {
        parts.push(format!(
            "chains {} have not finished (continue with `bnn sample --resume {}`)",
            unfinished.join(", "),
            dir.root().display()
        ));
    }
    if !unknown.is_empty() {
        parts.push(format!(
            "chains {} have no checkpoint to say why",
            unknown.join(", ")
        ));
    }
    Ok(if parts.is_empty() {
        "every chain's checkpoint says it finished".to_string()
    } else {
        parts.join("; ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_counted_without_the_header_or_a_row_cut_midway() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("draws_chain_0.csv");
        std::fs::write(&path, "lp__,w\n1,2\n3,4\n5,").unwrap();
        assert_eq!(count_draw_rows(&path).unwrap(), 2);
        std::fs::write(&path, "# comment\nlp__,w\n1,2\n").unwrap();
        assert_eq!(count_draw_rows(&path).unwrap(), 1);
    }
}
