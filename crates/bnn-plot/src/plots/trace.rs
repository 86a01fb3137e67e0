//! Trace plots: one SVG per parameter, one line per chain against the draw index.

use super::PlotOutcome;
use crate::figure::{
    chain_colour, chart, draw_axes, draw_legend, finite_points, line_legend, padded_range,
    render_svg, with_legend_headroom, SIZE,
};
use crate::layout::read_layout;
use crate::numeric_csv::NumericCsv;
use crate::run_dir::RunDir;
use crate::trace_parameters::default_trace_parameters;
use crate::PlotError;
use plotters::prelude::*;
use std::path::Path;

/// Traces `requested` (or a default choice per layer when empty) from `draws_chain_<c>.csv`.
pub(crate) fn plot_traces(
    run: &RunDir,
    requested: &[String],
    out_dir: &Path,
) -> Result<PlotOutcome, PlotError> {
    let files = run.draws_files();
    let Some(first) = files.first() else {
        return Ok(PlotOutcome::Skipped("no draws_chain_0.csv".into()));
    };
    let parameters = if requested.is_empty() {
        let header = NumericCsv::header(first)?;
        let layout = run
            .file("layout.json")
            .map(|path| read_layout(&path))
            .transpose()?;
        default_trace_parameters(&header, layout.as_deref())
    } else {
        requested.to_vec()
    };
    if parameters.is_empty() {
        return Ok(PlotOutcome::Skipped(format!(
            "{} has no parameter columns",
            first.display()
        )));
    }

    let chains = files
        .iter()
        .map(|file| NumericCsv::read(file, |column| parameters.iter().any(|p| p == column)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut written = Vec::with_capacity(parameters.len());
    for name in &parameters {
        let draws = chains
            .iter()
            .map(|chain| {
                chain.column(name).map_err(|_| PlotError::UnknownParameter {
                    file: chain.file().to_path_buf(),
                    name: name.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let path = out_dir.join(format!("trace_{}.svg", file_safe(name)));
        draw_trace(&path, name, &draws)?;
        written.push(path);
    }
    Ok(PlotOutcome::Written(written))
}

/// Keeps a column name usable as a file name (`layer0_weight.1.2` stays as it is).
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn draw_trace(path: &Path, name: &str, chains: &[&[f64]]) -> Result<(), PlotError> {
    let longest = chains.iter().map(|draws| draws.len()).max().unwrap_or(0);
    let x = padded_range([1.0, longest as f64]);
    let y = padded_range(chains.iter().flat_map(|draws| draws.iter().copied()));
    let y = with_legend_headroom(y, chains.len(), SIZE.1);
    render_svg(path, SIZE, |root| {
        let mut chart = chart(root, &format!("Trace of {name}"), x, y)?;
        draw_axes(&mut chart, "draw", name)?;
        for (chain, draws) in chains.iter().enumerate() {
            let style = chain_colour(chain).mix(0.85).stroke_width(1);
            let points = finite_points((1..=draws.len()).map(|i| i as f64), draws);
            chart
                .draw_series(LineSeries::new(points, style))?
                .label(format!("chain {chain}"))
                .legend(line_legend(style));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}
