//! Reads `layout.json`, the table of parameter tensors written by `bnn sample`.

use crate::PlotError;
use serde::Deserialize;
use std::path::Path;

/// One tensor of the flattened network; keys other than these (shape, offset, …) are ignored.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct LayoutEntry {
    /// Module path, e.g. `network.layers.0.weight`.
    pub name: String,
    /// Dense layer index; `null` for parameters outside the layers (a likelihood scale).
    #[serde(default)]
    pub layer: Option<usize>,
    /// `weight`, `bias`, `likelihood` or `other`.
    pub kind: String,
}

#[derive(Deserialize)]
struct LayoutFile {
    entries: Vec<LayoutEntry>,
}

impl LayoutEntry {
    /// The CSV column base name, as the draws writer spells it:
    /// `network.layers.0.weight` → `layer0_weight` (columns `layer0_weight.1.1`, …).
    pub fn column_base(&self) -> String {
        self.name
            .replace("network.layers.", "layer")
            .replace('.', "_")
    }
}

/// The layout's entries in flattening order.
pub(crate) fn read_layout(path: &Path) -> Result<Vec<LayoutEntry>, PlotError> {
    let text = std::fs::read_to_string(path).map_err(|cause| PlotError::Io {
        file: path.to_path_buf(),
        cause,
    })?;
    let layout: LayoutFile = serde_json::from_str(&text).map_err(|cause| PlotError::Json {
        file: path.to_path_buf(),
        cause,
    })?;
    Ok(layout.entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_base_follows_the_draws_writer() {
        let entry = LayoutEntry {
            name: "network.layers.12.bias".into(),
            layer: Some(12),
            kind: "bias".into(),
        };
        assert_eq!(entry.column_base(), "layer12_bias");
        let other = LayoutEntry {
            name: "likelihood.log_sigma".into(),
            layer: None,
            kind: "likelihood".into(),
        };
        assert_eq!(other.column_base(), "likelihood_log_sigma");
    }
}
