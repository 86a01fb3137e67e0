//! A refused command leaves no run directory behind: the `--out` a command creates is removed
//! again when the command fails before anything worth keeping (a trained member, a draw, a
//! checkpoint) was written, so the corrected command is never blocked by a half-made directory.

use bnn_pipeline::{Access, RunDir, RunLock};
use std::path::{Path, PathBuf};

/// Whether `--out` existed before the command; see [`FreshOutDir::settle`].
pub struct FreshOutDir {
    path: PathBuf,
    existed: bool,
}

impl FreshOutDir {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            existed: path.exists(),
        }
    }

    /// After the command: on a refusal or failure (not a stop by a signal, which says how to
    /// continue), a directory this command created that holds no trained member, draw or
    /// checkpoint (only config.toml, layout.json and empty folders) is removed. Anything that
    /// cost work stays, so a resume can use it.
    pub fn settle<T>(
        self,
        result: anyhow::Result<T>,
        interrupted: impl Fn(&anyhow::Error) -> bool,
    ) -> anyhow::Result<T> {
        let refused = result.as_ref().err().is_some_and(|e| !interrupted(e));
        if refused && !self.existed && self.path.is_dir() && !holds_work(&self.path) {
            // Another process that made the same directory at the same moment may be writing it
            // (the reason this one was refused): it is never removed beneath that writer.
            if let Ok(_alone) = RunLock::acquire(&self.path, Access::Write) {
                let _ = std::fs::remove_dir_all(&self.path);
            }
        }
        result
    }
}

/// Members, draws or checkpoints: what a later command may continue from.
fn holds_work(path: &Path) -> bool {
    let dir = RunDir::new(path);
    let any_file = |folder: PathBuf| {
        std::fs::read_dir(folder)
            .is_ok_and(|mut entries| entries.any(|e| e.is_ok_and(|e| e.path().is_file())))
    };
    dir.has_draws() || any_file(dir.ensemble_dir()) || any_file(dir.checkpoint_dir())
}
