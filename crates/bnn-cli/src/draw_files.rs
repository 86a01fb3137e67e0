//! Streams draws to CmdStan-style CSV files, one per chain, while keeping them for metrics.

use bnn_model::ParameterLayout;
use bnn_sampler::{CollectedDraws, Draw, DrawSink, SinkError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Column names in CmdStan's convention (`name.i.j`, 1-based) so that `arviz.from_cmdstan`
/// and CmdStan tooling can read the files.
pub fn cmdstan_names(layout: &ParameterLayout) -> Vec<String> {
    let mut names = Vec::with_capacity(layout.dim());
    for entry in &layout.entries {
        let base = entry.name.replace("network.layers.", "layer").replace('.', "_");
        let n = entry.len();
        for flat in 0..n {
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

const STAT_COLUMNS: &str = "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__";

/// Writes each sampling draw as one CSV row of its chain's file and keeps it in memory.
pub struct DrawFiles {
    writers: Vec<BufWriter<File>>,
    paths: Vec<PathBuf>,
    pub collected: CollectedDraws,
}

impl DrawFiles {
    pub fn create(dir: &Path, chains: usize, layout: &ParameterLayout) -> std::io::Result<Self> {
        let header = format!("{STAT_COLUMNS},{}\n", cmdstan_names(layout).join(","));
        let mut writers = Vec::with_capacity(chains);
        let mut paths = Vec::with_capacity(chains);
        for chain in 0..chains {
            let path = dir.join(format!("draws_chain_{chain}.csv"));
            let mut w = BufWriter::new(File::create(&path)?);
            w.write_all(header.as_bytes())?;
            writers.push(w);
            paths.push(path);
        }
        Ok(Self { writers, paths, collected: CollectedDraws::new(chains, layout.dim()) })
    }

    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    pub fn finish(&mut self) -> std::io::Result<()> {
        for w in &mut self.writers {
            w.flush()?;
        }
        Ok(())
    }
}

impl DrawSink for DrawFiles {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
        self.collected.record(draw)?;
        if draw.warmup {
            return Ok(());
        }
        let s = draw.stats;
        let w = &mut self.writers[draw.chain];
        write!(
            w,
            "{},{},{},{},{},{},{}",
            s.log_density,
            s.accept_stat,
            s.step_size,
            s.tree_depth,
            s.n_leapfrog,
            u8::from(s.divergent),
            s.energy
        )?;
        for v in draw.position {
            // f32 text is enough for draws of f32 networks and halves the file size.
            write!(w, ",{}", *v as f32)?;
        }
        w.write_all(b"\n")?;
        Ok(())
    }
}
