//! Streams draws to disk as they are produced, with per-chain checkpoints.
//!
//! Per chain: `draws_chain_<c>.csv` (CmdStan-style: sampler statistics, then the parameters as
//! f32 text; what `arviz.from_cmdstan` reads) and `adaptation_chain_<c>.csv` (the statistics of
//! every warmup iteration). Every `checkpoint_every` iterations the chain's files are flushed and
//! `checkpoints/chain_<c>.json` is replaced atomically with the chain's complete sampler state and
//! the byte lengths of its two files. Resuming truncates the files to those lengths and
//! continues from that state, so an interrupted run ends with exactly the files of an
//! uninterrupted one, whenever the interruption came (even in the middle of writing a row).
//! Memory stays O(chains · D) however long the run.

use crate::run::early_stop::EarlyStop;
use crate::run::progress::{ChainIteration, Progress, ProgressEvent};
use crate::storage::run_dir::{write_atomic, RunDir};
use anyhow::{bail, Context, Result};
use bnn_model::ParameterLayout;
use bnn_sampler::{ChainState, Draw, DrawSink, DrawStats, SinkError, StatColumn, StatKind};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

/// Column names in CmdStan's convention (`name.i.j`, 1-based) so that `arviz.from_cmdstan`
/// groups each weight matrix into one variable with its shape.
pub fn cmdstan_names(layout: &ParameterLayout) -> Vec<String> {
    let mut names = Vec::with_capacity(layout.dim());
    for entry in &layout.entries {
        let base = entry
            .name
            .replace("network.layers.", "layer")
            .replace('.', "_");
        for flat in 0..entry.len() {
            let mut index = Vec::new();
            let mut rest = flat;
            for &size in entry.shape.iter().rev() {
                index.push(rest % size + 1);
                rest /= size;
            }
            index.reverse();
            let suffix: String = index.iter().map(|i| format!(".{i}")).collect();
            names.push(format!("{base}{suffix}"));
        }
    }
    names
}

/// What `checkpoints/chain_<c>.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub format: u32,
    pub chain: usize,
    /// Byte length of the draws file at this state.
    pub draws_bytes: u64,
    /// Byte length of the adaptation file at this state.
    pub adaptation_bytes: u64,
    /// Draw rows in the draws file.
    pub kept_draws: usize,
    /// The chain was ended by the early-stopping rule.
    pub finished_early: bool,
    /// Busy seconds of this chain so far, in warmup and in sampling.
    pub seconds_warmup: f64,
    pub seconds_sampling: f64,
    pub state: ChainState,
}

const CHECKPOINT_FORMAT: u32 = 1;

impl Checkpoint {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading checkpoint {}", path.display()))?;
        let checkpoint: Checkpoint = serde_json::from_str(&text)
            .with_context(|| format!("checkpoint {} is corrupt; nothing was changed (delete it to restart that chain from its beginning)", path.display()))?;
        if checkpoint.format != CHECKPOINT_FORMAT {
            bail!(
                "checkpoint {} has format {}, this bnn writes {CHECKPOINT_FORMAT}",
                path.display(),
                checkpoint.format
            );
        }
        Ok(checkpoint)
    }
}

/// A byte-counting appender: the count is the file length, which the checkpoint records.
struct CountedFile {
    writer: BufWriter<File>,
    bytes: u64,
}

impl CountedFile {
    /// Opens `path` for appending after truncating it to `keep` bytes; `keep = None` starts the
    /// file anew with `header`.
    fn open(path: &Path, header: &str, keep: Option<u64>) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let len = file.metadata()?.len();
        let mut this = match keep {
            Some(bytes) if bytes > len => bail!(
                "{} is shorter ({len} bytes) than its checkpoint says ({bytes}): the run directory is damaged",
                path.display()
            ),
            Some(bytes) => {
                file.set_len(bytes)?;
                CountedFile { writer: BufWriter::new(file), bytes }
            }
            None => {
                file.set_len(0)?;
                CountedFile { writer: BufWriter::new(file), bytes: 0 }
            }
        };
        use std::io::Seek;
        this.writer
            .get_mut()
            .seek(std::io::SeekFrom::Start(this.bytes))?;
        if keep.is_none() {
            this.write(header)?;
        }
        Ok(this)
    }

    fn write(&mut self, text: &str) -> std::io::Result<()> {
        self.writer.write_all(text.as_bytes())?;
        self.bytes += text.len() as u64;
        Ok(())
    }
}

struct ChainFiles {
    draws: CountedFile,
    adaptation: CountedFile,
    kept_draws: usize,
    finished_early: bool,
    seconds_warmup: f64,
    seconds_sampling: f64,
    last_event: Option<Instant>,
    /// Divergences since this session started (for progress reports).
    divergences: usize,
}

/// One chain's part of a sampling session, as the store saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSampling {
    pub chain: usize,
    /// Draws in the chain's draws file.
    pub kept_draws: usize,
    /// The chain was ended by the early-stopping rule.
    pub finished_early: bool,
    /// Busy seconds in warmup and in sampling, summed over sessions (resumes).
    pub seconds_warmup: f64,
    pub seconds_sampling: f64,
}

/// The sink of a run's sampling: files, checkpoints, optional early stopping and progress.
pub struct DrawStore<'a> {
    dir: RunDir,
    /// The global chain numbers, ascending; `chains[k]` holds the files of chain `ids[k]`.
    ids: Vec<usize>,
    chains: Vec<ChainFiles>,
    checkpoint_every: usize,
    thin: usize,
    /// The kernel's own statistics (`DrawStats::kernel`), written after CmdStan's.
    kernel_columns: &'static [StatColumn],
    early_stop: Option<EarlyStop<'a>>,
    progress: Option<&'a dyn Progress>,
    line: String,
    /// Formatting buffer of [`push_float`].
    digits: ryu::Buffer,
}

impl<'a> DrawStore<'a> {
    /// Opens the files of the chains numbered `ids` (ascending: all of a run's, or one shard's);
    /// `resume[k]` is chain `ids[k]`'s checkpoint when continuing; `kernel_columns` are the
    /// statistics the sampler declares for itself (`SamplerSettings::stat_columns`).
    pub fn open(
        dir: &RunDir,
        layout: &ParameterLayout,
        ids: &[usize],
        resume: &[Option<Checkpoint>],
        checkpoint_every: usize,
        thin: usize,
        kernel_columns: &'static [StatColumn],
    ) -> Result<Self> {
        if ids.len() != resume.len() || ids.windows(2).any(|w| w[0] >= w[1]) {
            bail!("the draw store needs one checkpoint slot per chain and ascending chain numbers");
        }
        let mut stats = DrawStats::COLUMNS.join(",");
        for column in kernel_columns {
            stats = format!("{stats},{}", column.name);
        }
        let draws_header = format!("{stats},{}\n", cmdstan_names(layout).join(","));
        let adaptation_header = format!("iteration,{stats}\n");
        let mut chains = Vec::with_capacity(resume.len());
        for (&c, checkpoint) in ids.iter().zip(resume) {
            let draws = CountedFile::open(
                &dir.draws(c),
                &draws_header,
                checkpoint.as_ref().map(|k| k.draws_bytes),
            )?;
            let adaptation = CountedFile::open(
                &dir.adaptation(c),
                &adaptation_header,
                checkpoint.as_ref().map(|k| k.adaptation_bytes),
            )?;
            chains.push(ChainFiles {
                draws,
                adaptation,
                kept_draws: checkpoint.as_ref().map_or(0, |k| k.kept_draws),
                finished_early: checkpoint.as_ref().is_some_and(|k| k.finished_early),
                seconds_warmup: checkpoint.as_ref().map_or(0.0, |k| k.seconds_warmup),
                seconds_sampling: checkpoint.as_ref().map_or(0.0, |k| k.seconds_sampling),
                last_event: None,
                divergences: 0,
            });
        }
        Ok(Self {
            dir: dir.clone(),
            ids: ids.to_vec(),
            chains,
            checkpoint_every,
            thin: thin.max(1),
            kernel_columns,
            early_stop: None,
            progress: None,
            line: String::new(),
            digits: ryu::Buffer::new(),
        })
    }

    pub fn with_early_stop(mut self, early_stop: EarlyStop<'a>) -> Self {
        self.early_stop = Some(early_stop);
        self
    }

    /// Reports every iteration to `progress`.
    pub fn with_progress(mut self, progress: &'a dyn Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Flushes chain `c`'s files, then replaces its checkpoint (the order makes the checkpoint
    /// never point past what is on disk).
    pub fn checkpoint(&mut self, state: &ChainState) -> Result<()> {
        let c = state.chain;
        let slot = self.slot(c);
        let files = &mut self.chains[slot];
        files
            .draws
            .writer
            .flush()
            .with_context(|| format!("writing {}", self.dir.draws(c).display()))?;
        files
            .adaptation
            .writer
            .flush()
            .with_context(|| format!("writing {}", self.dir.adaptation(c).display()))?;
        let checkpoint = Checkpoint {
            format: CHECKPOINT_FORMAT,
            chain: c,
            draws_bytes: files.draws.bytes,
            adaptation_bytes: files.adaptation.bytes,
            kept_draws: files.kept_draws,
            finished_early: files.finished_early,
            seconds_warmup: files.seconds_warmup,
            seconds_sampling: files.seconds_sampling,
            state: state.clone(),
        };
        let path = self.dir.checkpoint(c);
        if state.warmup.ensemble().is_some() && path.exists() {
            // An ensemble's chains resume from one common iteration: keep the one before.
            let previous = self.dir.previous_checkpoint(c);
            std::fs::rename(&path, &previous)
                .with_context(|| format!("keeping {} as {}", path.display(), previous.display()))?;
        }
        write_atomic(&path, serde_json::to_string(&checkpoint)?.as_bytes())
    }

    /// Where chain `chain`'s files are kept (the sampler only hands over this store's chains).
    fn slot(&self, chain: usize) -> usize {
        self.ids.binary_search(&chain).unwrap_or_else(|_| {
            panic!(
                "chain {chain} is not one of this store's chains {:?}",
                self.ids
            )
        })
    }

    /// Busy seconds summed over chains: (warmup, sampling).
    pub fn busy_seconds(&self) -> (f64, f64) {
        self.chains.iter().fold((0.0, 0.0), |(w, s), c| {
            (w + c.seconds_warmup, s + c.seconds_sampling)
        })
    }

    pub fn finished_early(&self) -> Vec<bool> {
        self.chains.iter().map(|c| c.finished_early).collect()
    }

    /// Every chain's draws, early stop and busy time so far.
    pub fn chain_sampling(&self) -> Vec<ChainSampling> {
        self.chains
            .iter()
            .zip(&self.ids)
            .map(|(c, &chain)| ChainSampling {
                chain,
                kept_draws: c.kept_draws,
                finished_early: c.finished_early,
                seconds_warmup: c.seconds_warmup,
                seconds_sampling: c.seconds_sampling,
            })
            .collect()
    }

    fn write_row(&mut self, draw: &Draw<'_>) -> std::io::Result<()> {
        use std::fmt::Write as _;
        let s = draw.stats;
        let slot = self.slot(draw.chain);
        let line = &mut self.line;
        line.clear();
        let files = &mut self.chains[slot];
        if draw.warmup {
            let _ = write!(line, "{},", draw.index);
        }
        let digits = &mut self.digits;
        push_float(line, digits, s.log_density);
        line.push(',');
        push_float(line, digits, s.accept_stat);
        line.push(',');
        push_float(line, digits, s.step_size);
        let _ = write!(
            line,
            ",{},{},{},",
            s.tree_depth,
            s.n_leapfrog,
            u8::from(s.divergent)
        );
        push_float(line, digits, s.energy);
        for (index, column) in self.kernel_columns.iter().enumerate() {
            let value = s.kernel.get(index);
            line.push(',');
            match column.kind {
                StatKind::Real => push_float(line, digits, value),
                StatKind::Count => {
                    let _ = write!(line, "{}", value as u64);
                }
            }
        }
        if draw.warmup {
            line.push('\n');
            return files.adaptation.write(line);
        }
        // f32 text: the networks run in f32, and it halves the files.
        for v in draw.position {
            line.push(',');
            push_float(line, digits, *v as f32);
        }
        line.push('\n');
        files.kept_draws += 1;
        files.draws.write(line)
    }
}

/// Appends the shortest text that reads back as `value`: the digits `{}` writes, through `ryu`
/// (a microcanonical chain thinned by 10 writes a draw every 20 gradients and a warmup row every
/// 2, where `{}`'s Grisu/Dragon formatting cost ~2% of the run). Whole numbers and non-finite
/// values keep `{}`'s text (`1`, `NaN`, `inf`); ryu writes magnitudes below 1e-5 with an
/// exponent (`1.5e-7`, `{}`: `0.00000015`), which every CSV reader parses.
fn push_float<F: ryu::Float + std::fmt::Display + Copy + Into<f64>>(
    line: &mut String,
    digits: &mut ryu::Buffer,
    value: F,
) {
    let wide: f64 = value.into();
    if wide.is_finite() && wide.fract() != 0.0 {
        line.push_str(digits.format_finite(value));
    } else {
        use std::fmt::Write as _;
        let _ = write!(line, "{value}");
    }
}

impl DrawSink for DrawStore<'_> {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
        let now = Instant::now();
        let slot = self.slot(draw.chain);
        let files = &mut self.chains[slot];
        if let Some(last) = files.last_event {
            let seconds = now.duration_since(last).as_secs_f64();
            if draw.warmup {
                files.seconds_warmup += seconds;
            } else {
                files.seconds_sampling += seconds;
            }
        }
        files.last_event = Some(now);
        let keep = !draw.warmup && draw.index.is_multiple_of(self.thin);
        if draw.warmup || keep {
            let file = if draw.warmup {
                self.dir.adaptation(draw.chain)
            } else {
                self.dir.draws(draw.chain)
            };
            self.write_row(draw)
                .with_context(|| format!("writing {}", file.display()))?;
        }
        if keep {
            if let Some(early_stop) = &mut self.early_stop {
                if early_stop.observe(draw.chain, draw.position)? {
                    self.chains[slot].finished_early = true;
                }
            }
        }
        let files = &mut self.chains[slot];
        files.divergences += usize::from(draw.stats.divergent);
        if let Some(progress) = self.progress {
            let iteration = ChainIteration {
                chain: draw.chain,
                iteration: draw.state.iteration,
                warmup: draw.warmup,
                planned_warmup: draw.state.warmup.num_warmup(),
                divergences: files.divergences,
                step_size: draw.stats.step_size,
                accept_stat: draw.stats.accept_stat,
            };
            progress.report(&ProgressEvent::Iteration(&iteration));
        }
        let finished = self.chains[slot].finished_early;
        // MCLMC's tuner holds its phase-3 positions: those checkpoints wait for the phase's end.
        let periodic = self.checkpoint_every > 0
            && draw.state.iteration.is_multiple_of(self.checkpoint_every)
            && !draw.state.warmup.holds_positions();
        if finished || periodic {
            self.checkpoint(draw.state)?;
        }
        Ok(())
    }

    fn chain_finished(&self, chain: usize) -> bool {
        self.chains[self.slot(chain)].finished_early
    }
}
