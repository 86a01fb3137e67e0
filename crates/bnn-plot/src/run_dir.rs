//! Where each input of a `bnn sample` output directory lives, and which of them exist.

use std::path::{Path, PathBuf};

/// A run directory and the chain limit of [`crate::PlotOptions::max_chains`].
pub(crate) struct RunDir {
    dir: PathBuf,
    max_chains: Option<usize>,
}

impl RunDir {
    pub fn new(dir: &Path, max_chains: Option<usize>) -> Self {
        Self {
            dir: dir.to_path_buf(),
            max_chains,
        }
    }

    /// `dir/name` if that file exists: plots whose inputs are absent are skipped, not errors.
    pub fn file(&self, name: &str) -> Option<PathBuf> {
        let path = self.dir.join(name);
        path.is_file().then_some(path)
    }

    /// `draws_chain_0.csv`, `draws_chain_1.csv`, … up to the first gap or the chain limit.
    pub fn draws_files(&self) -> Vec<PathBuf> {
        self.chain_files("draws_chain_")
    }

    /// `adaptation_chain_<c>.csv` (warmup statistics), numbered like the draws files.
    pub fn adaptation_files(&self) -> Vec<PathBuf> {
        self.chain_files("adaptation_chain_")
    }

    /// Whether a chain number is within the chain limit.
    pub fn keeps_chain(&self, chain: usize) -> bool {
        self.max_chains.is_none_or(|max| chain < max)
    }

    fn chain_files(&self, prefix: &str) -> Vec<PathBuf> {
        (0..)
            .take_while(|&chain| self.keeps_chain(chain))
            .map_while(|chain| self.file(&format!("{prefix}{chain}.csv")))
            .collect()
    }
}
