//! The look every plot shares (canvas, fonts, chain colours, axes, legend) and SVG output.

use crate::PlotError;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::error::Error;
use std::ops::Range;
use std::path::Path;

/// A drawing surface of an SVG file.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// Drawing code returns plotters' errors boxed; [`render_svg`] turns them into [`PlotError::Draw`].
pub(crate) type DrawResult<T = ()> = Result<T, Box<dyn Error>>;
/// A chart with two numeric axes, linear or logarithmic.
pub(crate) type Chart<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// Canvas of a one-panel plot, in pixels.
pub(crate) const SIZE: (u32, u32) = (900, 540);
const FONT: &str = "sans-serif";

/// Dashed reference lines (ideal calibration, deep ensemble LPPD).
pub(crate) const REFERENCE: RGBColor = RGBColor(40, 40, 40);
/// A second reference, told apart from the first by a lighter grey and shorter dashes.
pub(crate) const SECOND_REFERENCE: RGBColor = RGBColor(130, 130, 130);

/// matplotlib's tab10 cycle, so that chain colours match ArviZ plots of the same run.
const TAB10: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of chain `chain` (and of the `chain`-th series of any plot).
pub(crate) fn chain_colour(chain: usize) -> RGBColor {
    TAB10[chain % TAB10.len()]
}

/// Creates the SVG at `path`, fills it white, runs `draw` and writes the file.
pub(crate) fn render_svg(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&Area) -> DrawResult,
) -> Result<(), PlotError> {
    let failed = |e: Box<dyn Error>| PlotError::Draw {
        file: path.to_path_buf(),
        message: e.to_string(),
    };
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(e.into()))?;
    draw(&root).map_err(failed)?;
    root.present().map_err(|e| failed(e.into()))
}

/// A titled chart over `x` × `y` with room for tick labels and axis descriptions.
pub(crate) fn chart<'a, 'b, X: AsRangedCoord, Y: AsRangedCoord>(
    area: &'a Area<'b>,
    title: &str,
    x: X,
    y: Y,
) -> DrawResult<Chart<'a, 'b, X::CoordDescType, Y::CoordDescType>> {
    Ok(ChartBuilder::on(area)
        .caption(title, (FONT, 22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d(x, y)?)
}

/// Axes with tick labels, faint grid lines and the axis descriptions.
pub(crate) fn draw_axes<X, Y>(
    chart: &mut Chart<'_, '_, X, Y>,
    x_desc: &str,
    y_desc: &str,
) -> DrawResult
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_label_formatter(&tick_label)
        .y_label_formatter(&tick_label)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .draw()?;
    Ok(())
}

/// A tick label without float noise (`0.30000000000000004` → `0.3`) or a needless `.0`.
pub(crate) fn tick_label(value: &f64) -> String {
    // Nine significant digits keep close ticks apart and drop the noise of summed steps.
    let v: f64 = format!("{value:.8e}").parse().unwrap_or(*value);
    // A tick at zero reached by summing steps lands at ±1e-17 or so; no plotted quantity here
    // is that small, so it is zero.
    if v.abs() < 1e-10 {
        "0".into()
    } else if (1e-3..1e6).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// The legend of the labelled series, in a framed, mostly opaque box.
pub(crate) fn draw_legend<'a, 'b: 'a, X: Ranged, Y: Ranged>(
    chart: &mut Chart<'a, 'b, X, Y>,
    position: SeriesLabelPosition,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.5))
        .draw()?;
    Ok(())
}

/// The legend sample of a solid line series.
pub(crate) fn line_legend(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style)
}

/// The legend sample of a dashed line series.
pub(crate) fn dashed_legend(
    style: ShapeStyle,
    dash: u32,
) -> impl Fn((i32, i32)) -> DashedPathElement<std::vec::IntoIter<(i32, i32)>, u32> {
    move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 22, y)], dash, dash, style)
}

/// `(x, y)` pairs with a finite `y`: a NaN draw would otherwise throw a line off the canvas.
pub(crate) fn finite_points(xs: impl IntoIterator<Item = f64>, ys: &[f64]) -> Vec<(f64, f64)> {
    xs.into_iter()
        .zip(ys.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

/// The span of the finite values, widened by 4% each side so that nothing sits on the frame.
/// A single value gets a unit-wide span; no finite values give `0..1`.
pub(crate) fn padded_range(values: impl IntoIterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = finite_span(values.into_iter().filter(|v| v.is_finite()));
    match (lo, hi) {
        (Some(lo), Some(hi)) if hi > lo => {
            let pad = 0.04 * (hi - lo);
            lo - pad..hi + pad
        }
        (Some(v), _) => v - 0.5..v + 0.5,
        _ => 0.0..1.0,
    }
}

/// The span of the positive finite values for a log axis, widened by a factor 1.25 each side.
pub(crate) fn padded_log_range(values: impl IntoIterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = finite_span(values.into_iter().filter(|v| v.is_finite() && *v > 0.0));
    match (lo, hi) {
        (Some(lo), Some(hi)) => lo / 1.25..hi * 1.25,
        _ => 1e-3..1.0,
    }
}

/// `range` raised at the top so that a legend of `entries` lines in the upper corner covers no
/// data: traces fill the whole width, so no corner is free otherwise.
pub(crate) fn with_legend_headroom(
    range: Range<f64>,
    entries: usize,
    canvas_height: u32,
) -> Range<f64> {
    // Legend rows are ~21 px plus ~14 px of frame; caption, margins and x labels take ~120 px.
    let legend = 21.0 * entries as f64 + 14.0;
    let plot = f64::from(canvas_height).max(240.0) - 120.0;
    let free = (1.0 - legend / plot).max(0.3);
    range.start..range.start + (range.end - range.start) / free
}

fn finite_span(values: impl Iterator<Item = f64>) -> (Option<f64>, Option<f64>) {
    values.fold((None, None), |(lo, hi), v| {
        (
            Some(lo.map_or(v, |lo: f64| lo.min(v))),
            Some(hi.map_or(v, |hi: f64| hi.max(v))),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_ignore_non_finite_values_and_pad() {
        let r = padded_range([1.0, f64::NAN, 3.0, f64::INFINITY]);
        assert!(
            (r.start - 0.92).abs() < 1e-12 && (r.end - 3.08).abs() < 1e-12,
            "{r:?}"
        );
        assert_eq!(padded_range([2.0, 2.0]), 1.5..2.5);
        assert_eq!(padded_range([f64::NAN]), 0.0..1.0);
    }

    #[test]
    fn tick_labels_are_short() {
        let labels: Vec<String> = [
            0.1 + 0.2,
            20.0,
            -0.0,
            1.5e-5,
            2.5e7,
            -12.25,
            -2.7755575615628914e-17,
        ]
        .iter()
        .map(tick_label)
        .collect();
        assert_eq!(labels, ["0.3", "20", "0", "1.5e-5", "2.5e7", "-12.25", "0"]);
    }

    #[test]
    fn log_ranges_keep_only_positive_values() {
        let r = padded_log_range([0.0, -1.0, 0.1, 0.4]);
        assert!(
            (r.start - 0.08).abs() < 1e-12 && (r.end - 0.5).abs() < 1e-12,
            "{r:?}"
        );
        assert_eq!(padded_log_range([0.0]), 1e-3..1.0);
    }
}
