//! Data layer of burn-bnn: loading, validating, splitting and standardizing regression data,
//! synthetic generators, and the named UCI benchmarks. Pure Rust, host-side `f64`.

mod checksum;
mod column_moments;
mod csv_loader;
mod data_dir;
mod dataset;
mod delimiter;
mod error;
mod generators;
mod manifest;
mod matrix;
mod named;
mod required_data;
mod spec;
mod split;
mod standardize;
mod summary;

pub use checksum::sha256_file;
pub use csv_loader::{load_csv, parse_csv, CsvOptions, TargetColumn};
pub use data_dir::{data_dir, locate_data_dir, DATA_DIR_ENV};
pub use dataset::Dataset;
pub use delimiter::Delimiter;
pub use error::{ColumnRole, DataError};
pub use generators::{
    cos2x, friedman1, robot_arm, robot_arm_stacked, COS2X_DEFAULT_NOISE_SD, COS2X_DEFAULT_ROWS,
    FRIEDMAN1_DEFAULT_ROWS, FRIEDMAN1_FEATURES, FRIEDMAN1_NOISE_SD, ROBOT_ARM_NOISE_SD,
    ROBOT_ARM_ROWS_PER_PART,
};
pub use manifest::{find_named, list_named, named_dataset_names, NamedDataset};
pub use matrix::Matrix;
pub use named::{load_named, load_named_from};
pub use required_data::{
    require_data_dir, require_fixtures_dir, require_reference_file, FIXTURES_DIR_ENV,
    REFERENCE_DIR_ENV, REQUIRE_DATA_ENV,
};
pub use spec::{
    known_dataset_names, load_dataset, DatasetSpec, DEFAULT_GENERATOR_SEED, GENERATED_DATASET_NAMES,
};
pub use split::{
    split_at_row, train_test_split, train_valid_test_split, Split, DEFAULT_TEST_FRACTION,
};
pub use standardize::{
    standardize_features_only, standardize_split, StandardizedSplit, Standardizer, StatsSource,
};
pub use summary::{describe, ColumnSummary, DatasetSummary, TargetQuantiles, SUMMARY_QUANTILES};
