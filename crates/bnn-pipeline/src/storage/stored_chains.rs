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

/// Refuses a draws file that holds fewer draws than its chain's checkpoint recorded: the file
/// was cut (by hand, by a copy, by a full disk), and reading it would drop draws without a word.
/// A file with more rows than the checkpoint is an interrupted session's tail, which a resume
/// rewrites; readers may use it.
pub fn check_draw_count(dir: &RunDir, chain: usize, rows: usize) -> Result<Option<Checkpoint>> {
    let checkpoint = stored_checkpoint(dir, chain)?;
    if let Some(checkpoint) = &checkpoint {
        if rows < checkpoint.kept_draws {
            bail!(
                "{} holds {rows} draws but its checkpoint {} records {}: the file was cut or damaged after sampling, \
                 and using it would silently drop {} draws (restore the file, or sample the run again)",
                dir.draws(chain).display(),
                dir.checkpoint(chain).display(),
                checkpoint.kept_draws,
                checkpoint.kept_draws - rows
            );
        }
    }
    Ok(checkpoint)
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
