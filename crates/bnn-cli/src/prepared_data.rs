//! From a dataset argument to standardized train/test data ready for a posterior.

use anyhow::{Context, Result};
use bnn_data::{split_at_row, standardize_split, train_test_split, train_valid_test_split, CsvOptions, DatasetSpec, Standardizer, StatsSource};
use bnn_model::HostData;

/// Train and test data on the standardized scale, plus the map back to original units.
pub struct PreparedData {
    pub name: String,
    pub train: HostData,
    /// Held-out part of the training rows (early stopping of ensemble members), if asked for.
    pub valid: Option<HostData>,
    pub test: HostData,
    pub standardizer: Standardizer,
}

/// How to split and scale a dataset.
#[derive(Debug, Clone)]
pub struct Preparation {
    pub test_fraction: f64,
    /// Share of all rows held out for validation (0: none).
    pub valid_fraction: f64,
    pub split_seed: u64,
    pub generator_seed: u64,
    pub stats: StatsSource,
    pub csv: CsvOptions,
}

impl Default for Preparation {
    fn default() -> Self {
        Self {
            test_fraction: bnn_data::DEFAULT_TEST_FRACTION,
            valid_fraction: 0.0,
            split_seed: 0,
            generator_seed: bnn_data::DEFAULT_GENERATOR_SEED,
            stats: StatsSource::TrainingSplit,
            csv: CsvOptions::default(),
        }
    }
}

fn host(d: &bnn_data::Dataset) -> HostData {
    HostData::new(d.x.data.clone(), d.x.rows, d.x.cols, d.y.data.clone(), d.y.cols)
}

pub fn prepare(spec: &str, how: &Preparation) -> Result<PreparedData> {
    let parsed = DatasetSpec::parse(spec)?;
    let dataset = parsed.load(how.generator_seed, &how.csv).with_context(|| format!("loading '{spec}'"))?;
    let split = match parsed.predefined_train_rows() {
        Some(n_train) => split_at_row(&dataset, n_train)?,
        None if how.valid_fraction > 0.0 => train_valid_test_split(&dataset, how.valid_fraction, how.test_fraction, how.split_seed)?,
        None => train_test_split(&dataset, how.test_fraction, how.split_seed)?,
    };
    if how.valid_fraction > 0.0 && split.valid.is_none() {
        anyhow::bail!("'{spec}' has a predefined train/test split; a validation split is not supported for it");
    }
    let (scaled, standardizer) = standardize_split(&split, how.stats)?;
    Ok(PreparedData {
        name: dataset.name.clone(),
        train: host(&scaled.train),
        valid: scaled.valid.as_ref().map(host),
        test: host(&scaled.test),
        standardizer,
    })
}
