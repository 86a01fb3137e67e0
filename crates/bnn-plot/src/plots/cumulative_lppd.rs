//! Cumulative LPPD: each chain's expanding-window test LPPD against the number of draws, with
//! the pooled and deep-ensemble LPPD of `summary.json` as references (Sommer et al., 2024).

use super::PlotOutcome;
use crate::figure::{
    chain_colour, chart, dashed_legend, draw_axes, draw_legend, line_legend, padded_range,
    render_svg, with_legend_headroom, REFERENCE, SECOND_REFERENCE, SIZE,
};
use crate::numeric_csv::NumericCsv;
use crate::run_dir::RunDir;
use crate::summary::RunSummary;
use crate::PlotError;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// A horizontal line across the plot at a summary value.
struct Reference {
    label: String,
    value: f64,
    colour: RGBColor,
    dash: u32,
}

pub(crate) fn plot_cumulative_lppd(run: &RunDir, out_dir: &Path) -> Result<PlotOutcome, PlotError> {
    let Some(file) = run.file("cumulative_lppd.csv") else {
        return Ok(PlotOutcome::Skipped("no cumulative_lppd.csv".into()));
    };
    let chains = read_chains(run, &file)?;
    if chains.is_empty() {
        return Ok(PlotOutcome::Skipped(format!(
            "{} has no rows for the chains plotted",
            file.display()
        )));
    }
    let references = match run.file("summary.json") {
        Some(path) => references(&RunSummary::read(&path)?)?,
        None => Vec::new(),
    };
    let path = out_dir.join("cumulative_lppd.svg");
    draw(&path, &chains, &references)?;
    Ok(PlotOutcome::Written(vec![path]))
}

/// `(draw, lppd)` points of each chain, sorted by draw.
fn read_chains(run: &RunDir, file: &Path) -> Result<BTreeMap<usize, Vec<(f64, f64)>>, PlotError> {
    let table = NumericCsv::read(file, |column| matches!(column, "chain" | "draw" | "lppd"))?;
    let (chain, draw, lppd) = (
        table.column("chain")?,
        table.column("draw")?,
        table.column("lppd")?,
    );
    let mut chains: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
    for row in 0..table.rows() {
        let c = chain[row];
        if !(c >= 0.0 && c.fract() == 0.0) {
            return Err(
                table.malformed(row, format!("column `chain`: `{c}` is not a chain number"))
            );
        }
        if run.keeps_chain(c as usize) && draw[row].is_finite() && lppd[row].is_finite() {
            chains
                .entry(c as usize)
                .or_default()
                .push((draw[row], lppd[row]));
        }
    }
    for points in chains.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Ok(chains)
}

fn references(summary: &RunSummary) -> Result<Vec<Reference>, PlotError> {
    let mut lines = Vec::new();
    if let Some(value) = summary.number("lppd")?.filter(|v| v.is_finite()) {
        lines.push(Reference {
            label: format!("all chains pooled ({value:.4})"),
            value,
            colour: SECOND_REFERENCE,
            dash: 4,
        });
    }
    if let Some(value) = summary.number("de_lppd")?.filter(|v| v.is_finite()) {
        lines.push(Reference {
            label: format!("deep ensemble ({value:.4})"),
            value,
            colour: REFERENCE,
            dash: 9,
        });
    }
    Ok(lines)
}

fn draw(
    path: &Path,
    chains: &BTreeMap<usize, Vec<(f64, f64)>>,
    references: &[Reference],
) -> Result<(), PlotError> {
    let points = chains.values().flatten();
    let x = padded_range(points.clone().map(|p| p.0));
    let y = padded_range(
        points
            .map(|p| p.1)
            .chain(references.iter().map(|r| r.value)),
    );
    let y = with_legend_headroom(y, chains.len() + references.len(), SIZE.1);
    render_svg(path, SIZE, |root| {
        let mut chart = chart(root, "Cumulative test LPPD per chain", x.clone(), y)?;
        draw_axes(&mut chart, "draws used (expanding window)", "test LPPD")?;
        for (&chain, points) in chains {
            let style = chain_colour(chain).stroke_width(2);
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style))?
                .label(format!("chain {chain}"))
                .legend(line_legend(style));
        }
        for reference in references {
            let style = reference.colour.stroke_width(2);
            let ends = [(x.start, reference.value), (x.end, reference.value)];
            chart
                .draw_series(DashedLineSeries::new(
                    ends,
                    reference.dash,
                    reference.dash,
                    style,
                ))?
                .label(&reference.label)
                .legend(dashed_legend(style, reference.dash.min(5)));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}
