//! Finding the folder that holds the named datasets' CSV files.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::error::DataError;

/// Environment variable that overrides the search.
pub const DATA_DIR_ENV: &str = "BNN_DATA_DIR";

/// The data folder: `$BNN_DATA_DIR` if set, else the first `shared/datasets` folder beside
/// an ancestor of the current directory or of this crate's source directory.
///
/// The repository is checked out as `X/main` (or any clone) with the data in `X/shared`, so
/// walking up from either place finds it without configuration.
pub fn data_dir() -> Result<PathBuf, DataError> {
    locate_data_dir(std::env::var_os(DATA_DIR_ENV).as_deref(), &search_starts())
}

/// Where the searches for a `shared` folder begin: the current directory, then this crate's
/// source directory.
pub(crate) fn search_starts() -> Vec<PathBuf> {
    let mut starts = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if !starts.contains(&source) {
        starts.push(source);
    }
    starts
}

/// The first `shared/<relative>` folder beside an ancestor of one of `start_dirs`.
pub(crate) fn find_shared_folder(start_dirs: &[PathBuf], relative: &[&str]) -> Option<PathBuf> {
    start_dirs
        .iter()
        .flat_map(|start| start.ancestors())
        .map(|ancestor| {
            relative
                .iter()
                .fold(ancestor.join("shared"), |path, part| path.join(part))
        })
        .find(|candidate| candidate.is_dir())
}

/// [`data_dir`] with its inputs made explicit, so it can be tested without touching the
/// process-wide environment.
pub fn locate_data_dir(
    env_value: Option<&OsStr>,
    start_dirs: &[PathBuf],
) -> Result<PathBuf, DataError> {
    if let Some(value) = env_value.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        return if path.is_dir() {
            Ok(path)
        } else {
            Err(DataError::DataDirInvalid { path })
        };
    }
    find_shared_folder(start_dirs, &["datasets"]).ok_or_else(|| DataError::DataDirNotFound {
        searched_from: start_dirs.to_vec(),
    })
}

/// Joins a manifest's `/`-separated relative path onto `dir` in the platform's way.
pub(crate) fn join_relative(dir: &Path, relative: &str) -> PathBuf {
    relative
        .split('/')
        .fold(dir.to_path_buf(), |p, part| p.join(part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_value_wins_and_must_be_a_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let found = locate_data_dir(Some(tmp.path().as_os_str()), &[]).unwrap();
        assert_eq!(found, tmp.path());
        let missing = tmp.path().join("nope");
        let err = locate_data_dir(Some(missing.as_os_str()), &[]).unwrap_err();
        assert!(matches!(err, DataError::DataDirInvalid { .. }));
        assert!(err.to_string().contains("BNN_DATA_DIR"));
    }

    #[test]
    fn finds_shared_datasets_beside_an_ancestor() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("shared").join("datasets");
        let deep = tmp.path().join("main").join("crates").join("bnn-data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(
            locate_data_dir(Some(OsStr::new("")), &[deep]).unwrap(),
            data
        );
    }

    #[test]
    fn reports_where_it_searched() {
        let tmp = tempfile::tempdir().unwrap();
        let err = locate_data_dir(None, &[tmp.path().to_path_buf()]).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, DataError::DataDirNotFound { .. }));
        assert!(message.contains(&tmp.path().display().to_string()));
        assert!(message.contains("BNN_DATA_DIR") && message.contains("fetch.py"));
    }
}
