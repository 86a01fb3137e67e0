//! Chooses which parameters to trace when none are named: a few per layer, not thousands.

use crate::layout::LayoutEntry;

/// Sampler statistics (`lp__`, `stepsize__`, …) end in `__`; everything else is a parameter.
fn is_parameter(column: &str) -> bool {
    !column.ends_with("__")
}

/// The first column of a tensor: `base` itself for a scalar, else `base.1…`.
fn first_column<'a>(header: &'a [String], base: &str) -> Option<&'a String> {
    header.iter().find(|c| {
        c.as_str() == base
            || c.strip_prefix(base)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// The first weight and the first bias of each layer (at most two per layer), found by the
/// layout's tensor names. Without a layout, or when none of its names match the header, the
/// first column of each group sharing the prefix before the first `.` (`layer0_weight`, …).
pub(crate) fn default_trace_parameters(
    header: &[String],
    layout: Option<&[LayoutEntry]>,
) -> Vec<String> {
    let from_layout = layout
        .map(|entries| by_layout(header, entries))
        .unwrap_or_default();
    if from_layout.is_empty() {
        by_prefix(header)
    } else {
        from_layout
    }
}

fn by_layout(header: &[String], entries: &[LayoutEntry]) -> Vec<String> {
    let mut layers: Vec<usize> = Vec::new();
    for layer in entries.iter().filter_map(|e| e.layer) {
        if !layers.contains(&layer) {
            layers.push(layer);
        }
    }
    let mut chosen = Vec::new();
    for layer in layers {
        for kind in ["weight", "bias"] {
            let entry = entries
                .iter()
                .find(|e| e.layer == Some(layer) && e.kind == kind);
            if let Some(column) = entry.and_then(|e| first_column(header, &e.column_base())) {
                chosen.push(column.clone());
            }
        }
    }
    chosen
}

fn by_prefix(header: &[String]) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut chosen = Vec::new();
    for column in header.iter().filter(|c| is_parameter(c)) {
        let prefix = column.split('.').next().unwrap_or(column);
        if !seen.contains(&prefix) {
            seen.push(prefix);
            chosen.push(column.clone());
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(names: &str) -> Vec<String> {
        names.split(',').map(String::from).collect()
    }

    fn entry(name: &str, layer: Option<usize>, kind: &str) -> LayoutEntry {
        LayoutEntry {
            name: name.into(),
            layer,
            kind: kind.into(),
        }
    }

    const HEADER: &str =
        "lp__,stepsize__,layer0_weight.1.1,layer0_weight.1.2,layer0_bias.1,layer0_bias.2,\
                          layer1_weight.1.1,layer1_weight.2.1,layer1_bias.1,likelihood_log_sigma";

    #[test]
    fn layout_picks_first_weight_and_bias_per_layer() {
        let layout = [
            entry("network.layers.0.weight", Some(0), "weight"),
            entry("network.layers.0.bias", Some(0), "bias"),
            entry("network.layers.1.weight", Some(1), "weight"),
            entry("network.layers.1.bias", Some(1), "bias"),
            entry("likelihood.log_sigma", None, "likelihood"),
        ];
        assert_eq!(
            default_trace_parameters(&header(HEADER), Some(&layout)),
            [
                "layer0_weight.1.1",
                "layer0_bias.1",
                "layer1_weight.1.1",
                "layer1_bias.1"
            ]
        );
    }

    #[test]
    fn without_layout_takes_the_first_column_of_each_prefix() {
        assert_eq!(
            default_trace_parameters(&header(HEADER), None),
            [
                "layer0_weight.1.1",
                "layer0_bias.1",
                "layer1_weight.1.1",
                "layer1_bias.1",
                "likelihood_log_sigma"
            ]
        );
    }

    #[test]
    fn a_layout_that_matches_nothing_falls_back_to_prefixes() {
        let layout = [entry("encoder.weight", Some(0), "weight")];
        assert_eq!(
            default_trace_parameters(&header("lp__,w.1,b.1"), Some(&layout)),
            ["w.1", "b.1"]
        );
    }

    #[test]
    fn a_base_name_does_not_match_a_longer_name() {
        // `layer1_weight` must not pick `layer1_weights_extra.1`.
        assert_eq!(
            first_column(
                &header("layer1_weights_extra.1,layer1_weight.1.1"),
                "layer1_weight"
            )
            .unwrap(),
            "layer1_weight.1.1"
        );
    }
}
