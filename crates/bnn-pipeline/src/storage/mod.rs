//! A run directory on disk: its files written atomically, the draws streamed to CSV with
//! checkpoints, and read back.

pub(crate) mod draw_reader;
pub(crate) mod draw_store;
pub(crate) mod run_dir;
pub(crate) mod run_journal;
pub(crate) mod run_lock;
pub(crate) mod stored_chains;
