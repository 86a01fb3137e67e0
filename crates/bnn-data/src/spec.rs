//! Turning a user's `--data` argument into a dataset: a benchmark name, a generator name or a
//! CSV path.

use std::path::PathBuf;

use crate::csv_loader::{load_csv, CsvOptions};
use crate::dataset::Dataset;
use crate::error::DataError;
use crate::generators::{
    cos2x, friedman1, robot_arm_stacked, COS2X_DEFAULT_NOISE_SD, COS2X_DEFAULT_ROWS,
    FRIEDMAN1_DEFAULT_ROWS, ROBOT_ARM_ROWS_PER_PART,
};
use crate::manifest::{find_named, named_dataset_names, NamedDataset};
use crate::named::load_named;

/// Names accepted for generated data, besides the benchmark names in the manifest.
pub const GENERATED_DATASET_NAMES: [&str; 3] = ["cos2x", "friedman1", "robot-arm"];

/// Seed used by [`load_dataset`] for generated data.
pub const DEFAULT_GENERATOR_SEED: u64 = 0;

/// What a dataset argument refers to.
#[derive(Debug, Clone, PartialEq)]
pub enum DatasetSpec {
    Named(&'static NamedDataset),
    /// [`cos2x`] with its default size and noise.
    Cos2x,
    /// [`robot_arm_stacked`]: 400 rows whose first 200 are the canonical training set.
    RobotArm,
    /// [`friedman1`] with this many rows (`friedman1:200000`; plain `friedman1` is
    /// [`FRIEDMAN1_DEFAULT_ROWS`]).
    Friedman1 {
        rows: usize,
    },
    CsvFile(PathBuf),
}

impl DatasetSpec {
    /// Benchmark names win over generator names, and both over a file of the same name in
    /// the current directory; write `./airfoil` to mean the file.
    pub fn parse(spec: &str) -> Result<Self, DataError> {
        if let Some(entry) = find_named(spec) {
            return Ok(DatasetSpec::Named(entry));
        }
        match spec {
            "cos2x" => return Ok(DatasetSpec::Cos2x),
            "robot-arm" => return Ok(DatasetSpec::RobotArm),
            "friedman1" => {
                return Ok(DatasetSpec::Friedman1 {
                    rows: FRIEDMAN1_DEFAULT_ROWS,
                })
            }
            _ => {}
        }
        if let Some(rows) = spec.strip_prefix("friedman1:") {
            return match rows.replace('_', "").parse::<usize>() {
                Ok(rows) if rows > 0 => Ok(DatasetSpec::Friedman1 { rows }),
                _ => Err(DataError::InvalidGeneratedRows {
                    spec: spec.to_string(),
                }),
            };
        }
        let path = PathBuf::from(spec);
        if path.is_file() {
            return Ok(DatasetSpec::CsvFile(path));
        }
        Err(DataError::UnresolvedSpec {
            spec: spec.to_string(),
            known: known_dataset_names(),
        })
    }

    /// Loads the data; `generator_seed` only matters for generated data and `csv` only for files.
    pub fn load(&self, generator_seed: u64, csv: &CsvOptions) -> Result<Dataset, DataError> {
        match self {
            DatasetSpec::Named(entry) => load_named(&entry.name),
            DatasetSpec::Cos2x => cos2x(COS2X_DEFAULT_ROWS, COS2X_DEFAULT_NOISE_SD, generator_seed),
            DatasetSpec::RobotArm => Ok(robot_arm_stacked(generator_seed)),
            DatasetSpec::Friedman1 { rows } => friedman1(*rows, generator_seed),
            DatasetSpec::CsvFile(path) => load_csv(path, csv),
        }
    }

    /// For data with a canonical split, the number of leading rows that form the training
    /// set (pass it to `split_at_row` instead of splitting at random).
    pub fn predefined_train_rows(&self) -> Option<usize> {
        match self {
            DatasetSpec::RobotArm => Some(ROBOT_ARM_ROWS_PER_PART),
            _ => None,
        }
    }
}

/// [`DatasetSpec::parse`] then `load` with the default seed and CSV options.
pub fn load_dataset(spec: &str) -> Result<Dataset, DataError> {
    DatasetSpec::parse(spec)?.load(DEFAULT_GENERATOR_SEED, &CsvOptions::default())
}

/// Benchmark names followed by generator names, for help texts and error messages.
pub fn known_dataset_names() -> Vec<String> {
    let mut names = named_dataset_names();
    names.extend(GENERATED_DATASET_NAMES.iter().map(|n| n.to_string()));
    names
}
