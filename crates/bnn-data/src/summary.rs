//! Per-column statistics of a dataset and the table `bnn data describe` prints.

use std::fmt;

use crate::column_moments::mean_and_sd;
use crate::dataset::Dataset;
use crate::error::ColumnRole;

/// Probabilities at which target quantiles are reported.
pub const SUMMARY_QUANTILES: [f64; 5] = [0.05, 0.25, 0.5, 0.75, 0.95];

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSummary {
    pub name: String,
    pub role: ColumnRole,
    pub min: f64,
    pub mean: f64,
    /// Divisor n, as in the standardizer, so it is the sd the data will be divided by.
    pub sd: f64,
    pub max: f64,
}

/// Quantiles of one target column, `(probability, value)` for each of [`SUMMARY_QUANTILES`].
#[derive(Debug, Clone, PartialEq)]
pub struct TargetQuantiles {
    pub name: String,
    pub quantiles: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DatasetSummary {
    pub name: String,
    pub source: String,
    pub rows: usize,
    pub features: usize,
    pub targets: usize,
    /// Features first, then targets, in dataset order.
    pub columns: Vec<ColumnSummary>,
    pub target_quantiles: Vec<TargetQuantiles>,
}

pub fn describe(dataset: &Dataset) -> DatasetSummary {
    let mut columns = Vec::new();
    let parts = [
        (ColumnRole::Feature, &dataset.x, &dataset.feature_names),
        (ColumnRole::Target, &dataset.y, &dataset.target_names),
    ];
    for (role, matrix, names) in parts {
        for (j, name) in names.iter().enumerate() {
            let values = matrix.column(j);
            let (mean, sd) = mean_and_sd(&values);
            columns.push(ColumnSummary {
                name: name.clone(),
                role,
                min: values.iter().copied().fold(f64::INFINITY, f64::min),
                mean,
                sd,
                max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            });
        }
    }
    let target_quantiles = dataset
        .target_names
        .iter()
        .enumerate()
        .map(|(j, name)| {
            let mut values = dataset.y.column(j);
            values.sort_by(f64::total_cmp);
            TargetQuantiles {
                name: name.clone(),
                quantiles: SUMMARY_QUANTILES
                    .iter()
                    .map(|&p| (p, quantile_of_sorted(&values, p)))
                    .collect(),
            }
        })
        .collect();
    DatasetSummary {
        name: dataset.name.clone(),
        source: dataset.source.clone(),
        rows: dataset.n_rows(),
        features: dataset.n_features(),
        targets: dataset.n_targets(),
        columns,
        target_quantiles,
    }
}

/// Linear interpolation between order statistics at position `p (n - 1)`: numpy's default
/// and Hyndman & Fan's type 7, so numbers agree with a quick check in Python or R.
fn quantile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let position = p * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    let weight = position - below as f64;
    sorted[below] + weight * (sorted[above] - sorted[below])
}

impl fmt::Display for DatasetSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "dataset   {}", self.name)?;
        writeln!(f, "source    {}", self.source)?;
        writeln!(f, "rows      {}", self.rows)?;
        writeln!(f, "features  {}", self.features)?;
        writeln!(f, "targets   {}", self.targets)?;
        writeln!(f)?;

        let name_width = self
            .columns
            .iter()
            .map(|c| c.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(6);
        writeln!(
            f,
            "{:<7}  {:<name_width$}  {:>12}  {:>12}  {:>12}  {:>12}",
            "role", "column", "min", "mean", "sd", "max"
        )?;
        for c in &self.columns {
            writeln!(
                f,
                "{:<7}  {:<name_width$}  {:>12}  {:>12}  {:>12}  {:>12}",
                c.role.to_string(),
                c.name,
                format_number(c.min),
                format_number(c.mean),
                format_number(c.sd),
                format_number(c.max)
            )?;
        }

        writeln!(f)?;
        let label = "target quantiles";
        let name_width = name_width.max(label.len());
        write!(f, "{label:<name_width$}")?;
        for p in SUMMARY_QUANTILES {
            write!(f, "  {:>12}", format!("{}%", p * 100.0))?;
        }
        writeln!(f)?;
        for t in &self.target_quantiles {
            write!(f, "{:<name_width$}", t.name)?;
            for &(_, value) in &t.quantiles {
                write!(f, "  {:>12}", format_number(value))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Six significant digits in at most 12 characters: fixed notation for moderate magnitudes,
/// scientific otherwise (protein's F5 reaches 10^6, airfoil's thickness 10^-4).
fn format_number(value: f64) -> String {
    let magnitude = value.abs();
    if value == 0.0 {
        "0".to_string()
    } else if (1e-3..1e6).contains(&magnitude) {
        let decimals = (5 - magnitude.log10().floor() as i32).max(0) as usize;
        format!("{value:.decimals$}")
    } else {
        format!("{value:.5e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        // numpy.quantile([1, 2, 3, 4], [0, 0.25, 0.5, 0.95, 1]) = [1, 1.75, 2.5, 3.85, 4]
        assert_eq!(quantile_of_sorted(&sorted, 0.0), 1.0);
        assert!((quantile_of_sorted(&sorted, 0.25) - 1.75).abs() < 1e-12);
        assert!((quantile_of_sorted(&sorted, 0.5) - 2.5).abs() < 1e-12);
        assert!((quantile_of_sorted(&sorted, 0.95) - 3.85).abs() < 1e-12);
        assert_eq!(quantile_of_sorted(&sorted, 1.0), 4.0);
    }

    #[test]
    fn numbers_keep_six_significant_digits() {
        assert_eq!(format_number(2886.380572), "2886.38");
        assert_eq!(format_number(0.00266337), "0.00266337");
        assert_eq!(format_number(-12.5), "-12.5000");
        assert_eq!(format_number(1872790.507), "1.87279e6");
        assert_eq!(format_number(0.0), "0");
    }
}
