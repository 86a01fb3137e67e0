//! Posterior predictive of a 1-D regression: mean and central interval bands against the input,
//! with the test points (and the training points of `train.csv`, if present).

use super::PlotOutcome;
use crate::figure::{
    chain_colour, chart, draw_axes, draw_legend, line_legend, padded_range, render_svg,
    with_legend_headroom,
};
use crate::numeric_csv::NumericCsv;
use crate::run_dir::RunDir;
use crate::PlotError;
use plotters::prelude::*;
use std::path::Path;

/// Taller than the other plots: the legend sits above the data, which fill the width.
const SIZE: (u32, u32) = (900, 660);

/// Opacity of one band; nested bands stack, so the 50% band is the darkest.
const BAND_ALPHA: f64 = 0.2;

/// A central predictive interval at `level` percent, per test point.
struct Band<'a> {
    level: f64,
    lower: &'a [f64],
    upper: &'a [f64],
}

pub(crate) fn plot_predictive_bands(
    run: &RunDir,
    out_dir: &Path,
) -> Result<PlotOutcome, PlotError> {
    let Some(file) = run.file("predictions.csv") else {
        return Ok(PlotOutcome::Skipped("no predictions.csv".into()));
    };
    let header = NumericCsv::header(&file)?;
    let inputs = header.iter().filter(|c| is_input(c)).count();
    if inputs != 1 {
        return Ok(PlotOutcome::Skipped(format!(
            "{} has {inputs} input columns; bands against x need exactly one",
            file.display()
        )));
    }
    if header.iter().any(|c| c == "target") {
        return Ok(PlotOutcome::Skipped(format!(
            "{} has a `target` column (several outputs); bands need one",
            file.display()
        )));
    }
    let test = NumericCsv::read(&file, |c| {
        matches!(c, "x0" | "y" | "mean") || band_level(c).is_some()
    })?;
    let bands = bands(&test)?;
    let train = match run.file("train.csv") {
        Some(path) => {
            let table = NumericCsv::read(&path, |c| matches!(c, "x0" | "y"))?;
            Some((table.column("x0")?.to_vec(), table.column("y")?.to_vec()))
        }
        None => None,
    };
    let path = out_dir.join("predictive_bands.svg");
    draw(&path, &test, &bands, train.as_ref())?;
    Ok(PlotOutcome::Written(vec![path]))
}

/// `x0`, `x1`, …: the input columns.
fn is_input(column: &str) -> bool {
    column
        .strip_prefix('x')
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

/// The level of a `lower_<level>` or `upper_<level>` column; `None` for the standardized
/// copies (`lower_90_std`), which the plot, in original units, does not use.
fn band_level(column: &str) -> Option<f64> {
    let level = column
        .strip_prefix("lower_")
        .or_else(|| column.strip_prefix("upper_"))?;
    level.parse().ok()
}

/// The bands with both bounds present, widest first (the drawing order).
fn bands(table: &NumericCsv) -> Result<Vec<Band<'_>>, PlotError> {
    let mut bands = Vec::new();
    for column in table.header_names() {
        let Some(level) = column.strip_prefix("lower_") else {
            continue;
        };
        let upper = format!("upper_{level}");
        if let (Some(percent), true) = (band_level(column), table.header_names().contains(&upper)) {
            bands.push(Band {
                level: percent,
                lower: table.column(column)?,
                upper: table.column(&upper)?,
            });
        }
    }
    bands.sort_by(|a, b| b.level.total_cmp(&a.level));
    Ok(bands)
}

fn draw(
    path: &Path,
    test: &NumericCsv,
    bands: &[Band],
    train: Option<&(Vec<f64>, Vec<f64>)>,
) -> Result<(), PlotError> {
    let (x, y, mean) = (test.column("x0")?, test.column("y")?, test.column("mean")?);
    let mut order: Vec<usize> = (0..x.len()).filter(|&i| x[i].is_finite()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let train_x = train.map_or(&[][..], |t| &t.0);
    let train_y = train.map_or(&[][..], |t| &t.1);

    let x_range = padded_range(x.iter().chain(train_x).copied());
    let bounds = bands.iter().flat_map(|b| b.lower.iter().chain(b.upper));
    let y_range = padded_range(y.iter().chain(mean).chain(bounds).chain(train_y).copied());
    let entries = bands.len() + 2 + usize::from(train.is_some());
    let y_range = with_legend_headroom(y_range, entries, SIZE.1);

    let band_colour = chain_colour(0);
    render_svg(path, SIZE, |root| {
        let mut chart = chart(
            root,
            "Posterior predictive on the test set",
            x_range,
            y_range,
        )?;
        draw_axes(&mut chart, "x0", "y")?;
        for (nested, band) in bands.iter().enumerate() {
            // Upper bound left to right, then the lower bound back: one closed outline.
            let outline = order
                .iter()
                .map(|&i| (x[i], band.upper[i]))
                .chain(order.iter().rev().map(|&i| (x[i], band.lower[i])));
            let outline: Vec<_> = outline.filter(|p| p.1.is_finite()).collect();
            // The legend swatch shows the band as it looks: this layer over the wider ones.
            let swatch = band_colour
                .mix(1.0 - (1.0 - BAND_ALPHA).powi(nested as i32 + 1))
                .filled();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    band_colour.mix(BAND_ALPHA).filled(),
                )))?
                .label(format!("{}% interval", band.level))
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 22, y + 6)], swatch));
        }
        let line = band_colour.stroke_width(2);
        let mean_line = order
            .iter()
            .map(|&i| (x[i], mean[i]))
            .filter(|p| p.1.is_finite());
        chart
            .draw_series(LineSeries::new(mean_line, line))?
            .label("predictive mean")
            .legend(line_legend(line));

        if train.is_some() {
            let colour = chain_colour(1).mix(0.7).filled();
            let points = train_x
                .iter()
                .zip(train_y)
                .map(|(&x, &y)| (x, y))
                .filter(|p| p.0.is_finite() && p.1.is_finite());
            chart
                .draw_series(points.map(|p| Circle::new(p, 3, colour)))?
                .label("training points")
                .legend(move |(x, y)| Circle::new((x + 11, y), 3, colour));
        }
        let points = order
            .iter()
            .map(|&i| (x[i], y[i]))
            .filter(|p| p.1.is_finite());
        chart
            .draw_series(points.map(|p| Circle::new(p, 3, BLACK.filled())))?
            .label("test points")
            .legend(|(x, y)| Circle::new((x + 11, y), 3, BLACK.filled()));
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_input_and_band_columns() {
        assert!(is_input("x0") && is_input("x12"));
        assert!(!is_input("x") && !is_input("x_0") && !is_input("index"));
        assert_eq!(band_level("lower_90"), Some(90.0));
        assert_eq!(band_level("upper_97.5"), Some(97.5));
        assert_eq!(band_level("mean"), None);
        assert_eq!(band_level("lower_90_std"), None);
    }
}
