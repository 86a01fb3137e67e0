//! Warmup adaptation: step size (log axis) and acceptance statistic per warmup iteration and
//! chain, from `adaptation_chain_<c>.csv`, to see dual averaging settle.

use super::PlotOutcome;
use crate::figure::{
    chain_colour, chart, draw_axes, draw_legend, finite_points, line_legend, padded_log_range,
    padded_range, render_svg, with_legend_headroom,
};
use crate::log_axis::LogAxis;
use crate::numeric_csv::NumericCsv;
use crate::run_dir::RunDir;
use crate::PlotError;
use plotters::prelude::*;
use std::path::Path;

/// Two stacked panels of the usual width.
const SIZE: (u32, u32) = (900, 900);

/// One chain's warmup statistics.
struct Warmup {
    iteration: Vec<f64>,
    step_size: Vec<f64>,
    accept_stat: Vec<f64>,
}

pub(crate) fn plot_warmup_adaptation(
    run: &RunDir,
    out_dir: &Path,
) -> Result<PlotOutcome, PlotError> {
    let files = run.adaptation_files();
    if files.is_empty() {
        return Ok(PlotOutcome::Skipped("no adaptation_chain_0.csv".into()));
    }
    let chains = files
        .iter()
        .map(|file| read(file))
        .collect::<Result<Vec<_>, _>>()?;
    let path = out_dir.join("warmup_adaptation.svg");
    draw(&path, &chains)?;
    Ok(PlotOutcome::Written(vec![path]))
}

fn read(file: &Path) -> Result<Warmup, PlotError> {
    let table = NumericCsv::read(file, |c| {
        matches!(c, "iteration" | "stepsize__" | "accept_stat__")
    })?;
    Ok(Warmup {
        iteration: table.column("iteration")?.to_vec(),
        step_size: table.column("stepsize__")?.to_vec(),
        accept_stat: table.column("accept_stat__")?.to_vec(),
    })
}

fn draw(path: &Path, chains: &[Warmup]) -> Result<(), PlotError> {
    let x = padded_range(chains.iter().flat_map(|c| c.iteration.iter().copied()));
    let step = padded_log_range(chains.iter().flat_map(|c| c.step_size.iter().copied()));
    let accept = with_legend_headroom(0.0..1.0, chains.len(), SIZE.1 / 2);
    render_svg(path, SIZE, |root| {
        let panels = root.split_evenly((2, 1));
        let mut top = chart(
            &panels[0],
            "Step size during warmup",
            x.clone(),
            LogAxis::new(step),
        )?;
        draw_axes(&mut top, "warmup iteration", "step size (log scale)")?;
        for (chain, warmup) in chains.iter().enumerate() {
            // A log axis cannot show a zero step size; such points are left out.
            let points = finite_points(warmup.iteration.iter().copied(), &warmup.step_size)
                .into_iter()
                .filter(|p| p.1 > 0.0);
            let style = chain_colour(chain).stroke_width(2);
            top.draw_series(LineSeries::new(points, style))?
                .label(format!("chain {chain}"))
                .legend(line_legend(style));
        }
        draw_legend(&mut top, SeriesLabelPosition::UpperRight)?;

        let mut bottom = chart(
            &panels[1],
            "Acceptance statistic during warmup",
            x.clone(),
            accept.clone(),
        )?;
        draw_axes(&mut bottom, "warmup iteration", "acceptance statistic")?;
        for (chain, warmup) in chains.iter().enumerate() {
            let style = chain_colour(chain).mix(0.8).stroke_width(1);
            let points = finite_points(warmup.iteration.iter().copied(), &warmup.accept_stat);
            bottom
                .draw_series(LineSeries::new(points, style))?
                .label(format!("chain {chain}"))
                .legend(line_legend(style));
        }
        draw_legend(&mut bottom, SeriesLabelPosition::UpperRight)
    })
}
