//! The one error type of the data layer; every message says where the problem is and what to do.

use std::fmt;
use std::path::PathBuf;

/// Whether a column is an input or an output of the regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnRole {
    Feature,
    Target,
}

impl fmt::Display for ColumnRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ColumnRole::Feature => "feature",
            ColumnRole::Target => "target",
        })
    }
}

/// Everything that can go wrong while loading, checking, splitting or scaling data.
///
/// Line and column numbers are 1-based, as a text editor shows them.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The message names the I/O error itself; it is not also returned as `source()`, so a
    /// report of the error chain says it once.
    #[error("cannot read {}: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },

    #[error("{}, line {line}: the file is not UTF-8 text; save it as UTF-8 (or plain ASCII)", path.display())]
    NotUtf8 { path: PathBuf, line: usize },

    #[error("{}: the file is empty; expected a header row of column names followed by rows of numbers", path.display())]
    EmptyFile { path: PathBuf },

    #[error("{}: the file has a header (line {header_line}) but no data rows", path.display())]
    NoDataRows { path: PathBuf, header_line: usize },

    #[error("{}, line {line}: a double quote opened on this line is never closed", path.display())]
    UnterminatedQuote { path: PathBuf, line: usize },

    #[error("{}, line {line}, column {column}: the header has an empty column name; every column needs a name", path.display())]
    EmptyColumnName {
        path: PathBuf,
        line: usize,
        column: usize,
    },

    #[error(
        "{}, line {line}: the column name {name:?} appears twice (columns {first} and {second}); column names must be unique",
        path.display()
    )]
    DuplicateColumnName {
        path: PathBuf,
        line: usize,
        name: String,
        first: usize,
        second: usize,
    },

    #[error(
        "{}, line {line}: the header has only the target column(s) \"{target}\"; at least one feature column is needed",
        path.display()
    )]
    NoFeatureColumns {
        path: PathBuf,
        line: usize,
        target: String,
    },

    #[error("{}: the list of target columns is empty", path.display())]
    NoTargetColumns { path: PathBuf },

    #[error("{}: the target column {target:?} is listed twice", path.display())]
    RepeatedTarget { path: PathBuf, target: String },

    #[error(
        "{}: there is no column named {target:?} to use as the target; available columns: {}",
        path.display(),
        quoted_list(available)
    )]
    UnknownTarget {
        path: PathBuf,
        target: String,
        available: Vec<String>,
    },

    #[error(
        "{}, line {line}: expected {expected} fields (one per header column), found {found}",
        path.display()
    )]
    RaggedRow {
        path: PathBuf,
        line: usize,
        expected: usize,
        found: usize,
    },

    #[error("{}, line {line}, column {column} ({name:?}): {}", path.display(), non_numeric_reason(text))]
    NonNumeric {
        path: PathBuf,
        line: usize,
        column: usize,
        name: String,
        text: String,
    },

    #[error(
        "{}, line {line}, column {column} ({name:?}): the value {text:?} is NaN or infinite; every cell must be a finite number",
        path.display()
    )]
    NonFinite {
        path: PathBuf,
        line: usize,
        column: usize,
        name: String,
        text: String,
    },

    #[error(
        "{origin}: {role} column {column} ({name:?}) has the same value {value} in every row; \
         standardizing it would divide by zero, and it carries no information: remove the column"
    )]
    ConstantColumn {
        origin: String,
        role: ColumnRole,
        column: usize,
        name: String,
        value: f64,
    },

    #[error(
        "cannot standardize {role} column {column} ({name:?}): all its values in {fitted_on} are equal, \
         so its standard deviation is 0 and dividing by it is undefined; remove the column or fit on more rows"
    )]
    ZeroSpread {
        role: ColumnRole,
        column: usize,
        name: String,
        fitted_on: String,
    },

    #[error(
        "dataset {dataset:?} has {rows} rows, too few for {purpose}: it needs at least {needed}"
    )]
    TooFewRows {
        dataset: String,
        rows: usize,
        needed: usize,
        purpose: String,
    },

    #[error("in-memory data {dataset:?}: {problem}")]
    InvalidRows { dataset: String, problem: String },

    #[error("{name} = {value} is not allowed: it must be {requirement}")]
    InvalidParameter {
        name: &'static str,
        value: f64,
        requirement: &'static str,
    },

    #[error(
        "cannot find the datasets folder: no `shared/datasets` folder beside any parent of {}; \
         set BNN_DATA_DIR to the folder that holds <name>/<name>.csv, or run datasets/fetch.py",
        display_paths(searched_from)
    )]
    DataDirNotFound { searched_from: Vec<PathBuf> },

    #[error("BNN_DATA_DIR is set to {}, which is not a folder; point it at the folder that holds <name>/<name>.csv", path.display())]
    DataDirInvalid { path: PathBuf },

    #[error(
        "dataset {dataset:?} is not downloaded: {} does not exist; run `python3 datasets/fetch.py --out <dir>` \
         and set BNN_DATA_DIR=<dir>",
        path.display()
    )]
    DataFileMissing { dataset: String, path: PathBuf },

    #[error(
        "{}: checksum mismatch for dataset {dataset:?}: expected sha256 {expected}, found {actual}; \
         the file is corrupted or a different version: re-create it with datasets/fetch.py",
        path.display()
    )]
    ChecksumMismatch {
        dataset: String,
        path: PathBuf,
        expected: String,
        actual: String,
    },

    #[error("unknown dataset {name:?}; known datasets: {}", quoted_list(known))]
    UnknownDataset { name: String, known: Vec<String> },

    #[error(
        "{spec:?} is neither a known dataset nor an existing file; known datasets: {}",
        quoted_list(known)
    )]
    UnresolvedSpec { spec: String, known: Vec<String> },

    #[error(
        "{spec:?}: the number after `friedman1:` is the generated rows and must be a whole \
         number of at least 1, e.g. friedman1:200000"
    )]
    InvalidGeneratedRows { spec: String },
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" or ")
}

fn non_numeric_reason(text: &str) -> String {
    if text.is_empty() {
        "the cell is empty; every cell must hold a number (missing values are not supported)"
            .to_string()
    } else {
        format!("cannot read {text:?} as a number")
    }
}
