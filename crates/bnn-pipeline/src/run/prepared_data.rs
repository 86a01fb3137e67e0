//! From a dataset name, or rows in memory, to standardized train/test data ready for a posterior.

use crate::config::model_spec::parse_likelihood;
use crate::config::run_config::{DataSection, RunConfig, Standardize};
use anyhow::{bail, Context, Result};
use bnn_data::{
    split_at_row, standardize_features_only, standardize_split, train_test_split,
    train_valid_test_split, CsvOptions, Dataset, DatasetSpec, Standardizer, StatsSource,
    TargetColumn,
};
use bnn_model::HostData;

/// Train and test data on the standardized scale, plus the map back to original units.
pub struct PreparedData {
    pub name: String,
    pub train: HostData,
    /// Held-out part of the training rows (early stopping of ensemble members), if asked for.
    pub valid: Option<HostData>,
    pub test: HostData,
    pub standardizer: Standardizer,
    /// The target columns' names, in the order of `y`'s columns.
    pub target_names: Vec<String>,
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
    /// The targets are class labels: the features are standardized, the labels kept.
    pub labels: bool,
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
            labels: false,
        }
    }
}

impl Preparation {
    /// The split and scaling a run's `[data]` section asks for (generated data take the split
    /// seed as their seed).
    pub fn of(data: &DataSection) -> Self {
        Self {
            test_fraction: data.test_fraction,
            valid_fraction: data.validation_fraction,
            split_seed: data.split_seed,
            generator_seed: data.split_seed,
            stats: match data.standardize {
                Standardize::Train => StatsSource::TrainingSplit,
                Standardize::Full => StatsSource::FullData,
            },
            csv: CsvOptions {
                target: TargetColumn::from_names(&data.target_columns),
                ..CsvOptions::default()
            },
            ..Preparation::default()
        }
    }

    /// [`Preparation::of`] the run's `[data]`, keeping the targets as labels when its model
    /// is a classifier.
    pub fn for_run(config: &RunConfig) -> Self {
        let labels = parse_likelihood(&config.model.likelihood).is_ok_and(|l| !l.is_regression());
        Self {
            labels,
            ..Self::of(&config.data)
        }
    }
}

fn host(d: &Dataset) -> HostData {
    HostData::new(
        d.x.data.clone(),
        d.x.rows,
        d.x.cols,
        d.y.data.clone(),
        d.y.cols,
    )
}

/// Loads a dataset by name (benchmark, generator or CSV path), then splits and scales it.
pub fn prepare(spec: &str, how: &Preparation) -> Result<PreparedData> {
    let parsed = DatasetSpec::parse(spec)?;
    if how.csv.target != TargetColumn::Last && !matches!(parsed, DatasetSpec::CsvFile(_)) {
        bail!("target columns are chosen for CSV files only; '{spec}' has its own target(s), drop target_columns / --target");
    }
    let dataset = parsed
        .load(how.generator_seed, &how.csv)
        .with_context(|| format!("loading '{spec}'"))?;
    split_and_scale(&dataset, parsed.predefined_train_rows(), how)
}

/// Splits and scales rows the caller already holds ([`Dataset::from_rows`]).
pub fn prepare_dataset(dataset: &Dataset, how: &Preparation) -> Result<PreparedData> {
    split_and_scale(dataset, None, how)
}

fn split_and_scale(
    dataset: &Dataset,
    predefined_train_rows: Option<usize>,
    how: &Preparation,
) -> Result<PreparedData> {
    let split = match predefined_train_rows {
        Some(n_train) => split_at_row(dataset, n_train)?,
        None if how.valid_fraction > 0.0 => train_valid_test_split(
            dataset,
            how.valid_fraction,
            how.test_fraction,
            how.split_seed,
        )?,
        None => train_test_split(dataset, how.test_fraction, how.split_seed)?,
    };
    if how.valid_fraction > 0.0 && split.valid.is_none() {
        anyhow::bail!(
            "'{}' has a predefined train/test split; a validation split is not supported for it",
            dataset.name
        );
    }
    let (scaled, standardizer) = if how.labels {
        standardize_features_only(&split, how.stats)?
    } else {
        standardize_split(&split, how.stats)?
    };
    Ok(PreparedData {
        name: dataset.name.clone(),
        train: host(&scaled.train),
        valid: scaled.valid.as_ref().map(host),
        test: host(&scaled.test),
        standardizer,
        target_names: dataset.target_names.clone(),
    })
}
