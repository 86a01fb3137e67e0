//! How big a run is before it starts: its parameter count (checked, so a huge `--hidden` is
//! refused by name instead of wrapping) and the memory it will need against what the machine
//! has free (instead of an abort on a failed allocation after minutes of work).

use crate::config::run_config::{DataSection, RunConfig};
use anyhow::{bail, Result};
use bnn_data::{
    find_named, COS2X_DEFAULT_ROWS, FRIEDMAN1_DEFAULT_ROWS, FRIEDMAN1_FEATURES,
    ROBOT_ARM_ROWS_PER_PART,
};
use bnn_model::BnnConfig;
use std::io::{BufRead, BufReader, Read};

/// Bytes each member holds per parameter while it trains: Burn's f32 weights, their gradient
/// and Adam's two moments.
pub const TRAINING_BYTES_PER_PARAMETER: u64 = 4 * 4;

/// Bytes each chain holds per parameter while it samples: 14 f64 vectors (position, momentum
/// and gradient of the current point, of both ends of a NUTS tree and of its proposal, the
/// momentum sum and the metric).
pub const SAMPLING_BYTES_PER_PARAMETER: u64 = 14 * 8;

/// Bytes per layer output and row of one training pass over the data: Burn's f32 activations
/// and their gradients.
const ACTIVATION_BYTES: u64 = 2 * 4;

/// The network's weights and biases plus the likelihood's own parameters, `None` where the
/// count overflows a `usize` (e.g. `--hidden 18446744073709551615,18446744073709551615`).
pub fn parameter_count(config: &BnnConfig) -> Option<usize> {
    let network = config
        .mlp()
        .widths()
        .windows(2)
        .try_fold(0usize, |sum, w| {
            w[0].checked_mul(w[1])?.checked_add(w[1])?.checked_add(sum)
        })?;
    network.checked_add(config.likelihood.log_sigma_count(config.n_targets))
}

/// Rows and columns of a dataset, known without loading it: from the named benchmarks'
/// manifest, the generators' sizes, or a CSV file's header and line count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataShape {
    pub rows: usize,
    pub features: usize,
    pub targets: usize,
}

impl DataShape {
    /// The shape of `data.dataset`; `None` where it is not known (a missing file: the run is
    /// refused for that later).
    pub fn of(data: &DataSection) -> Option<Self> {
        let shape = |rows, features, targets| {
            Some(Self {
                rows,
                features,
                targets,
            })
        };
        let name = data.dataset.as_str();
        if let Some(entry) = find_named(name) {
            return shape(entry.rows, entry.features, 1);
        }
        match name {
            "cos2x" => return shape(COS2X_DEFAULT_ROWS, 1, 1),
            "robot-arm" => return shape(2 * ROBOT_ARM_ROWS_PER_PART, 2, 2),
            "friedman1" => return shape(FRIEDMAN1_DEFAULT_ROWS, FRIEDMAN1_FEATURES, 1),
            _ => {}
        }
        if let Some(rows) = name.strip_prefix("friedman1:") {
            let rows = rows.replace('_', "").parse().ok()?;
            return shape(rows, FRIEDMAN1_FEATURES, 1);
        }
        let (columns, rows) = csv_columns_and_rows(std::path::Path::new(name))?;
        let targets = data.target_columns.len().max(1);
        shape(rows, columns.saturating_sub(targets).max(1), targets)
    }
}

/// The header's column count (comma, else `;`, else whitespace separated, as the loader
/// decides) and the number of lines after it.
fn csv_columns_and_rows(path: &std::path::Path) -> Option<(usize, usize)> {
    let mut file = BufReader::new(std::fs::File::open(path).ok()?);
    let mut header = String::new();
    file.read_line(&mut header).ok()?;
    let columns = if header.contains(',') {
        header.split(',').count()
    } else if header.contains(';') {
        header.split(';').count()
    } else {
        header.split_whitespace().count()
    };
    let (mut rows, mut buffer) = (0, vec![0u8; 1 << 16]);
    loop {
        match file.read(&mut buffer).ok()? {
            0 => break,
            n => rows += buffer[..n].iter().filter(|&&b| b == b'\n').count(),
        }
    }
    Some((columns, rows))
}

/// The memory a run will hold at once, estimated before anything is loaded or trained.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEstimate {
    pub parameters: usize,
    pub members: usize,
    pub chains: usize,
    /// The networks: members × `TRAINING_BYTES_PER_PARAMETER` + chains ×
    /// `SAMPLING_BYTES_PER_PARAMETER`, per parameter.
    pub network_bytes: u64,
    /// The training data as f64, and one training pass over it (a minibatch, or every row).
    pub data_bytes: u64,
}

impl MemoryEstimate {
    pub fn total_bytes(&self) -> u64 {
        self.network_bytes.saturating_add(self.data_bytes)
    }
}

impl RunConfig {
    /// The memory this run will need (see [`MemoryEstimate`]); the data's shape is read
    /// without loading the data. An overflowing parameter count is refused, naming `--hidden`.
    pub fn memory_estimate(&self) -> Result<MemoryEstimate> {
        let shape = DataShape::of(&self.data).unwrap_or(DataShape {
            rows: 0,
            features: 1,
            targets: 1,
        });
        let model = self.model.bnn_config(shape.features, shape.targets)?;
        let parameters = parameter_count(&model).unwrap_or(usize::MAX);
        let (members, chains) = (self.ensemble.members, self.chains());
        let per_parameter = (members as u64)
            .saturating_mul(TRAINING_BYTES_PER_PARAMETER)
            .saturating_add((chains as u64).saturating_mul(SAMPLING_BYTES_PER_PARAMETER));
        let layer_outputs = model
            .mlp()
            .widths()
            .iter()
            .fold(0u64, |sum, &w| sum.saturating_add(w as u64));
        let rows_per_pass = self
            .ensemble
            .batch_size
            .unwrap_or(shape.rows)
            .min(shape.rows);
        let data_bytes = (shape.rows as u64)
            .saturating_mul((shape.features + shape.targets) as u64 * 8)
            .saturating_add(
                (rows_per_pass as u64)
                    .saturating_mul(layer_outputs)
                    .saturating_mul(ACTIVATION_BYTES),
            );
        Ok(MemoryEstimate {
            parameters,
            members,
            chains,
            network_bytes: (parameters as u64).saturating_mul(per_parameter),
            data_bytes,
        })
    }

    /// Refuses a run whose [`RunConfig::memory_estimate`] exceeds the memory the machine has
    /// available (`MemAvailable` of /proc/meminfo; no check where that cannot be read), naming
    /// `--hidden` and `--members` and both amounts.
    pub fn check_memory(&self) -> Result<()> {
        let estimate = self.memory_estimate()?;
        let Some(available) = available_memory() else {
            return Ok(());
        };
        let needed = estimate.total_bytes();
        if needed > available {
            bail!(
                "--hidden {} / --members {} (config keys `hidden`, `members`): the run needs about {} of memory \
                 ({} parameters × ({} members × {TRAINING_BYTES_PER_PARAMETER} B + {} chains × {SAMPLING_BYTES_PER_PARAMETER} B) \
                 + {} for the data and the passes over it), the machine has {} available; use narrower layers or fewer members",
                hidden_text(&self.model.hidden),
                estimate.members,
                human_bytes(needed),
                estimate.parameters,
                estimate.members,
                estimate.chains,
                human_bytes(estimate.data_bytes),
                human_bytes(available)
            );
        }
        Ok(())
    }
}

/// `'16,16'`, as `--hidden` takes it.
pub(crate) fn hidden_text(hidden: &[usize]) -> String {
    let widths: Vec<String> = hidden.iter().map(usize::to_string).collect();
    format!("'{}'", widths.join(","))
}

/// `MemAvailable` of /proc/meminfo in bytes: what can be allocated without swapping.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `bytes` in binary units with three significant figures, e.g. `2.91 TiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ if value >= 100.0 => format!("{value:.0} {}", UNITS[unit]),
        _ if value >= 10.0 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.2} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::run_config::{EnsembleSection, ModelSection};

    #[test]
    fn the_parameter_count_is_checked() {
        let model = |hidden: Vec<usize>| BnnConfig::new(3).with_hidden(hidden).with_n_targets(1);
        let small = model(vec![8, 4]);
        assert_eq!(parameter_count(&small), Some(small.num_params()));
        assert_eq!(parameter_count(&model(vec![usize::MAX, usize::MAX])), None);
        assert_eq!(parameter_count(&model(vec![usize::MAX / 2])), None);
    }

    #[test]
    fn the_estimate_counts_members_chains_and_data() {
        let config = RunConfig::new()
            .with_model(ModelSection::new().with_hidden(vec![8]))
            .with_ensemble(EnsembleSection::new().with_members(2));
        let estimate = config.memory_estimate().unwrap();
        // cos2x: 1 feature, a heteroscedastic head (2 outputs): 8 + 8 + 16 + 2 parameters.
        assert_eq!(
            (estimate.parameters, estimate.members, estimate.chains),
            (34, 2, 2)
        );
        assert_eq!(estimate.network_bytes, 34 * 2 * (16 + 112));
        assert!(estimate.data_bytes >= COS2X_DEFAULT_ROWS as u64 * 2 * 8);
        config.check_memory().unwrap();
    }

    #[test]
    fn a_run_larger_than_the_machine_is_refused_with_both_amounts() {
        if available_memory().is_none() {
            return; // no /proc/meminfo: nothing to compare with
        }
        let config = RunConfig::new()
            .with_model(ModelSection::new().with_hidden(vec![99_999_999_999]))
            .with_ensemble(EnsembleSection::new().with_members(2));
        let message = config.check_memory().unwrap_err().to_string();
        assert!(
            message.starts_with("--hidden '99999999999' / --members 2")
                && message.contains("TiB of memory")
                && message.contains("available"),
            "{message}"
        );
    }

    #[test]
    fn shapes_come_without_loading_the_data() {
        let shape = |name: &str| DataShape::of(&DataSection::new().with_dataset(name.into()));
        assert_eq!(shape("cos2x").map(|s| s.features), Some(1));
        assert_eq!(
            shape("friedman1:1_000_000_000_000"),
            Some(DataShape {
                rows: 1_000_000_000_000,
                features: FRIEDMAN1_FEATURES,
                targets: 1
            })
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.csv");
        std::fs::write(&path, "a,b,c,y\n1,2,3,4\n5,6,7,8\n").unwrap();
        assert_eq!(
            shape(path.to_str().unwrap()),
            Some(DataShape {
                rows: 2,
                features: 3,
                targets: 1
            })
        );
        assert_eq!(shape("no-such-file.csv"), None);
    }

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.00 MiB");
        assert_eq!(human_bytes(3_199_999_999_984), "2.91 TiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }
}
