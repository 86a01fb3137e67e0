//! Calibration curve: observed coverage of the central predictive intervals against their
//! nominal level, from `summary.json` (its `calibration` array, or the `coverage_<level>` fields).

use super::PlotOutcome;
use crate::figure::{
    chain_colour, chart, dashed_legend, draw_axes, draw_legend, render_svg, REFERENCE,
};
use crate::run_dir::RunDir;
use crate::summary::RunSummary;
use crate::PlotError;
use plotters::prelude::*;
use std::path::Path;

/// Square, so that the diagonal is at 45°.
const SIZE: (u32, u32) = (600, 600);

pub(crate) fn plot_calibration(run: &RunDir, out_dir: &Path) -> Result<PlotOutcome, PlotError> {
    let Some(file) = run.file("summary.json") else {
        return Ok(PlotOutcome::Skipped("no summary.json".into()));
    };
    let levels = RunSummary::read(&file)?.coverage()?;
    if levels.is_empty() {
        return Ok(PlotOutcome::Skipped(format!(
            "{} has no coverage_<level> fields",
            file.display()
        )));
    }
    let path = out_dir.join("calibration.svg");
    draw(&path, &levels)?;
    Ok(PlotOutcome::Written(vec![path]))
}

fn draw(path: &Path, levels: &[(f64, f64)]) -> Result<(), PlotError> {
    render_svg(path, SIZE, |root| {
        // A little past [0, 1] so that markers at full coverage are not cut by the frame.
        let mut chart = chart(
            root,
            "Calibration of central predictive intervals",
            -0.02..1.02,
            -0.02..1.02,
        )?;
        draw_axes(
            &mut chart,
            "nominal coverage",
            "observed coverage on the test set",
        )?;
        let ideal = REFERENCE.stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new([(0.0, 0.0), (1.0, 1.0)], 6, 6, ideal))?
            .label("ideal")
            .legend(dashed_legend(ideal, 5));

        let colour = chain_colour(0);
        let line = colour.stroke_width(2);
        chart
            .draw_series(LineSeries::new(levels.iter().copied(), line))?
            .label("observed")
            .legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (22, 0)], line)
                    + Circle::new((11, 0), 4, colour.filled())
            });
        chart.draw_series(
            levels
                .iter()
                .map(|&point| Circle::new(point, 5, colour.filled())),
        )?;
        // Each level's observed value beside its marker, on the side away from the diagonal.
        chart.draw_series(levels.iter().map(|&(nominal, observed)| {
            let offset = if observed < nominal {
                (9, 2)
            } else {
                (-36, -20)
            };
            EmptyElement::at((nominal, observed))
                + Text::new(
                    format!("{observed:.2}"),
                    offset,
                    ("sans-serif", 13).into_font(),
                )
        }))?;
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}
