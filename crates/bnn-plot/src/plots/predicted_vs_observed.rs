//! Regression: per target, the predictive mean and 90% interval of each test point against its
//! observed value, with the line of perfect prediction. Bands against an input
//! (`predictive_bands`) need one input and one target; this plot needs neither.

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

const SIZE: (u32, u32) = (720, 660);

pub(crate) fn plot_predicted_vs_observed(
    run: &RunDir,
    out_dir: &Path,
) -> Result<PlotOutcome, PlotError> {
    let Some(file) = run.file("predictions.csv") else {
        return Ok(PlotOutcome::Skipped("no predictions.csv".into()));
    };
    let header = NumericCsv::header(&file)?;
    if let Some(missing) = ["y", "mean", "lower_90", "upper_90"]
        .into_iter()
        .find(|c| !header.iter().any(|h| h == c))
    {
        return Ok(PlotOutcome::Skipped(format!(
            "{} has no `{missing}` column (a classification run?)",
            file.display()
        )));
    }
    let several = header.iter().any(|c| c == "target");
    let table = NumericCsv::read(&file, |c| {
        matches!(c, "target" | "y" | "mean" | "lower_90" | "upper_90")
    })?;
    if !several {
        let path = out_dir.join("predicted_vs_observed.svg");
        draw(&path, None, &table, &(0..table.rows()).collect::<Vec<_>>())?;
        return Ok(PlotOutcome::Written(vec![path]));
    }
    let target = table.column("target")?;
    let mut targets: Vec<usize> = Vec::new();
    for (row, &t) in target.iter().enumerate() {
        if !(t >= 0.0 && t.fract() == 0.0) {
            return Err(table.malformed(row, format!("target {t} is not a target index")));
        }
        if !targets.contains(&(t as usize)) {
            targets.push(t as usize);
        }
    }
    targets.sort_unstable();
    let mut written = Vec::new();
    for k in targets {
        let rows: Vec<usize> = (0..table.rows())
            .filter(|&i| target[i] as usize == k)
            .collect();
        let path = out_dir.join(format!("predicted_vs_observed_target{k}.svg"));
        draw(&path, Some(k), &table, &rows)?;
        written.push(path);
    }
    Ok(PlotOutcome::Written(written))
}

fn draw(
    path: &Path,
    target: Option<usize>,
    table: &NumericCsv,
    rows: &[usize],
) -> Result<(), PlotError> {
    let (y, mean, lower, upper) = (
        table.column("y")?,
        table.column("mean")?,
        table.column("lower_90")?,
        table.column("upper_90")?,
    );
    let pick = |column: &[f64]| rows.iter().map(|&i| column[i]).collect::<Vec<f64>>();
    let (y, mean, lower, upper) = (pick(y), pick(mean), pick(lower), pick(upper));
    let range = padded_range(y.iter().chain(&mean).chain(&lower).chain(&upper).copied());
    let y_range = with_legend_headroom(range.clone(), 3, SIZE.1);
    let colour = chain_colour(0);
    render_svg(path, SIZE, |root| {
        let title = match target {
            Some(k) => format!("Target {k}: test predictions against observations"),
            None => "Test predictions against observations".to_string(),
        };
        let mut chart = chart(root, &title, range.clone(), y_range)?;
        draw_axes(&mut chart, "observed", "predicted (mean and 90% interval)")?;
        let diagonal = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
        chart
            .draw_series(LineSeries::new(
                [(range.start, range.start), (range.end, range.end)],
                diagonal,
            ))?
            .label("observed = predicted")
            .legend(line_legend(diagonal));
        let whisker = colour.mix(0.45).stroke_width(1);
        let intervals = (0..y.len())
            .filter(|&i| y[i].is_finite() && lower[i].is_finite() && upper[i].is_finite());
        chart
            .draw_series(
                intervals
                    .map(|i| PathElement::new(vec![(y[i], lower[i]), (y[i], upper[i])], whisker)),
            )?
            .label("90% interval")
            .legend(line_legend(whisker));
        let points = (0..y.len()).filter(|&i| y[i].is_finite() && mean[i].is_finite());
        chart
            .draw_series(points.map(|i| Circle::new((y[i], mean[i]), 3, colour.filled())))?
            .label("predictive mean")
            .legend(move |(x, y)| Circle::new((x + 11, y), 3, colour.filled()));
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}
