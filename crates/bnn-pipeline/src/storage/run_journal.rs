//! `journal.jsonl`: what was started in a run directory and how it ended, one JSON line per
//! event, only ever appended (a write-ahead record in the spirit of a database's log).
//!
//! Sampling records itself here, with a digest of the settings that decide its draws, before its
//! first draw, so `bnn sample --resume DIR` continues exactly what was started or refuses:
//! a directory that holds only a trained ensemble has nothing to resume, and a `config.toml`
//! that no longer matches what sampling started with is not silently used. A crash in the middle
//! of an append leaves at most a cut last line, which readers skip.

use crate::cluster::shard::{config_hash, host_name, unix_now};
use crate::config::run_config::RunConfig;
use crate::storage::run_dir::RunDir;
use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use std::io::Write as _;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalEvent {
    /// Chains started from their beginnings (their settings are in `config.toml`).
    SamplingStarted,
    /// A stopped sampling continued from its checkpoints.
    SamplingResumed,
    /// Every chain ran its draws; `sampling.json` was written.
    SamplingFinished,
    /// The stop flag ended a sampling session with every chain checkpointed.
    SamplingStopped,
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub event: JournalEvent,
    /// Seconds since the Unix epoch.
    pub time: u64,
    pub pid: u32,
    pub host: String,
    /// The sampler's name.
    pub sampler: String,
    /// SHA-256 of the settings that decide the draws ([`config_hash`]).
    pub config_sha256: String,
}

impl JournalEntry {
    pub fn new(event: JournalEvent, config: &RunConfig) -> Self {
        Self {
            event,
            time: unix_now(),
            pid: std::process::id(),
            host: host_name(),
            sampler: config.sampler.algorithm.name().to_string(),
            config_sha256: config_hash(config),
        }
    }
}

/// Appends `entry` as one line and flushes it to disk (the caller holds the write lock). A line
/// cut by an earlier crash is dropped first, so it never runs into the new one.
pub fn append(dir: &RunDir, entry: &JournalEntry) -> Result<()> {
    let path = dir.journal();
    let line = serde_json::to_string(entry)? + "\n";
    let complete = match std::fs::read(&path) {
        Ok(bytes) => bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.set_len(complete as u64)
        .and_then(|()| file.write_all(line.as_bytes()))
        .and_then(|()| file.sync_data())
        .with_context(|| format!("appending to {}", path.display()))
}

/// Every complete entry, oldest first (none when the directory has no journal).
pub fn entries(dir: &RunDir) -> Result<Vec<JournalEntry>> {
    let path = dir.journal();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut entries = Vec::new();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        // A line without its newline was cut by a crash in the middle of the append.
        let Some(line) = line.strip_suffix('\n') else {
            break;
        };
        entries.push(serde_json::from_str(line).with_context(|| {
            format!(
                "{} line {} is not a journal entry",
                path.display(),
                index + 1
            )
        })?);
    }
    Ok(entries)
}

/// The last time sampling was started from the chains' beginnings, if ever.
pub fn sampling_started(dir: &RunDir) -> Result<Option<JournalEntry>> {
    Ok(entries(dir)?
        .into_iter()
        .rev()
        .find(|e| e.event == JournalEvent::SamplingStarted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_cut_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        assert!(entries(&run).unwrap().is_empty());
        let config = RunConfig::new();
        let started = JournalEntry::new(JournalEvent::SamplingStarted, &config);
        append(&run, &started).unwrap();
        append(
            &run,
            &JournalEntry::new(JournalEvent::SamplingStopped, &config),
        )
        .unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(run.journal())
            .unwrap();
        file.write_all(b"{\"event\":\"sampling_res").unwrap();
        let read = entries(&run).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[0], started);
        assert_eq!(sampling_started(&run).unwrap(), Some(started.clone()));
        append(
            &run,
            &JournalEntry::new(JournalEvent::SamplingResumed, &config),
        )
        .unwrap();
        let read = entries(&run).unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(read[2].event, JournalEvent::SamplingResumed);
    }
}
