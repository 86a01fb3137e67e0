//! Reads a chain's draws file back row by row (streaming: memory O(D) per row), checking the
//! header against the model's layout and naming file and line on any malformed or non-finite
//! value.

use anyhow::{bail, Context, Result};
use bnn_sampler::DrawStats;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// The sampler statistics of a stored draw that the reports use.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoredStats {
    pub accept_stat: f64,
    pub tree_depth: f64,
    pub n_leapfrog: f64,
    pub divergent: bool,
}

/// Calls `f(stats, position)` for each of the first `limit` draws of the file (the count
/// [`crate::check_draw_count`] allows); returns the number of draws read. `lp__` and every
/// parameter must be finite: a NaN or an infinity there is refused, naming file, line and column.
pub fn for_each_stored_draw(
    path: &Path,
    dim: usize,
    limit: usize,
    mut f: impl FnMut(&StoredStats, &[f64]) -> Result<()>,
) -> Result<usize> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut lines = BufReader::new(file).lines().enumerate();
    let header = loop {
        match lines.next() {
            Some((_, line)) => {
                let line = line.with_context(|| format!("reading {}", path.display()))?;
                if !line.starts_with('#') {
                    break line;
                }
            }
            None => bail!("{} is empty (no header)", path.display()),
        }
    };
    let columns = header.split(',').count();
    // Statistics end in `__` (CmdStan's seven, then a sampler's own: MCLMC's, MSD's); the
    // parameters follow.
    let names: Vec<&str> = header.split(',').collect();
    let stat_columns = names
        .iter()
        .take_while(|name| name.ends_with("__"))
        .count()
        .max(DrawStats::COLUMNS.len());
    if columns != stat_columns + dim || !header.starts_with(DrawStats::COLUMNS[0]) {
        bail!(
            "{}: header has {columns} columns, expected {stat_columns} statistics + {dim} parameters of this run's model",
            path.display(),
        );
    }
    let mut values = Vec::with_capacity(columns);
    let mut count = 0;
    for (index, line) in lines {
        if count == limit {
            break;
        }
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        values.clear();
        for (column, text) in line.split(',').enumerate() {
            let value: f64 = text.trim().parse().map_err(|_| {
                anyhow::anyhow!(
                    "{} line {}, column {}: '{text}' is not a number",
                    path.display(),
                    index + 1,
                    column + 1
                )
            })?;
            if !value.is_finite() && (column == 0 || column >= stat_columns) {
                bail!(
                    "{} line {}, column {} ({}): {text} is not finite; a chain never keeps such a draw, so the file is damaged (restore it, or sample the run again)",
                    path.display(),
                    index + 1,
                    column + 1,
                    names.get(column).unwrap_or(&"?")
                );
            }
            values.push(value);
        }
        if values.len() != columns {
            bail!(
                "{} line {}: {} values, the header has {columns} (a truncated row?)",
                path.display(),
                index + 1,
                values.len()
            );
        }
        let stats = StoredStats {
            accept_stat: values[1],
            tree_depth: values[3],
            n_leapfrog: values[4],
            divergent: values[5] != 0.0,
        };
        f(&stats, &values[stat_columns..])?;
        count += 1;
    }
    Ok(count)
}
