//! The study's figures as line charts: one colour per activation, error bars of one s.e.

use super::efficiency::EfficiencyCurve;
use crate::{MeanSe, Network};
use bnn_model::Activation;
use bnn_plot::{LegendPosition, LineChart, Series};

type CellMean<'a, K> = dyn Fn(Activation, K, f64) -> Option<MeanSe> + 'a;

fn colour(activations: &[Activation], a: Activation) -> usize {
    activations.iter().position(|&x| x == a).unwrap_or(0)
}

fn with_errors(label: String, colour: usize, dashed: bool, cells: Vec<(f64, MeanSe)>) -> Series {
    Series {
        label,
        points: cells.iter().map(|(x, m)| (*x, m.mean)).collect(),
        errors: Some(cells.iter().map(|(_, m)| m.se).collect()),
        dashed,
        colour,
        marked: Vec::new(),
    }
}

/// Figure 1, left: acceptance against L, one line per activation and step size (the second
/// step size dashed).
pub fn acceptance_vs_num_steps(
    activations: &[Activation],
    num_steps: &[usize],
    step_sizes: &[f64],
    mean: &CellMean<'_, usize>,
) -> LineChart {
    let mut series = Vec::new();
    for &a in activations {
        for (k, &e) in step_sizes.iter().enumerate() {
            let cells = num_steps
                .iter()
                .filter_map(|&l| mean(a, l, e).map(|m| (l as f64, m)))
                .collect();
            series.push(with_errors(
                format!("{} ε={e}", a.name()),
                colour(activations, a),
                k > 0,
                cells,
            ));
        }
    }
    LineChart {
        title: "Fixed-step HMC acceptance against trajectory length".into(),
        x_label: "leapfrog steps L".into(),
        y_label: "acceptance rate".into(),
        log_x: false,
        y_range: Some(-0.02..1.05),
        legend: LegendPosition::MiddleRight,
        series,
    }
}

/// Figure 1, right: acceptance against ε at the shortest and longest trajectories (dashed).
pub fn acceptance_vs_step_size(
    activations: &[Activation],
    step_sizes: &[f64],
    num_steps: &[usize],
    mean: &CellMean<'_, usize>,
) -> LineChart {
    let mut series = Vec::new();
    for &a in activations {
        for (k, &l) in num_steps.iter().enumerate() {
            let cells = step_sizes
                .iter()
                .filter_map(|&e| mean(a, l, e).map(|m| (e, m)))
                .collect();
            series.push(with_errors(
                format!("{} L={l}", a.name()),
                colour(activations, a),
                k > 0,
                cells,
            ));
        }
    }
    LineChart {
        title: "Fixed-step HMC acceptance against step size".into(),
        x_label: "step size ε".into(),
        y_label: "acceptance rate".into(),
        log_x: false,
        y_range: Some(-0.02..1.05),
        legend: LegendPosition::LowerLeft,
        series,
    }
}

/// Figure 2a: mean efficiency ε·a against acceptance a per activation, optimum ringed.
pub fn efficiency(curves: &[(Activation, EfficiencyCurve)], travel_time: f64) -> LineChart {
    let activations: Vec<Activation> = curves.iter().map(|(a, _)| *a).collect();
    let series = curves
        .iter()
        .map(|(a, curve)| Series {
            label: a.name().to_string(),
            points: curve.points.clone(),
            colour: colour(&activations, *a),
            marked: curve.optimum.into_iter().collect(),
            ..Series::default()
        })
        .collect();
    LineChart {
        title: format!("HMC efficiency at travel time T = {travel_time}"),
        x_label: "acceptance rate a".into(),
        y_label: "efficiency ε·a (mean over seeds)".into(),
        log_x: false,
        y_range: None,
        legend: LegendPosition::UpperLeft,
        series,
    }
}

/// Figure 3: acceptance against the number of parameters, one-hidden-layer networks solid,
/// deep ones dashed, log x.
pub fn acceptance_vs_parameters(
    activations: &[Activation],
    architectures: &[Vec<usize>],
    is_deep: &dyn Fn(&Vec<usize>) -> bool,
    mean: &dyn Fn(Activation, &Vec<usize>) -> Option<MeanSe>,
) -> LineChart {
    let mut series = Vec::new();
    for &a in activations {
        for deep in [false, true] {
            let mut cells: Vec<(f64, MeanSe)> = architectures
                .iter()
                .filter(|h| is_deep(h) == deep)
                .filter_map(|h| {
                    mean(a, h).map(|m| {
                        (
                            Network {
                                hidden: h.clone(),
                                activation: a,
                            }
                            .parameters() as f64,
                            m,
                        )
                    })
                })
                .collect();
            if cells.is_empty() {
                continue;
            }
            cells.sort_by(|x, y| x.0.total_cmp(&y.0));
            let family = if deep { "deep" } else { "one layer" };
            series.push(with_errors(
                format!("{} {family}", a.name()),
                colour(activations, a),
                deep,
                cells,
            ));
        }
    }
    LineChart {
        title: "Fixed-step HMC acceptance against network size".into(),
        x_label: "number of parameters".into(),
        y_label: "acceptance rate".into(),
        log_x: true,
        y_range: Some(-0.02..1.05),
        legend: LegendPosition::LowerLeft,
        series,
    }
}
