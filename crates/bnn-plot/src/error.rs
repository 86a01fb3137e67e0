//! The one error type of the crate: every failure names the file (and line) it came from.

use std::path::PathBuf;
use thiserror::Error;

/// Why a run directory could not be plotted. Missing input files are not errors: those plots
/// are skipped and listed in [`crate::PlotReport::skipped`].
#[derive(Debug, Error)]
pub enum PlotError {
    /// The message names the I/O error; it is not also `source()`, so a chain prints it once.
    #[error("{}: {cause}", .file.display())]
    Io {
        file: PathBuf,
        cause: std::io::Error,
    },

    /// A CSV row that cannot be read; `line` is the 1-based line in the file, comments counted.
    #[error("{}:{line}: {message}", .file.display())]
    Malformed {
        file: PathBuf,
        line: usize,
        message: String,
    },

    #[error("{}: no header row", .file.display())]
    NoHeader { file: PathBuf },

    #[error("{}: no column `{column}`", .file.display())]
    MissingColumn { file: PathBuf, column: String },

    /// Invalid JSON; serde_json's message carries the line and column.
    #[error("{}: {cause}", .file.display())]
    Json {
        file: PathBuf,
        cause: serde_json::Error,
    },

    /// Valid JSON with a field of the wrong type, e.g. `"lppd": "high"`.
    #[error("{}: field `{field}` {message}", .file.display())]
    InvalidField {
        file: PathBuf,
        field: String,
        message: String,
    },

    /// A parameter asked for in [`crate::PlotOptions::parameters`] is not a column of the draws.
    #[error("{}: no parameter column `{name}` to trace", .file.display())]
    UnknownParameter { file: PathBuf, name: String },

    /// plotters failed to lay out or write an SVG.
    #[error("drawing {}: {message}", .file.display())]
    Draw { file: PathBuf, message: String },
}
