//! Convergence diagnostics of a run's draws or a long-format CSV, with the chains that never moved.

use crate::analysis::chain_stationarity::{chain_stationarity, ChainStationarity};
use crate::config::run_config::RunConfig;
use crate::storage::run_dir::{write_atomic, RunDir};
use crate::storage::run_lock::{Access, RunLock};
use crate::storage::stored_chains::{
    check_draw_count, count_draw_rows, finished_sampling, unequal_lengths_reason,
};
use anyhow::{anyhow, bail, Context, Result};
use bnn_diagnostics::{
    read_long_draws_csv, serialize_non_finite, summarize_all, DrawsCsvError, ParameterSummary,
};
use serde::Serialize;
use serde_json::json;
use std::path::Path;

/// R-hat above this suggests the chains have not mixed (Vehtari et al. 2021).
pub const RHAT_WARN: f64 = 1.01;
/// Bulk or tail ESS below this makes quantile and interval estimates unreliable.
pub const ESS_WARN: f64 = 400.0;
/// Chain-wise R-hat above this: a chain has not settled within itself.
pub const CRHAT_WARN: f64 = 1.1;

/// Summary of all scalars of one tensor (e.g. `layer1_weight`): the per-layer view of
/// Sommer et al. 2024, where weights and biases are reported apart.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    pub name: String,
    pub count: usize,
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_mean: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_median: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_max: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub crhat_mean: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub crhat_max: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub ess_bulk_min: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub ess_bulk_median: f64,
}

/// The sampler's warnings in a run directory's draws.
#[derive(Debug, Clone, Default)]
pub struct SamplerWarnings {
    pub divergences: usize,
    pub max_tree_depth_hits: usize,
    /// NUTS's maximum tree depth from the run's config.
    pub max_depth: Option<usize>,
    /// The network's activation from the run's config (for [`SamplerWarnings::activation_note`]).
    pub activation: Option<String>,
    pub draws: usize,
    /// Acceptance and divergences early and late in the draws, when chains have 20 or more.
    pub drift: Option<AcceptanceDrift>,
}

impl SamplerWarnings {
    /// For a run with divergent draws whose network has kinks (ReLU and its variants): what
    /// the defaults study measured about such networks, in one line.
    pub fn activation_note(&self) -> Option<&'static str> {
        let kinked = matches!(
            self.activation.as_deref(),
            Some("relu" | "leaky_relu" | "trunc_relu")
        );
        (kinked && self.divergences > 0).then_some(crate::config::run_defaults::KINKED_NETWORK_NOTE)
    }
}

/// The mean acceptance statistic and the divergent draws in the first and in the last tenth of
/// every chain's draws, pooled over chains. A fall from the first tenth to the last means the
/// chains moved after warmup into regions where the adapted step size is too large (measured on
/// Table 3's runs: yacht 0.77 → 0.42, divergences 4× as frequent), which no step-size rule fixes
/// at the end of warmup; a longer warmup or a higher target acceptance does.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AcceptanceDrift {
    pub accept_first_tenth: f64,
    pub accept_last_tenth: f64,
    pub divergent_first_tenth: usize,
    pub divergent_last_tenth: usize,
    /// Draws in each tenth, over all chains.
    pub draws_per_tenth: usize,
}

impl AcceptanceDrift {
    /// A fall in mean acceptance larger than this is reported.
    pub const WARN_FALL: f64 = 0.1;

    pub fn warns(&self) -> bool {
        self.accept_first_tenth - self.accept_last_tenth > Self::WARN_FALL
    }

    /// Pools the chains' (acceptance, divergent) sequences; `None` when a chain has fewer than
    /// 20 draws (a tenth of them would be too few to compare).
    pub fn of_chains(chains: &[Vec<(f64, bool)>]) -> Option<Self> {
        if chains.is_empty() || chains.iter().any(|c| c.len() < 20) {
            return None;
        }
        let mut drift = Self::default();
        let (mut first, mut last) = (0.0, 0.0);
        for chain in chains {
            let tenth = chain.len() / 10;
            let (head, tail) = (&chain[..tenth], &chain[chain.len() - tenth..]);
            first += head.iter().map(|d| d.0).sum::<f64>();
            last += tail.iter().map(|d| d.0).sum::<f64>();
            drift.divergent_first_tenth += head.iter().filter(|d| d.1).count();
            drift.divergent_last_tenth += tail.iter().filter(|d| d.1).count();
            drift.draws_per_tenth += tenth;
        }
        drift.accept_first_tenth = first / drift.draws_per_tenth as f64;
        drift.accept_last_tenth = last / drift.draws_per_tenth as f64;
        Some(drift)
    }
}

/// Everything `bnn diagnose` reports.
#[derive(Debug, Clone)]
pub struct RunDiagnostics {
    /// Parameter names (CmdStan columns; `lp__` first for a run directory).
    pub names: Vec<String>,
    pub summaries: Vec<ParameterSummary>,
    pub groups: Vec<GroupSummary>,
    pub chains: usize,
    /// The chains' numbers: `0..chains` for a run directory, the `chain` column of a draws CSV.
    pub chain_ids: Vec<u64>,
    /// Draws per chain used (the common prefix when chains have unequal lengths).
    pub draws: usize,
    /// Set when chains had unequal lengths (early stopping, an unfinished run) and were cut to
    /// their common prefix.
    pub truncated_to: Option<usize>,
    /// Why the lengths differ, from the chains' checkpoints (early stopping, an unfinished run);
    /// `None` when they do not, or for draws without checkpoints.
    pub unequal_lengths: Option<String>,
    /// Set when the run has not finished sampling: what was read, and how to continue.
    pub partial: Option<String>,
    /// Chains (by number) in which every parameter kept one value: they never moved.
    pub stuck_chains: Vec<u64>,
    /// `None` for a draws CSV, which has no sampler statistics.
    pub sampler: Option<SamplerWarnings>,
    /// Function-space R-hat from the run's `summary.json`, when it has one.
    pub function_space: Option<serde_json::Value>,
    pub rhat_above_1_01: usize,
    pub ess_below_400: usize,
    pub crhat_above_1_1: usize,
    /// Per chain of a run directory: its warmup (length, how it ended) and whether its draws
    /// look stationary; empty for a draws CSV.
    pub chain_stationarity: Vec<ChainStationarity>,
}

/// `[param][chain][draw]` values with their names and chain numbers.
struct Draws {
    names: Vec<String>,
    chain_ids: Vec<u64>,
    values: Vec<Vec<Vec<f64>>>,
}

impl RunDiagnostics {
    /// Diagnostics of a run directory's `draws_chain_<c>.csv` files.
    pub fn of_run_dir(dir: &Path) -> Result<Self> {
        let _reading = RunLock::acquire(dir, Access::Read)?;
        let (draws, mut sampler, truncated_to, unequal_lengths) = read_run_dir(dir)?;
        let function_space = std::fs::read_to_string(dir.join("summary.json")).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()).map(|s| {
            json!({
                "rhat_test_loglik": s["rhat_test_loglik"], "rhat_test_rmse": s["rhat_test_rmse"],
                "pointwise_predictive_rhat_max": s["pointwise_predictive_rhat_max"], "pointwise_predictive_rhat_mean": s["pointwise_predictive_rhat_mean"],
                "ess_test_loglik": s["ess_test_loglik"], "pointwise_predictive_ess_median": s["pointwise_predictive_ess_median"],
            })
        });
        let config = RunDir::new(dir).load_config().ok();
        sampler.max_depth = config.as_ref().and_then(|c| c.sampler.max_tree_depth());
        sampler.activation = config.map(|c| c.model.activation);
        let mut diagnostics = Self::of_draws(draws, Some(sampler), truncated_to, function_space)?;
        diagnostics.unequal_lengths = unequal_lengths;
        if is_run_dir(dir) && finished_sampling(&RunDir::new(dir))?.is_none() {
            diagnostics.partial = Some(format!(
                "{} has not finished sampling: these are the draws up to each chain's last checkpoint ({} per chain); continue with `bnn sample --resume {}`",
                dir.display(),
                diagnostics.draws,
                dir.display()
            ));
        }
        diagnostics.chain_stationarity =
            chain_stationarity(&RunDir::new(dir), diagnostics.chains).unwrap_or_default();
        Ok(diagnostics)
    }

    /// Diagnostics of draws in long format (columns `chain,draw,<param>...`).
    pub fn of_long_draws_csv(path: &Path) -> Result<Self> {
        let long = read_long_draws_csv(path).map_err(|e| match e {
            DrawsCsvError::Io { .. } => anyhow!(e),
            other => anyhow!("{}: {other}", path.display()),
        })?;
        Self::of_draws(
            Draws {
                names: long.parameter_names,
                chain_ids: long.chain_ids,
                values: long.draws,
            },
            None,
            None,
            None,
        )
    }

    fn of_draws(
        draws: Draws,
        sampler: Option<SamplerWarnings>,
        truncated_to: Option<usize>,
        function_space: Option<serde_json::Value>,
    ) -> Result<Self> {
        let draws_per_chain = draws
            .values
            .first()
            .and_then(|p| p.first())
            .map_or(0, Vec::len);
        if draws_per_chain < 4 {
            bail!("at least 4 draws per chain are needed for R-hat and ESS");
        }
        let chains = draws.values[0].len();
        let stuck_chains = (0..chains)
            .filter(|&c| {
                draws
                    .values
                    .iter()
                    .all(|parameter| is_constant(&parameter[c]))
            })
            .map(|c| draws.chain_ids[c])
            .collect();
        let summaries = summarize_all(&draws.values);
        let groups = group_summaries(&draws.names, &summaries);
        Ok(Self {
            rhat_above_1_01: summaries.iter().filter(|s| s.rhat > RHAT_WARN).count(),
            ess_below_400: summaries
                .iter()
                .filter(|s| s.ess_bulk.min(s.ess_tail) < ESS_WARN)
                .count(),
            crhat_above_1_1: summaries
                .iter()
                .filter(|s| s.crhat.iter().any(|&r| r > CRHAT_WARN))
                .count(),
            names: draws.names,
            summaries,
            groups,
            chains,
            chain_ids: draws.chain_ids,
            draws: draws_per_chain,
            truncated_to,
            unequal_lengths: None,
            partial: None,
            stuck_chains,
            sampler,
            function_space,
            chain_stationarity: Vec::new(),
        })
    }

    /// Parameter indices by R-hat, worst first (NaN last).
    pub fn worst_first(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.summaries.len()).collect();
        order.sort_by(|&a, &b| self.summaries[b].rhat.total_cmp(&self.summaries[a].rhat));
        order
    }

    /// The report as JSON: R-hat of stuck chains is `"inf"`, undefined values are `null`.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        let parameters: serde_json::Map<String, serde_json::Value> = self
            .names
            .iter()
            .zip(&self.summaries)
            .map(|(name, s)| {
                Ok((
                    name.clone(),
                    serde_json::to_value(ParameterRecord::from(s))?,
                ))
            })
            .collect::<Result<_>>()?;
        let sampler = self.sampler.clone().unwrap_or_default();
        let mut warnings = json!({ "rhat_above_1_01": self.rhat_above_1_01, "ess_below_400": self.ess_below_400, "crhat_above_1_1": self.crhat_above_1_1,
                                   "divergences": sampler.divergences, "max_tree_depth_hits": sampler.max_tree_depth_hits, "draws": sampler.draws });
        if let Some(partial) = &self.partial {
            warnings["partial_run"] = json!(partial);
        }
        if let (Some(draws), Some(reason)) = (self.truncated_to, &self.unequal_lengths) {
            warnings["unequal_chain_lengths"] =
                json!({ "draws_used_per_chain": draws, "reason": reason });
        }
        if !self.stuck_chains.is_empty() {
            warnings["chains_not_moving"] = json!(self.stuck_chains);
        }
        if let Some(note) = sampler.activation_note() {
            warnings["activation"] = json!(note);
        }
        if let Some(drift) = sampler.drift {
            warnings["acceptance_drift"] = json!({
                "accept_first_tenth": drift.accept_first_tenth, "accept_last_tenth": drift.accept_last_tenth,
                "divergent_first_tenth": drift.divergent_first_tenth, "divergent_last_tenth": drift.divergent_last_tenth,
                "draws_per_tenth": drift.draws_per_tenth, "warns": drift.warns(),
            });
        }
        Ok(json!({
            "parameters": parameters,
            "groups": serde_json::to_value(&self.groups)?,
            "function_space": self.function_space,
            "chains": serde_json::to_value(&self.chain_stationarity)?,
            "warnings": warnings,
        }))
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        write_atomic(
            path,
            serde_json::to_string_pretty(&self.to_json()?)?.as_bytes(),
        )
    }
}

/// What `diagnostics.json` keeps of each parameter's summary.
#[derive(Serialize)]
struct ParameterRecord {
    #[serde(serialize_with = "serialize_non_finite")]
    mean: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    sd: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    rhat: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    rhat_split: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    ess_bulk: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    ess_tail: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    mcse_mean: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    mcse_sd: f64,
    #[serde(serialize_with = "bnn_diagnostics::serialize_non_finite_slice")]
    crhat: Vec<f64>,
}

impl From<&ParameterSummary> for ParameterRecord {
    fn from(s: &ParameterSummary) -> Self {
        Self {
            mean: s.mean,
            sd: s.sd,
            rhat: s.rhat,
            rhat_split: s.rhat_split,
            ess_bulk: s.ess_bulk,
            ess_tail: s.ess_tail,
            mcse_mean: s.mcse_mean,
            mcse_sd: s.mcse_sd,
            crhat: s.crhat.clone(),
        }
    }
}

fn is_constant(chain: &[f64]) -> bool {
    chain.iter().all(|v| v.to_bits() == chain[0].to_bits())
}

/// Reads `draws_chain_<c>.csv` (CmdStan-style: statistics columns ending in `__`, then parameters).
/// Whether `dir` is a bnn run (or module run), whose records say how many draws each chain kept.
fn is_run_dir(dir: &Path) -> bool {
    RunDir::new(dir).config().exists() || dir.join("module_run.json").exists()
}

/// In a run directory (with `config.toml`) every chain's file must be there and hold the draws
/// its checkpoint (or finished record) says; of an unfinished run the draws up to each chain's
/// last checkpoint are read. Chains of unequal length get the reason their checkpoints give.
fn read_run_dir(dir: &Path) -> Result<(Draws, SamplerWarnings, Option<usize>, Option<String>)> {
    let run_dir = RunDir::new(dir);
    // A whole run's config says how many chains there are (a shard's directory holds only some).
    let config = run_dir.load_config().ok();
    let planned = config
        .as_ref()
        .filter(|_| !run_dir.shard_manifest().exists())
        .map(RunConfig::chains);
    let mut files = Vec::new();
    for chain in 0.. {
        let path = dir.join(format!("draws_chain_{chain}.csv"));
        if planned.is_some_and(|n| chain >= n) || planned.is_none() && !path.is_file() {
            break;
        }
        if !path.is_file() {
            bail!("{} is missing: the run has {} chains, and diagnosing the others alone would hide it", path.display(), planned.unwrap_or(0));
        }
        files.push(path);
    }
    if files.is_empty() {
        bail!(
            "{} has no draws_chain_0.csv: is it a `bnn sample` output directory?",
            dir.display()
        );
    }
    let mut names: Vec<String> = Vec::new();
    let mut values: Vec<Vec<Vec<f64>>> = Vec::new();
    let mut stats = SamplerWarnings {
        max_depth: RunDir::new(dir)
            .load_config()
            .ok()
            .and_then(|c| c.sampler.max_tree_depth()),
        ..SamplerWarnings::default()
    };
    let mut chain_transitions: Vec<Vec<(f64, bool)>> = Vec::new();
    // A bnn run records how many draws each chain kept; a folder of draws files alone does not.
    let recorded = is_run_dir(dir);
    for (chain, path) in files.iter().enumerate() {
        let limit = match recorded {
            true => check_draw_count(&run_dir, chain, count_draw_rows(path)?)?,
            false => usize::MAX,
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines
            .next()
            .map(|h| h.split(',').collect())
            .unwrap_or_default();
        // Keep lp__ as a parameter-like quantity; drop the other sampler statistics.
        let keep: Vec<usize> = (0..header.len())
            .filter(|&i| !header[i].ends_with("__") || header[i] == "lp__")
            .collect();
        let divergent = header.iter().position(|h| *h == "divergent__");
        let depth = header.iter().position(|h| *h == "treedepth__");
        let accept = header.iter().position(|h| *h == "accept_stat__");
        let mut transitions = Vec::new();
        let chain_names: Vec<String> = keep.iter().map(|&i| header[i].to_string()).collect();
        if chain == 0 {
            names = chain_names;
            values = vec![vec![Vec::new(); files.len()]; names.len()];
        } else if chain_names != names {
            bail!("{}: columns differ from chain 0's", path.display());
        }
        for (line_no, line) in lines.take(limit).enumerate() {
            let cells: Vec<&str> = line.split(',').collect();
            if cells.len() != header.len() {
                bail!(
                    "{} line {}: expected {} fields, found {}",
                    path.display(),
                    line_no + 2,
                    header.len(),
                    cells.len()
                );
            }
            for (p, &i) in keep.iter().enumerate() {
                let v: f64 = cells[i].trim().parse().map_err(|_| {
                    anyhow!(
                        "{} line {}, column {} ({}): '{}' is not a number",
                        path.display(),
                        line_no + 2,
                        i + 1,
                        header[i],
                        cells[i]
                    )
                })?;
                if !v.is_finite() {
                    bail!(
                        "{} line {}, column {} ({}): {} is not finite; a chain never keeps such a draw, so the file is damaged (restore it, or sample the run again)",
                        path.display(),
                        line_no + 2,
                        i + 1,
                        header[i],
                        cells[i]
                    );
                }
                values[p][chain].push(v);
            }
            stats.draws += 1;
            let diverged = divergent.is_some_and(|i| cells[i].trim() != "0");
            stats.divergences += usize::from(diverged);
            if let Some(i) = accept {
                let a: f64 = cells[i].trim().parse().map_err(|_| {
                    anyhow!(
                        "{} line {}: accept_stat__ '{}' is not a number",
                        path.display(),
                        line_no + 2,
                        cells[i]
                    )
                })?;
                transitions.push((a, diverged));
            }
            if let (Some(i), Some(max)) = (depth, stats.max_depth) {
                stats.max_tree_depth_hits +=
                    usize::from(cells[i].trim().parse::<usize>().is_ok_and(|d| d >= max));
            }
        }
        if accept.is_some() {
            chain_transitions.push(transitions);
        }
    }
    if chain_transitions.len() == files.len() {
        stats.drift = AcceptanceDrift::of_chains(&chain_transitions);
    }
    if values.is_empty() {
        bail!("{} has no parameter columns", files[0].display());
    }
    let lengths: Vec<usize> = values[0].iter().map(Vec::len).collect();
    let chains: Vec<usize> = (0..files.len()).collect();
    // Chains stopped early (LPPD convergence) or a run still in progress have unequal lengths:
    // the diagnostics use the common prefix.
    let shortest = values[0].iter().map(Vec::len).min().unwrap_or(0);
    let mut truncated_to = None;
    if values[0].iter().any(|c| c.len() != shortest) {
        for parameter in &mut values {
            for chain in parameter.iter_mut() {
                chain.truncate(shortest);
            }
        }
        truncated_to = Some(shortest);
    }
    let reason = match (&config, truncated_to) {
        (Some(config), Some(_)) => Some(unequal_lengths_reason(
            &run_dir,
            &chains,
            &lengths,
            config.sampler.draws,
        )?),
        _ => None,
    };
    let chain_ids = (0..files.len() as u64).collect();
    Ok((
        Draws {
            names,
            chain_ids,
            values,
        },
        stats,
        truncated_to,
        reason,
    ))
}

/// The median of the non-NaN values (NaN when there are none).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    }
}

fn mean_max(v: &[f64]) -> (f64, f64) {
    let finite: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if finite.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    (
        finite.iter().sum::<f64>() / finite.len() as f64,
        finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

/// Groups scalars by tensor: the CmdStan name up to its first index (`layer0_weight.3.1`).
fn group_summaries(names: &[String], summaries: &[ParameterSummary]) -> Vec<GroupSummary> {
    let mut order: Vec<String> = Vec::new();
    for name in names {
        let base = name.split('.').next().unwrap_or(name).to_string();
        if !order.contains(&base) {
            order.push(base);
        }
    }
    order
        .into_iter()
        .map(|base| {
            let members: Vec<&ParameterSummary> = names
                .iter()
                .zip(summaries)
                .filter(|(n, _)| n.split('.').next() == Some(base.as_str()))
                .map(|(_, s)| s)
                .collect();
            let rhats: Vec<f64> = members.iter().map(|s| s.rhat).collect();
            let crhats: Vec<f64> = members
                .iter()
                .flat_map(|s| s.crhat.iter().copied())
                .collect();
            let ess: Vec<f64> = members.iter().map(|s| s.ess_bulk).collect();
            let (rhat_mean, rhat_max) = mean_max(&rhats);
            let (crhat_mean, crhat_max) = mean_max(&crhats);
            GroupSummary {
                name: base,
                count: members.len(),
                rhat_mean,
                rhat_median: median(rhats),
                rhat_max,
                crhat_mean,
                crhat_max,
                ess_bulk_min: ess
                    .iter()
                    .copied()
                    .filter(|x| !x.is_nan())
                    .reduce(f64::min)
                    .unwrap_or(f64::NAN),
                ess_bulk_median: median(ess),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kinked_network_whose_chains_diverged_gets_the_defaults_studys_note() {
        let mut warnings = SamplerWarnings {
            divergences: 3,
            activation: Some("relu".into()),
            ..SamplerWarnings::default()
        };
        let note = warnings.activation_note().expect("a note for ReLU");
        assert!(note.contains("bnn study defaults") && note.contains("defaults.html"));
        warnings.activation = Some("leaky_relu".into());
        assert!(warnings.activation_note().is_some());
        warnings.divergences = 0;
        assert_eq!(warnings.activation_note(), None);
        warnings.divergences = 3;
        warnings.activation = Some("tanh".into());
        assert_eq!(warnings.activation_note(), None);
    }

    fn long_csv(chains: &[Vec<f64>]) -> tempfile::NamedTempFile {
        let mut text = String::from("chain,draw,a,b\n");
        for (c, chain) in chains.iter().enumerate() {
            for (d, v) in chain.iter().enumerate() {
                text += &format!("{c},{d},{v},{}\n", if c == 1 { 0.5 } else { v * 2.0 });
            }
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn chains_that_never_moved_are_named_and_their_rhat_is_inf_in_json() {
        // Chain 1 constant in both parameters; chain 0 moves.
        let file = long_csv(&[vec![0.1, 0.4, 0.2, 0.9, 0.3, 0.7], vec![3.0; 6]]);
        let diagnostics = RunDiagnostics::of_long_draws_csv(file.path()).unwrap();
        assert_eq!(diagnostics.stuck_chains, vec![1]);
        let json = diagnostics.to_json().unwrap();
        assert_eq!(json["warnings"]["chains_not_moving"], json!([1]));
        // Both chains constant but apart: zero within-chain variance, R-hat +∞.
        let file = long_csv(&[vec![1.0; 6], vec![3.0; 6]]);
        let diagnostics = RunDiagnostics::of_long_draws_csv(file.path()).unwrap();
        assert_eq!(diagnostics.stuck_chains, vec![0, 1]);
        let json = diagnostics.to_json().unwrap();
        assert_eq!(json["parameters"]["a"]["rhat"], "inf");
        assert_eq!(json["groups"][0]["rhat_max"], "inf");
        assert_eq!(diagnostics.rhat_above_1_01, 2);
    }

    #[test]
    fn moving_chains_have_no_stuck_warning_key() {
        let file = long_csv(&[
            vec![0.1, 0.4, 0.2, 0.9, 0.3, 0.7],
            vec![0.2, 0.1, 0.8, 0.5, 0.4, 0.6],
        ]);
        let diagnostics = RunDiagnostics::of_long_draws_csv(file.path()).unwrap();
        // Column b of chain 1 is constant, column a is not: chain 1 moved.
        assert!(diagnostics.stuck_chains.is_empty());
        assert!(diagnostics.to_json().unwrap()["warnings"]
            .get("chains_not_moving")
            .is_none());
    }

    #[test]
    fn a_run_directory_with_a_stuck_chain_is_flagged_and_unequal_chains_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let header =
            "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,w.1,b.1\n";
        let mut moving = String::from(header);
        for d in 0..6 {
            moving += &format!(
                "{},0.9,0.1,3,7,0,1.0,{},{}\n",
                -1.0 - 0.1 * d as f64,
                0.1 * d as f64,
                (d % 3) as f64
            );
        }
        // Chain 1 never moved: every kept draw is the same row; it is also one draw longer.
        let stuck = String::from(header) + &"-3.5,0,0.1,3,7,0,3.5,0.25,-1\n".repeat(7);
        std::fs::write(dir.path().join("draws_chain_0.csv"), moving).unwrap();
        std::fs::write(dir.path().join("draws_chain_1.csv"), stuck).unwrap();
        let diagnostics = RunDiagnostics::of_run_dir(dir.path()).unwrap();
        assert_eq!(diagnostics.stuck_chains, vec![1]);
        assert_eq!((diagnostics.truncated_to, diagnostics.draws), (Some(6), 6));
        assert_eq!(diagnostics.names, ["lp__", "w.1", "b.1"]);
        assert_eq!(diagnostics.sampler.as_ref().map(|s| s.draws), Some(13));
    }

    #[test]
    fn acceptance_falling_after_warmup_is_measured_per_tenth_and_warned() {
        // Chain 0 (30 draws): acceptance 0.9 at first, 0.5 at the end with 2 of its last 3
        // draws divergent; chain 1 (20 draws) steady at 0.8.
        let falling: Vec<(f64, bool)> = (0..30)
            .map(|d| if d < 15 { (0.9, false) } else { (0.5, d >= 28) })
            .collect();
        let steady = vec![(0.8, false); 20];
        let drift = AcceptanceDrift::of_chains(&[falling.clone(), steady.clone()]).unwrap();
        assert_eq!(drift.draws_per_tenth, 5);
        assert!(
            (drift.accept_first_tenth - (3.0 * 0.9 + 2.0 * 0.8) / 5.0).abs() < 1e-12,
            "{drift:?}"
        );
        assert!(
            (drift.accept_last_tenth - (3.0 * 0.5 + 2.0 * 0.8) / 5.0).abs() < 1e-12,
            "{drift:?}"
        );
        assert_eq!(
            (drift.divergent_first_tenth, drift.divergent_last_tenth),
            (0, 2)
        );
        assert!(drift.warns());
        assert!(
            !AcceptanceDrift::of_chains(&[steady.clone(), steady.clone()])
                .unwrap()
                .warns()
        );
        // A chain with fewer than 20 draws has too few per tenth to compare.
        assert_eq!(
            AcceptanceDrift::of_chains(&[falling, vec![(0.8, false); 19]]),
            None
        );

        // Read from a run directory and written into the JSON's warnings.
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from(
            "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,w.1\n",
        );
        for d in 0..40 {
            let (accept, divergent) = if d < 20 { (0.85, 0) } else { (0.4, d % 2) };
            text += &format!(
                "{},{accept},0.1,3,7,{divergent},1.0,{}\n",
                -1.0 - 0.01 * d as f64,
                (d as f64 * 0.7).sin()
            );
        }
        std::fs::write(dir.path().join("draws_chain_0.csv"), &text).unwrap();
        let diagnostics = RunDiagnostics::of_run_dir(dir.path()).unwrap();
        let json = diagnostics.to_json().unwrap();
        let drift = &json["warnings"]["acceptance_drift"];
        assert_eq!(drift["accept_first_tenth"], 0.85, "{drift}");
        assert_eq!(drift["accept_last_tenth"], 0.4, "{drift}");
        assert_eq!(
            (
                drift["divergent_first_tenth"].as_u64(),
                drift["divergent_last_tenth"].as_u64()
            ),
            (Some(0), Some(2)),
            "{drift}"
        );
        assert_eq!(drift["warns"], true, "{drift}");
    }

    #[test]
    fn too_few_draws_are_refused() {
        let file = long_csv(&[vec![0.1, 0.4, 0.2], vec![0.2, 0.1, 0.8]]);
        let error = RunDiagnostics::of_long_draws_csv(file.path()).unwrap_err();
        assert!(error.to_string().contains("at least 4 draws"), "{error}");
    }
}
