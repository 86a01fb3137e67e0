//! A line chart of named series (with optional error bars and marked points) for studies, where a
//! figure is computed in memory rather than read from a run directory.

use crate::figure::{
    chain_colour, chart, draw_axes, draw_legend, padded_log_range, padded_range, render_svg, SIZE,
};
use crate::log_axis::LogAxis;
use crate::PlotError;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::ops::Range;
use std::path::Path;

/// One line of a [`LineChart`].
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    /// Points in drawing order; non-finite ones are left out.
    pub points: Vec<(f64, f64)>,
    /// Half-widths of vertical error bars, one per point (e.g. a standard error).
    pub errors: Option<Vec<f64>>,
    /// Dashed instead of solid (a second family of the same colour).
    pub dashed: bool,
    /// Colour slot (matplotlib's tab10 order); series sharing a slot share a colour.
    pub colour: usize,
    /// Points drawn as large hollow rings with their x value written beside them (an optimum).
    pub marked: Vec<(f64, f64)>,
}

/// Where the legend sits: the corner (or side) the data leave free.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LegendPosition {
    #[default]
    UpperRight,
    UpperLeft,
    MiddleRight,
    LowerLeft,
    LowerRight,
}

impl LegendPosition {
    fn plotters(self) -> SeriesLabelPosition {
        match self {
            LegendPosition::UpperRight => SeriesLabelPosition::UpperRight,
            LegendPosition::UpperLeft => SeriesLabelPosition::UpperLeft,
            LegendPosition::MiddleRight => SeriesLabelPosition::MiddleRight,
            LegendPosition::LowerLeft => SeriesLabelPosition::LowerLeft,
            LegendPosition::LowerRight => SeriesLabelPosition::LowerRight,
        }
    }
}

/// A titled chart of several series over shared axes, written as SVG.
#[derive(Clone, Debug, Default)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// A base-10 logarithmic x axis (all x must then be positive).
    pub log_x: bool,
    /// Fixed y span; `None` fits the data (error bars included).
    pub y_range: Option<Range<f64>>,
    pub legend: LegendPosition,
    pub series: Vec<Series>,
}

impl LineChart {
    /// Writes the chart to `path` (an `.svg`).
    pub fn write_svg(&self, path: &Path) -> Result<(), PlotError> {
        let finite = |s: &Series| -> Vec<(usize, (f64, f64))> {
            s.points
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, (x, y))| x.is_finite() && y.is_finite() && (!self.log_x || *x > 0.0))
                .collect()
        };
        let xs = self
            .series
            .iter()
            .flat_map(|s| finite(s).into_iter().map(|(_, (x, _))| x))
            .collect::<Vec<_>>();
        let ys = self.series.iter().flat_map(|s| {
            finite(s).into_iter().flat_map(move |(i, (_, y))| {
                let e = s
                    .errors
                    .as_ref()
                    .and_then(|e| e.get(i))
                    .copied()
                    .filter(|e| e.is_finite())
                    .unwrap_or(0.0);
                [y - e, y + e]
            })
        });
        let y_range = self.y_range.clone().unwrap_or_else(|| padded_range(ys));
        render_svg(path, SIZE, |root| {
            if self.log_x {
                let mut c = chart(
                    root,
                    &self.title,
                    LogAxis::new(padded_log_range(xs.iter().copied())),
                    y_range.clone(),
                )?;
                draw_axes(&mut c, &self.x_label, &self.y_label)?;
                draw_series(&mut c, &self.series, &finite)?;
                draw_legend(&mut c, self.legend.plotters())
            } else {
                let mut c = chart(
                    root,
                    &self.title,
                    padded_range(xs.iter().copied()),
                    y_range.clone(),
                )?;
                draw_axes(&mut c, &self.x_label, &self.y_label)?;
                draw_series(&mut c, &self.series, &finite)?;
                draw_legend(&mut c, self.legend.plotters())
            }
        })
    }
}

/// A series' finite points, each with its index.
type FinitePoints<'f> = dyn Fn(&Series) -> Vec<(usize, (f64, f64))> + 'f;

fn draw_series<'a, 'b: 'a, X, Y>(
    chart: &mut crate::figure::Chart<'a, 'b, X, Y>,
    series: &[Series],
    finite: &FinitePoints<'_>,
) -> crate::figure::DrawResult
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    for s in series {
        let colour = chain_colour(s.colour);
        let style = colour.stroke_width(2);
        let points: Vec<(f64, f64)> = finite(s).into_iter().map(|(_, p)| p).collect();
        let dashed = s.dashed;
        let drawn = if dashed {
            chart.draw_series(DashedLineSeries::new(points.clone(), 8, 5, style))?
        } else {
            chart.draw_series(LineSeries::new(points.clone(), style))?
        };
        let drawn = drawn.label(s.label.clone());
        if dashed {
            drawn.legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + DashedPathElement::new(vec![(0, 0), (22, 0)], 4, 3, style)
                    + Circle::new((11, 0), 3, colour.filled())
            });
        } else {
            drawn.legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (22, 0)], style)
                    + Circle::new((11, 0), 3, colour.filled())
            });
        }
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        if let Some(errors) = &s.errors {
            let bars = finite(s).into_iter().filter_map(|(i, (x, y))| {
                errors
                    .get(i)
                    .filter(|e| e.is_finite() && **e > 0.0)
                    .map(|&e| (x, y, e))
            });
            chart.draw_series(bars.map(|(x, y, e)| {
                PathElement::new(vec![(x, y - e), (x, y + e)], colour.stroke_width(1))
            }))?;
        }
        chart.draw_series(
            s.marked
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| {
                    EmptyElement::at((x, y))
                        + Circle::new((0, 0), 8, colour.stroke_width(2))
                        + Text::new(format!("{x:.3}"), (10, -18), ("sans-serif", 13).into_font())
                }),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_well_formed_svg_with_every_label_and_skips_non_finite_points() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        let chart = LineChart {
            title: "Acceptance vs L".into(),
            x_label: "L".into(),
            y_label: "acceptance".into(),
            log_x: false,
            y_range: Some(0.0..1.0),
            legend: LegendPosition::LowerLeft,
            series: vec![
                Series {
                    label: "sigmoid".into(),
                    points: vec![(200.0, 0.98), (400.0, f64::NAN), (600.0, 0.97)],
                    errors: Some(vec![0.01, 0.0, 0.02]),
                    colour: 0,
                    ..Series::default()
                },
                Series {
                    label: "relu".into(),
                    points: vec![(200.0, 0.65), (400.0, 0.6)],
                    dashed: true,
                    colour: 1,
                    marked: vec![(400.0, 0.6)],
                    ..Series::default()
                },
            ],
        };
        chart.write_svg(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        roxmltree::Document::parse(&text).expect("well-formed SVG");
        for label in [
            "Acceptance vs L",
            "sigmoid",
            "relu",
            "acceptance",
            "400.000",
        ] {
            assert!(text.contains(label), "missing {label}");
        }
        assert!(!text.contains("NaN"), "a NaN point reached the SVG");
        let log = LineChart {
            log_x: true,
            ..chart
        };
        log.write_svg(&dir.path().join("log.svg")).unwrap();
    }
}
