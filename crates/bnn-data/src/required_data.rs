//! For tests that need the UCI data or the ArviZ fixtures: find them, or say in one line what is skipped and why.

use std::io::Write;
use std::path::PathBuf;

use crate::data_dir::{data_dir, find_shared_folder, join_relative, search_starts};
use crate::error::DataError;
use crate::manifest::list_named;

/// Set to `1` to turn every skip for missing data into a test failure.
pub const REQUIRE_DATA_ENV: &str = "BNN_REQUIRE_DATA";

/// Overrides where the ArviZ reference fixtures are looked for.
pub const FIXTURES_DIR_ENV: &str = "BNN_FIXTURES_DIR";

/// The UCI data folder, if it holds every named dataset; otherwise `None` after printing
/// `skipping <test>: UCI data not found (...): set BNN_DATA_DIR`.
///
/// # Panics
/// When the data are missing and `BNN_REQUIRE_DATA=1`.
pub fn require_data_dir(test: &str) -> Option<PathBuf> {
    let dir = match data_dir() {
        Ok(dir) => dir,
        Err(e) => {
            let why = match e {
                DataError::DataDirNotFound { .. } => {
                    "no shared/datasets beside the checkout".to_string()
                }
                DataError::DataDirInvalid { path } => {
                    format!("BNN_DATA_DIR is {}, not a folder", path.display())
                }
                other => other.to_string(),
            };
            return skip(
                test,
                &format!("UCI data not found ({why}): set BNN_DATA_DIR"),
            );
        }
    };
    if let Some(entry) = list_named()
        .iter()
        .find(|entry| !join_relative(&dir, &entry.file).is_file())
    {
        let missing = join_relative(&dir, &entry.file);
        return skip(
            test,
            &format!(
                "UCI data not found ({} is missing): set BNN_DATA_DIR",
                missing.display()
            ),
        );
    }
    Some(dir)
}

/// The ArviZ fixtures folder (`$BNN_FIXTURES_DIR`, else `shared/fixtures/diagnostics` beside the
/// checkout), if it holds `SHA256SUMS`; otherwise `None` after printing `skipping <test>: ...`.
///
/// # Panics
/// When the fixtures are missing and `BNN_REQUIRE_DATA=1`.
pub fn require_fixtures_dir(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(FIXTURES_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(value) => PathBuf::from(value),
        None => match find_shared_folder(&search_starts(), &["fixtures", "diagnostics"]) {
            Some(dir) => dir,
            None => return skip(test, "ArviZ fixtures not found (no shared/fixtures/diagnostics beside the checkout): set BNN_FIXTURES_DIR"),
        },
    };
    if !dir.join("SHA256SUMS").is_file() {
        return skip(
            test,
            &format!(
                "ArviZ fixtures not found ({} has no SHA256SUMS): set BNN_FIXTURES_DIR",
                dir.display()
            ),
        );
    }
    Some(dir)
}

/// Overrides where the papers' reference tables are looked for.
pub const REFERENCE_DIR_ENV: &str = "BNN_REFERENCE_DIR";

/// The papers' reference tables (`$BNN_REFERENCE_DIR`, else `shared/reference` beside the
/// checkout), if the folder holds `file`; otherwise `None` after printing `skipping <test>: ...`.
///
/// # Panics
/// When the file is missing and `BNN_REQUIRE_DATA=1`.
pub fn require_reference_file(test: &str, file: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(REFERENCE_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(value) => PathBuf::from(value),
        None => match find_shared_folder(&search_starts(), &["reference"]) {
            Some(dir) => dir,
            None => return skip(test, "reference tables not found (no shared/reference beside the checkout): set BNN_REFERENCE_DIR"),
        },
    };
    let path = dir.join(file);
    if !path.is_file() {
        return skip(
            test,
            &format!(
                "reference table not found ({} is missing): set BNN_REFERENCE_DIR",
                path.display()
            ),
        );
    }
    Some(path)
}

/// Whether `BNN_REQUIRE_DATA` asks for every data-dependent test to run.
fn data_required() -> bool {
    std::env::var(REQUIRE_DATA_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn skip(test: &str, reason: &str) -> Option<PathBuf> {
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests,
    // and a skip must be seen.
    skip_unless_required(test, reason, data_required(), &mut std::io::stderr().lock())
}

fn skip_unless_required(
    test: &str,
    reason: &str,
    required: bool,
    out: &mut dyn Write,
) -> Option<PathBuf> {
    if required {
        panic!("{test}: {reason} ({REQUIRE_DATA_ENV} is set, so a missing file is a failure)");
    }
    let _ = writeln!(out, "skipping {test}: {reason}");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_says_what_and_why_in_one_line() {
        let mut out = Vec::new();
        assert_eq!(
            skip_unless_required(
                "some_test",
                "UCI data not found: set BNN_DATA_DIR",
                false,
                &mut out
            ),
            None
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "skipping some_test: UCI data not found: set BNN_DATA_DIR\n"
        );
    }

    #[test]
    #[should_panic(
        expected = "some_test: UCI data not found: set BNN_DATA_DIR (BNN_REQUIRE_DATA is set"
    )]
    fn a_required_skip_is_a_failure() {
        skip_unless_required(
            "some_test",
            "UCI data not found: set BNN_DATA_DIR",
            true,
            &mut Vec::new(),
        );
    }
}
