//! Each test row's log score under the posterior less the deep ensemble's, against the row's
//! place in `predictions.csv`. An LPPD difference is the mean of these, and one row can carry
//! most of it (a row unlike its neighbours, predicted with a tight interval); here it stands
//! out, labelled with its index. ArviZ's `plot_elpd` draws pointwise differences the same way.

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

const SIZE: (u32, u32) = (860, 560);
/// Rows labelled with their index: the largest losses and gains.
const LABELLED: usize = 3;

pub(crate) fn plot_log_score_difference(
    run: &RunDir,
    out_dir: &Path,
) -> Result<PlotOutcome, PlotError> {
    let Some(file) = run.file("predictions.csv") else {
        return Ok(PlotOutcome::Skipped("no predictions.csv".into()));
    };
    let header = NumericCsv::header(&file)?;
    if let Some(missing) = ["log_score_std", "ensemble_log_score_std"]
        .into_iter()
        .find(|c| !header.iter().any(|h| h == c))
    {
        return Ok(PlotOutcome::Skipped(format!(
            "{} has no `{missing}` column (a run not started from an ensemble, or written \
             before log scores were)",
            file.display()
        )));
    }
    let table = NumericCsv::read(&file, |c| {
        matches!(c, "index" | "log_score_std" | "ensemble_log_score_std")
    })?;
    let (index, posterior, ensemble) = (
        table.column("index")?,
        table.column("log_score_std")?,
        table.column("ensemble_log_score_std")?,
    );
    let difference: Vec<f64> = posterior.iter().zip(ensemble).map(|(p, e)| p - e).collect();
    let finite: Vec<usize> = (0..difference.len())
        .filter(|&i| difference[i].is_finite())
        .collect();
    let mean = finite.iter().map(|&i| difference[i]).sum::<f64>() / finite.len().max(1) as f64;
    let mut by_size = finite.clone();
    by_size.sort_by(|&a, &b| difference[a].abs().total_cmp(&difference[b].abs()));
    let labelled: Vec<usize> = by_size.iter().rev().take(LABELLED).copied().collect();

    let x_range = padded_range([0.0, difference.len().saturating_sub(1) as f64]);
    let y_range = with_legend_headroom(
        padded_range(finite.iter().map(|&i| difference[i]).chain([0.0])),
        2,
        SIZE.1,
    );
    let path = out_dir.join("log_score_difference.svg");
    let colour = chain_colour(0);
    render_svg(&path, SIZE, |root| {
        let title = format!("Log score per test row, posterior − deep ensemble (mean {mean:+.3})");
        let mut chart = chart(root, &title, x_range.clone(), y_range)?;
        draw_axes(
            &mut chart,
            "test row (line of predictions.csv)",
            "log score difference (standardized)",
        )?;
        let zero = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
        chart
            .draw_series(LineSeries::new(
                [(x_range.start, 0.0), (x_range.end, 0.0)],
                zero,
            ))?
            .label("no difference")
            .legend(line_legend(zero));
        chart
            .draw_series(
                finite
                    .iter()
                    .map(|&i| Circle::new((i as f64, difference[i]), 3, colour.filled())),
            )?
            .label("posterior − ensemble")
            .legend(move |(x, y)| Circle::new((x + 11, y), 3, colour.filled()));
        chart.draw_series(labelled.iter().map(|&i| {
            EmptyElement::at((i as f64, difference[i]))
                + Text::new(
                    format!("row {}", index[i]),
                    (7, -6),
                    ("sans-serif", 13).into_font(),
                )
        }))?;
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
    })?;
    Ok(PlotOutcome::Written(vec![path]))
}
