//! The study's files: a CSV per part (one row per chain), markdown tables with the paper's numbers
//! beside ours, the SVG figures, and `study.json` with the settings and timings.

use super::efficiency::EfficiencyCurve;
use super::figures;
use super::reference::{self, ReferenceCell};
use super::{ChainRecord, DinhConfig, DinhPart, DinhReport, PartTiming, Precision};
use crate::fixed_step_chains::{ChainSettings, StartPoint};
use crate::{describe_cpu, MeanSe};
use anyhow::{Context as _, Result};
use bnn_model::Activation;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Cells further apart than this many combined standard errors are marked.
pub const MARK_Z: f64 = 3.0;
/// The paper prints three decimals: its s.e. is taken as at least half the last digit.
const PAPER_ROUNDING: f64 = 0.0005;

pub(super) struct ReportWriter<'a> {
    config: &'a DinhConfig,
    out: &'a Path,
    cpu: String,
    workers: usize,
    timings: Vec<PartTiming>,
    files: Vec<PathBuf>,
    deviations: Option<(usize, usize)>,
}

/// Replicate values of one cell, keyed by what defines it.
fn group<K: Ord + Clone>(
    records: &[ChainRecord],
    key: impl Fn(&ChainRecord) -> K,
    value: impl Fn(&ChainRecord) -> f64,
) -> BTreeMap<K, Vec<f64>> {
    let mut groups: BTreeMap<K, Vec<f64>> = BTreeMap::new();
    for r in records {
        groups.entry(key(r)).or_default().push(value(r));
    }
    groups
}

/// Step sizes as exact keys (`f64` is not `Ord`).
fn bits(x: f64) -> u64 {
    x.to_bits()
}

impl<'a> ReportWriter<'a> {
    pub fn new(config: &'a DinhConfig, out: &'a Path, settings: &ChainSettings) -> Self {
        Self {
            config,
            out,
            cpu: describe_cpu(),
            workers: settings.workers,
            timings: Vec::new(),
            files: Vec::new(),
            deviations: None,
        }
    }

    fn write(&mut self, name: &str, text: &str) -> Result<()> {
        let path = self.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        self.files.push(path);
        Ok(())
    }

    fn svg(&mut self, name: &str, chart: bnn_plot::LineChart) -> Result<()> {
        let path = self.out.join(name);
        chart.write_svg(&path)?;
        self.files.push(path);
        Ok(())
    }

    fn timing_line(&mut self, timing: PartTiming) -> String {
        let line = format!(
            "{} chains, {:.0} s wall, {:.2e} gradient evaluations, {:.0} chain-gradients/s ({} worker threads; {})",
            timing.chains, timing.seconds, timing.gradients as f64, timing.gradients_per_second, self.workers, self.cpu
        );
        self.timings.push(timing);
        line
    }

    pub fn write_part(
        &mut self,
        part: DinhPart,
        records: &[ChainRecord],
        timing: PartTiming,
    ) -> Result<()> {
        let timing_line = self.timing_line(timing);
        match part {
            DinhPart::Table2 => self.table2(records, &timing_line),
            DinhPart::Efficiency => self.efficiency(records, &timing_line),
            DinhPart::Architectures => self.architectures(records, &timing_line),
            DinhPart::Sensitivity => {
                self.sensitivity(&[("as configured".into(), records.to_vec())], &timing_line)
            }
        }
    }

    pub fn write_sensitivity(
        &mut self,
        runs: &[(String, Vec<ChainRecord>)],
        timing: PartTiming,
    ) -> Result<()> {
        let timing_line = self.timing_line(timing);
        self.sensitivity(runs, &timing_line)
    }

    fn chain_csv(
        &mut self,
        name: &str,
        records: &[ChainRecord],
        extra: &[(&str, &dyn Fn(&ChainRecord) -> String)],
    ) -> Result<()> {
        let text = chain_rows(records, extra);
        self.write(name, &text)
    }

    /// The same cells run with each open choice changed alone, beside the configured run.
    fn sensitivity(&mut self, runs: &[(String, Vec<ChainRecord>)], timing: &str) -> Result<()> {
        let mut csv = String::new();
        for (k, (variant, records)) in runs.iter().enumerate() {
            for (i, line) in chain_rows(records, &[]).lines().enumerate() {
                if i == 0 && k == 0 {
                    let _ = writeln!(csv, "variant,{line}");
                } else if i > 0 {
                    let _ = writeln!(csv, "\"{variant}\",{line}");
                }
            }
        }
        self.write("sensitivity.csv", &csv)?;
        let cell_means = |records: &[ChainRecord]| {
            group(
                records,
                |r| {
                    (
                        r.chain.network.activation.name(),
                        r.chain.num_steps,
                        bits(r.chain.step_size),
                    )
                },
                |r| r.result.acceptance,
            )
        };
        let tables: Vec<BTreeMap<(&str, usize, u64), Vec<f64>>> =
            runs.iter().map(|(_, r)| cell_means(r)).collect();
        let mut md = String::from("# Dinh et al. Table 2: how much the choices the paper leaves open move a few cells

Each column changes one choice of the first; a change is marked ⚠ where it moves the cell by more than 3 combined s.e.\n\n| activation | L | ε | paper |");
        for (variant, _) in runs {
            let _ = write!(md, " {variant} |");
        }
        md.push_str("\n|---|---|---|---|");
        md.push_str(&"---|".repeat(runs.len()));
        md.push('\n');
        let paper = reference::table2();
        for &activation in &self.config.activations {
            for &(l, e) in &self.config.sensitivity_cells {
                let key = (activation.name(), l, bits(e));
                let theirs = reference::table2_cell(&paper, activation, l, e)
                    .map_or("—".to_string(), |c| c.acceptance.display());
                let _ = write!(md, "| {} | {l} | {e} | {theirs} |", activation.name());
                let base = tables[0].get(&key).map(|v| MeanSe::of(v));
                for (k, table) in tables.iter().enumerate() {
                    let Some(values) = table.get(&key) else {
                        md.push_str(" — |");
                        continue;
                    };
                    let m = MeanSe::of(values);
                    let shift = match base {
                        Some(b) if k > 0 => {
                            let z = m.z_distance(&b);
                            format!(
                                " (Δ {:+.3}{})",
                                m.mean - b.mean,
                                if z > MARK_Z { " ⚠" } else { "" }
                            )
                        }
                        _ => String::new(),
                    };
                    let _ = write!(md, " {}{shift} |", m.display());
                }
                md.push('\n');
            }
        }
        let _ = writeln!(md, "\n## Time\n\n{timing}\n");
        md.push_str(&self.settings_section());
        self.write("sensitivity.md", &md)
    }
}

/// Combined standard errors between our cell and the paper's, the paper's s.e. floored at half
/// its last printed digit (a printed `0.000 ± 0.000` is not an exact zero).
fn distance_from_paper(ours: &MeanSe, paper: &MeanSe) -> f64 {
    ours.z_distance(&MeanSe {
        se: paper.se.max(PAPER_ROUNDING),
        ..*paper
    })
}

/// One CSV row per chain (with a header), `extra` columns last.
fn chain_rows(
    records: &[ChainRecord],
    extra: &[(&str, &dyn Fn(&ChainRecord) -> String)],
) -> String {
    let mut text = String::from("activation,hidden,parameters,num_steps,step_size,seed,acceptance,accepted_fraction,divergent_fraction,gradients");
    for (column, _) in extra {
        let _ = write!(text, ",{column}");
    }
    text.push('\n');
    for r in records {
        let (c, a) = (&r.chain, &r.result);
        let hidden: Vec<String> = c.network.hidden.iter().map(|w| w.to_string()).collect();
        let _ = write!(
            text,
            "{},{},{},{},{},{},{},{},{},{}",
            c.network.activation.name(),
            hidden.join("x"),
            c.network.parameters(),
            c.num_steps,
            c.step_size,
            c.replicate,
            a.acceptance,
            a.accepted_fraction,
            a.divergent_fraction,
            a.gradients
        );
        for (_, value) in extra {
            let _ = write!(text, ",{}", value(r));
        }
        text.push('\n');
    }
    text
}

impl ReportWriter<'_> {
    fn settings_section(&self) -> String {
        let c = self.config;
        let float = match c.precision {
            Precision::F32 => "f32 log density and gradient (the sampler's positions, momenta and energies are f64)",
            Precision::F64 => "f64 throughout (as the paper's Autograd)",
        };
        format!(
            "## Settings\n\n\
             - Data: {rows} rows of cos(2x) data, x ~ U(0, 4), y ~ N(cos 2x, {noise}²) (data seed {data_seed}), all used for training, not standardized (paper §4).\n\
             - Likelihood: Gaussian with fixed σ = {sigma} (*our choice*: the paper writes a square loss and does not give σ; we use the data's noise).\n\
             - Prior: N(0, 1) on every weight and bias (paper §4).\n\
             - Leaky ReLU slope 0.01 (*our choice*; PyTorch's default).\n\
             - HMC: identity mass matrix, fixed ε and L, no adaptation; {burn_in} burn-in transitions discarded, then {draws} kept (paper: 100 and 2000).\n\
             - Acceptance: the mean Metropolis acceptance probability min(1, exp(−ΔH)) over the kept draws (`acceptance`); the CSVs also hold the share of accepted proposals (`accepted_fraction`), which estimates the same rate with more noise. A trajectory whose energy error passes 1000 is cut and rejected (acceptance probability e^−1000 = 0 either way).\n\
             - Start: *our choice*, {start}, one draw per seed (seed {seed}, streams 0..{seeds}), shared by the cells of that seed.\n\
             - Float: {float}.\n\
             - Seeds: {seeds} replicates; mean ± standard error over them.\n",
            rows = c.rows,
            noise = c.noise_sd,
            data_seed = c.data_seed,
            sigma = c.likelihood_sigma,
            burn_in = c.burn_in,
            draws = c.draws,
            seed = c.seed,
            seeds = c.seeds,
            start = match c.start {
                StartPoint::Initialization => "PyTorch's U(±1/√fan_in) initialization",
                StartPoint::PriorDraw => "a draw from the N(0, 1) prior",
            },
        )
    }

    fn table2(&mut self, records: &[ChainRecord], timing: &str) -> Result<()> {
        self.chain_csv("table2.csv", records, &[])?;
        let cells = group(
            records,
            |r| {
                (
                    r.chain.network.activation.name(),
                    r.chain.num_steps,
                    bits(r.chain.step_size),
                )
            },
            |r| r.result.acceptance,
        );
        let paper = reference::table2();
        let mut md = String::from("# Dinh et al. Table 2: acceptance rate of fixed-step HMC on cos(2x) data, 1-50-1 networks\n\n");
        let _ = writeln!(md, "Each cell: **ours** (mean ± s.e. over seeds) / paper's. ⚠ marks a cell more than {MARK_Z} combined standard errors from the paper's (the paper's s.e. taken as at least {PAPER_ROUNDING}, half its last printed digit).\n");
        let (mut compared, mut marked) = (0, 0);
        let mut deviating: Vec<String> = Vec::new();
        for &activation in &self.config.activations {
            let _ = writeln!(md, "## {}\n", activation.name());
            let mut header = String::from("| L \\ ε |");
            let mut rule = String::from("|---|");
            for e in &self.config.step_sizes {
                let _ = write!(header, " {e} |");
                rule.push_str("---|");
            }
            let _ = writeln!(md, "{header}\n{rule}");
            for &l in &self.config.num_steps {
                let mut row = format!("| {l} |");
                for &e in &self.config.step_sizes {
                    let Some(values) = cells.get(&(activation.name(), l, bits(e))) else {
                        row.push_str(" — |");
                        continue;
                    };
                    let ours = MeanSe::of(values);
                    match reference::table2_cell(&paper, activation, l, e) {
                        Some(ReferenceCell {
                            acceptance: theirs, ..
                        }) => {
                            compared += 1;
                            let z = distance_from_paper(&ours, &theirs);
                            let mark = if z > MARK_Z {
                                marked += 1;
                                deviating.push(format!(
                                    "{} L={l} ε={e}: ours {} vs paper {} ({z:.1} s.e.)",
                                    activation.name(),
                                    ours.display(),
                                    theirs.display()
                                ));
                                " ⚠"
                            } else {
                                ""
                            };
                            let _ = write!(
                                row,
                                " **{}** / {}{mark} |",
                                ours.display(),
                                theirs.display()
                            );
                        }
                        None => {
                            let _ = write!(row, " **{}** / — |", ours.display());
                        }
                    }
                }
                let _ = writeln!(md, "{row}");
            }
            md.push('\n');
        }
        let _ = writeln!(md, "## Agreement\n\n{} of {compared} cells within {MARK_Z} combined s.e. of the paper's; {marked} marked.\n", compared - marked);
        for line in &deviating {
            let _ = writeln!(md, "- {line}");
        }
        if !deviating.is_empty() {
            let _ = writeln!(
                md,
                "\nThe paper leaves the likelihood's σ, the start, the float type and the leaky-ReLU slope open; the sensitivity part (`sensitivity.md`, `--parts sensitivity`) measures how far each moves a few cells. Deviations in cells that collapse (acceptance near 0) mostly follow the start.\n"
            );
        }
        let _ = writeln!(md, "## Time\n\n{timing}\n");
        md.push_str(&self.settings_section());
        self.deviations = Some((marked, compared));
        self.write("table2.md", &md)?;

        // Figure 1: acceptance against L at two step sizes, and against ε at the shortest and
        // longest trajectories.
        let by_l: Vec<f64> = self
            .config
            .step_sizes
            .iter()
            .copied()
            .filter(|e| [0.001, 0.0015].iter().any(|t| (e - t).abs() < 1e-12))
            .collect();
        let by_l = if by_l.is_empty() {
            self.config.step_sizes.iter().copied().take(2).collect()
        } else {
            by_l
        };
        let lengths = [
            self.config.num_steps.iter().min().copied(),
            self.config.num_steps.iter().max().copied(),
        ];
        let mean = |a: Activation, l: usize, e: f64| {
            cells.get(&(a.name(), l, bits(e))).map(|v| MeanSe::of(v))
        };
        self.svg(
            "figure1_acceptance_vs_num_steps.svg",
            figures::acceptance_vs_num_steps(
                &self.config.activations,
                &self.config.num_steps,
                &by_l,
                &mean,
            ),
        )?;
        let mut lengths: Vec<usize> = lengths.into_iter().flatten().collect();
        lengths.dedup();
        self.svg(
            "figure1_acceptance_vs_step_size.svg",
            figures::acceptance_vs_step_size(
                &self.config.activations,
                &self.config.step_sizes,
                &lengths,
                &mean,
            ),
        )
    }

    fn efficiency(&mut self, records: &[ChainRecord], timing: &str) -> Result<()> {
        self.chain_csv(
            "figure2a.csv",
            records,
            &[("efficiency", &|r: &ChainRecord| {
                (r.chain.step_size * r.result.acceptance).to_string()
            })],
        )?;
        let mut curves: Vec<(Activation, EfficiencyCurve)> = Vec::new();
        for &activation in &self.config.activations {
            let seeds: Vec<Vec<(f64, f64)>> = (0..self.config.seeds)
                .map(|s| {
                    records
                        .iter()
                        .filter(|r| {
                            r.chain.network.activation == activation && r.chain.replicate == s
                        })
                        .map(|r| (r.chain.step_size, r.result.acceptance))
                        .collect()
                })
                .collect();
            curves.push((activation, EfficiencyCurve::from_seeds(&seeds)));
        }
        let mut md = format!(
            "# Dinh et al. Figure 2a: efficiency ε·a_ε against acceptance a_ε at travel time T = εL = {}\n\n\
             Per seed, ε·a_ε is interpolated linearly in a_ε between the step sizes {:?} (L = round(T/ε)), then averaged over the seeds on a grid of acceptance rates (0.005 apart) where every seed's curve is defined; the optimum is that average's maximum.\n\n\
             | activation | optimal acceptance (ours) | paper | efficiency at a = 0.75 (ours) | relative to sigmoid |\n|---|---|---|---|---|\n",
            self.config.travel_time, self.config.efficiency_step_sizes
        );
        let sigmoid_at = curves
            .iter()
            .find(|(a, _)| *a == Activation::Sigmoid)
            .and_then(|(_, c)| c.at(0.75));
        for (activation, curve) in &curves {
            let optimum = curve
                .optimum
                .map_or("—".to_string(), |(a, _)| format!("{a:.3}"));
            let paper = reference::optimal_acceptance(*activation)
                .map_or("—".to_string(), |v| format!("{v}"));
            let at = curve.at(0.75);
            let ratio = match (sigmoid_at, at) {
                (Some(s), Some(v)) if v > 0.0 => format!("sigmoid {:.1}× as efficient", s / v),
                _ => "— (curve does not reach 0.75)".to_string(),
            };
            let at = at.map_or("—".to_string(), |v| format!("{v:.2e}"));
            let _ = writeln!(
                md,
                "| {} | {optimum} | {paper} | {at} | {ratio} |",
                activation.name()
            );
        }
        let _ = writeln!(md, "\nThe paper: sigmoid more than 4× as efficient as ReLU at ~0.75 (§4).\n\n## Time\n\n{timing}\n");
        md.push_str(&self.settings_section());
        self.write("figure2a.md", &md)?;
        self.svg(
            "figure2a_efficiency.svg",
            figures::efficiency(&curves, self.config.travel_time),
        )
    }

    fn architectures(&mut self, records: &[ChainRecord], timing: &str) -> Result<()> {
        self.chain_csv("figure3.csv", records, &[])?;
        let cells = group(
            records,
            |r| {
                (
                    r.chain.network.activation.name(),
                    r.chain.network.hidden.clone(),
                )
            },
            |r| r.result.acceptance,
        );
        let deep_width: Vec<usize> = self
            .config
            .architectures
            .iter()
            .filter(|h| h.len() > 1)
            .map(|h| h[0])
            .collect();
        let is_deep = |h: &Vec<usize>| h.len() > 1 || deep_width.contains(&h[0]);
        let mut md = format!(
            "# Dinh et al. Figure 3: acceptance against the number of parameters (L = {}, ε = {})\n\n| network | parameters | family |",
            self.config.architecture_num_steps, self.config.architecture_step_size
        );
        for a in &self.config.activations {
            let _ = write!(md, " {} |", a.name());
        }
        md.push_str("\n|---|---|---|");
        md.push_str(&"---|".repeat(self.config.activations.len()));
        md.push('\n');
        for hidden in &self.config.architectures {
            let network = crate::Network {
                hidden: hidden.clone(),
                activation: Activation::Relu,
            };
            let _ = write!(
                md,
                "| {} | {} | {} |",
                network.shape(),
                network.parameters(),
                if is_deep(hidden) {
                    "deep (20 per layer)"
                } else {
                    "one hidden layer"
                }
            );
            for &a in &self.config.activations {
                let cell = cells
                    .get(&(a.name(), hidden.clone()))
                    .map_or("—".into(), |v| MeanSe::of(v).display());
                let _ = write!(md, " {cell} |");
            }
            md.push('\n');
        }
        let _ = writeln!(md, "\nThe paper shows no table for this figure: acceptance falls with the number of parameters for every activation, fastest for ReLU and leaky ReLU, and wide one-layer networks fall lower than deep ones of the same size.\n\n## Time\n\n{timing}\n");
        md.push_str(&self.settings_section());
        self.write("figure3.md", &md)?;
        let mean = |a: Activation, h: &Vec<usize>| {
            cells.get(&(a.name(), h.clone())).map(|v| MeanSe::of(v))
        };
        self.svg(
            "figure3_acceptance_vs_parameters.svg",
            figures::acceptance_vs_parameters(
                &self.config.activations,
                &self.config.architectures,
                &is_deep,
                &mean,
            ),
        )
    }

    /// After a stop (Ctrl-C, SIGTERM) between parts: `study.json` with the parts whose files
    /// were written and those still missing, and the [`StudyInterrupted`] error that says so.
    pub fn finish_interrupted(
        mut self,
        finished: &[DinhPart],
        missing: &[DinhPart],
    ) -> Result<DinhReport> {
        let record = serde_json::json!({
            "study": "dinh",
            "status": "interrupted",
            "finished_parts": finished,
            "missing_parts": missing,
            "config": self.config,
            "machine": self.cpu,
            "workers": self.workers,
            "timings": self.timings,
        });
        self.write("study.json", &serde_json::to_string_pretty(&record)?)?;
        Err(crate::StudyInterrupted {
            out_dir: self.out.to_path_buf(),
            missing: missing.iter().map(|p| format!("{p:?}")).collect(),
        }
        .into())
    }

    pub fn finish(mut self) -> Result<DinhReport> {
        let record = serde_json::json!({
            "study": "dinh",
            "status": "finished",
            "config": self.config,
            "machine": self.cpu,
            "workers": self.workers,
            "timings": self.timings,
            "table2_cells_marked": self.deviations.map(|(m, _)| m),
            "table2_cells_compared": self.deviations.map(|(_, c)| c),
        });
        self.write("study.json", &serde_json::to_string_pretty(&record)?)?;
        Ok(DinhReport {
            out_dir: self.out.to_path_buf(),
            timings: self.timings,
            files: self.files,
            table2_deviations: self.deviations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_marked_beyond_three_combined_standard_errors_with_the_papers_rounding() {
        let m = |mean: f64, se: f64| MeanSe { mean, se, n: 5 };
        // 0.1 apart with s.e. 0.01 each: 7.1 s.e., marked.
        assert!(distance_from_paper(&m(0.5, 0.01), &m(0.6, 0.01)) > MARK_Z);
        // 0.02 apart: 1.4 s.e., not marked.
        assert!(distance_from_paper(&m(0.5, 0.01), &m(0.52, 0.01)) < MARK_Z);
        // The paper's 0.000 ± 0.000 against our 0.001 ± 0.000: 2 s.e. thanks to the floor.
        assert!((distance_from_paper(&m(0.001, 0.0), &m(0.0, 0.0)) - 2.0).abs() < 1e-9);
        // ... and 0.004 ± 0.001 is 3.6 s.e. away: marked.
        assert!(distance_from_paper(&m(0.004, 0.001), &m(0.0, 0.0)) > MARK_Z);
    }
}
