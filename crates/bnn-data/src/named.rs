//! Loading a named benchmark dataset after checking that its file is the expected one.

use std::path::Path;

use crate::checksum::sha256_file;
use crate::csv_loader::{load_csv, CsvOptions, TargetColumn};
use crate::data_dir::{data_dir, join_relative};
use crate::dataset::Dataset;
use crate::delimiter::Delimiter;
use crate::error::DataError;
use crate::manifest::{find_named, named_dataset_names, NamedDataset};

/// Loads `name` from the data folder found by [`data_dir`].
pub fn load_named(name: &str) -> Result<Dataset, DataError> {
    // Resolve the name first: an unknown name is the more useful error.
    lookup(name)?;
    load_named_from(&data_dir()?, name)
}

/// Loads `name` from `dir/<manifest file>`, refusing a file whose SHA-256 differs from the
/// manifest's, so that results are always computed on the published data.
pub fn load_named_from(dir: &Path, name: &str) -> Result<Dataset, DataError> {
    let entry = lookup(name)?;
    let path = join_relative(dir, &entry.file);
    if !path.is_file() {
        return Err(DataError::DataFileMissing {
            dataset: entry.name.clone(),
            path,
        });
    }
    let actual = sha256_file(&path)?;
    if actual != entry.sha256 {
        return Err(DataError::ChecksumMismatch {
            dataset: entry.name.clone(),
            path,
            expected: entry.sha256.clone(),
            actual,
        });
    }
    let options = CsvOptions {
        target: TargetColumn::Named(entry.target.clone()),
        delimiter: Delimiter::Comma,
    };
    let mut dataset = load_csv(&path, &options)?;
    dataset.name = entry.name.clone();
    Ok(dataset)
}

fn lookup(name: &str) -> Result<&'static NamedDataset, DataError> {
    find_named(name).ok_or_else(|| DataError::UnknownDataset {
        name: name.to_string(),
        known: named_dataset_names(),
    })
}
