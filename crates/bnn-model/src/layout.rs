//! The map between a module's parameters and positions in one flat vector.

use serde::{Deserialize, Serialize};

/// What a block of the flat vector holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParameterKind {
    Weight,
    Bias,
    /// A likelihood parameter such as a learned log σ.
    Likelihood,
    /// Any other tensor of a user's module.
    Other,
}

/// One parameter tensor's place in the flat vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutEntry {
    /// Full module path, e.g. `network.layers.1.weight`.
    pub name: String,
    /// Index of the dense layer this tensor belongs to (`None` for non-layer parameters).
    pub layer: Option<usize>,
    pub kind: ParameterKind,
    pub shape: Vec<usize>,
    pub offset: usize,
    /// Inputs feeding each unit: the first dimension of a `[d_in, d_out]` weight, and of the
    /// layer's weight for its bias. Fan-in-scaled priors divide by its square root.
    pub fan_in: usize,
}

impl LayoutEntry {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len()
    }
}

/// The layout table of a flattened module: entries in flattening order, contiguous.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ParameterLayout {
    pub entries: Vec<LayoutEntry>,
}

impl ParameterLayout {
    /// One vector `theta` of `dim` values: the layout of a plain log density (no module).
    pub fn flat(dim: usize) -> Self {
        Self {
            entries: vec![LayoutEntry {
                name: "theta".into(),
                layer: None,
                kind: ParameterKind::Other,
                shape: vec![dim],
                offset: 0,
                fan_in: 1,
            }],
        }
    }

    /// Total dimension D.
    pub fn dim(&self) -> usize {
        self.entries.last().map_or(0, |e| e.offset + e.len())
    }

    pub fn entry(&self, name: &str) -> Option<&LayoutEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Name of every scalar coordinate, e.g. `network.layers.0.weight[3,1]`, for draw files.
    pub fn coordinate_names(&self) -> Vec<String> {
        let mut names = Vec::with_capacity(self.dim());
        for entry in &self.entries {
            let n = entry.len();
            for flat in 0..n {
                let mut index = Vec::with_capacity(entry.shape.len());
                let mut rest = flat;
                for &size in entry.shape.iter().rev() {
                    index.push(rest % size);
                    rest /= size;
                }
                index.reverse();
                let index: Vec<String> = index.iter().map(|i| i.to_string()).collect();
                names.push(format!("{}[{}]", entry.name, index.join(",")));
            }
        }
        names
    }

    /// A text table for `bnn model info`.
    pub fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "{:<28} {:>6} {:>10} {:>12} {:>8} {:>8}\n",
            "parameter", "layer", "kind", "shape", "offset", "fan_in"
        ));
        for e in &self.entries {
            let layer = e.layer.map_or("-".to_string(), |l| l.to_string());
            let kind = format!("{:?}", e.kind).to_lowercase();
            let shape = format!("{:?}", e.shape);
            out.push_str(&format!(
                "{:<28} {:>6} {:>10} {:>12} {:>8} {:>8}\n",
                e.name, layer, kind, shape, e.offset, e.fan_in
            ));
        }
        out.push_str(&format!("total parameters: {}\n", self.dim()));
        out
    }
}
