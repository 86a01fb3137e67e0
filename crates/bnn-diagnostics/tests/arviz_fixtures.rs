//! Every value of every ArviZ reference fixture in `shared/fixtures/diagnostics`, recomputed and
//! compared with the tolerances the fixtures' README recommends:
//!
//! | fields | check |
//! |---|---|
//! | `rhat*`, `crhat4*` | `|a − e| ≤ 1e-9` |
//! | `ess*`, `mcse*` | `|a − e| ≤ 1e-8 |e|` |
//! | `mean`, `sd` | `|a − e| ≤ 1e-12 |e|` |
//! | `"NaN"`, `"Infinity"` | NaN, +∞ exactly |
//! | `fragile` | the rule stated there ("+inf or > 1e6") |
//!
//! The intermediates under `debug` (quantile thresholds, Beta quantiles, order-statistic positions
//! and indices, fold medians) are checked too, so a mismatch points at its cause. Failures name
//! case / parameter / field; the run ends with the largest error seen per field family.
//!
//! The fixtures are read in place (never copied into the repository) from
//! `$BNN_FIXTURES_DIR`, or by default from `shared/fixtures/diagnostics` next to the workspace;
//! without them the tests say so and pass (`BNN_REQUIRE_DATA=1` makes that a failure). The
//! degenerate cases are checked without files in `arviz_degenerate.rs`.

use bnn_diagnostics::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

const RHAT_ABSOLUTE: f64 = 1e-9;
const ESS_RELATIVE: f64 = 1e-8;
const MCSE_RELATIVE: f64 = 1e-8;
const MOMENT_RELATIVE: f64 = 1e-12;
/// The README's rule for R-hat when W is zero up to rounding: ArviZ divides by 0 or by ~1e-32.
const FRAGILE_HUGE_RULE: &str = "+inf or > 1e6";
const FRAGILE_HUGE_THRESHOLD: f64 = 1e6;
/// `0.1586553` and `0.8413447`, as in ArviZ's `mcse(method="quantile")`.
const ONE_SIGMA_PROBABILITIES: [f64; 2] = [0.158_655_3, 0.841_344_7];
/// Beta quantiles are compared with scipy's to this relative accuracy (the README asks for 1e-6 to
/// keep the indices, our implementation is good to ~1e-14).
const BETA_QUANTILE_RELATIVE: f64 = 1e-10;

/// Case names, from the `<case>.expected.json` files present.
fn case_names(dir: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| {
        panic!(
            "fixtures folder {} is not readable ({e}); set BNN_FIXTURES_DIR",
            dir.display()
        )
    });
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            entry
                .ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".expected.json")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

#[derive(Clone, Copy)]
enum Rule {
    Absolute(f64),
    Relative(f64),
    /// "+inf or > 1e6".
    HugeOrInfinite,
}

/// Failures and the largest finite errors, per field family.
#[derive(Default)]
struct Report {
    failures: Vec<String>,
    /// family → (max abs error, max rel error, comparisons)
    errors: BTreeMap<&'static str, (f64, f64, usize)>,
    non_finite_matches: usize,
}

impl Report {
    fn check(
        &mut self,
        location: &str,
        family: &'static str,
        actual: f64,
        expected: &Value,
        rule: Rule,
    ) {
        let expected = number(expected, location);
        let passed = match rule {
            Rule::HugeOrInfinite => actual == f64::INFINITY || actual > FRAGILE_HUGE_THRESHOLD,
            _ if expected.is_nan() => actual.is_nan(),
            _ if expected.is_infinite() => actual == expected,
            Rule::Absolute(tolerance) => (actual - expected).abs() <= tolerance,
            Rule::Relative(tolerance) => (actual - expected).abs() <= tolerance * expected.abs(),
        };
        if expected.is_finite() && actual.is_finite() && !matches!(rule, Rule::HugeOrInfinite) {
            let absolute = (actual - expected).abs();
            let relative = if expected == 0.0 {
                absolute
            } else {
                absolute / expected.abs()
            };
            let entry = self.errors.entry(family).or_insert((0.0, 0.0, 0));
            entry.0 = entry.0.max(absolute);
            entry.1 = entry.1.max(relative);
            entry.2 += 1;
        } else if passed {
            self.non_finite_matches += 1;
        }
        if !passed {
            self.failures.push(format!(
                "{location}: got {actual:e}, expected {expected:e} (diff {:e})",
                (actual - expected).abs()
            ));
        }
    }
}

/// A JSON number, or one of the strings "NaN", "Infinity", "-Infinity".
fn number(value: &Value, location: &str) -> f64 {
    match value {
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) if s == "NaN" => f64::NAN,
        Value::String(s) if s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
        other => panic!("{location}: unexpected JSON value {other}"),
    }
}

fn rule_for(fragile: Option<&Value>, field: &str, default: Rule, location: &str) -> Rule {
    match fragile.and_then(|f| f.get(field)) {
        None => default,
        Some(Value::String(text)) if text.contains(FRAGILE_HUGE_RULE) => Rule::HugeOrInfinite,
        Some(other) => panic!("{location}: fragile rule not understood: {other}"),
    }
}

/// Folds all draws (not the split draws) about their median and takes bulk R-hat: the tail
/// R-hat of `az.summary` and R posterior.
fn tail_rhat_folded_about_all_draws(chains: &[Vec<f64>]) -> f64 {
    let all: Vec<f64> = chains.concat();
    let center = median(&all);
    let folded: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| c.iter().map(|v| (v - center).abs()).collect())
        .collect();
    rhat_bulk(&folded)
}

/// numpy's median: the mean of the two middle values for an even count.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

fn split_draws(chains: &[Vec<f64>]) -> Vec<f64> {
    let n = chains[0].len();
    let half = n / 2;
    chains
        .iter()
        .flat_map(|c| c[..half].iter().chain(&c[n - half..]).copied())
        .collect()
}

fn check_parameter(
    report: &mut Report,
    case: &str,
    name: &str,
    chains: &[Vec<f64>],
    expected: &Value,
    fragile: Option<&Value>,
) {
    let at = |field: &str| format!("{case}/{name}/{field}");
    let field = |key: &str| {
        expected
            .get(key)
            .unwrap_or_else(|| panic!("{}: missing in expected.json", at(key)))
    };

    let rhats = [
        ("rhat", rhat(chains)),
        ("rhat_bulk", rhat_bulk(chains)),
        ("rhat_tail", rhat_tail(chains)),
        ("rhat_split", rhat_split(chains)),
        ("rhat_identity", rhat_identity(chains)),
    ];
    for (key, actual) in rhats {
        let rule = rule_for(fragile, key, Rule::Absolute(RHAT_ABSOLUTE), &at(key));
        report.check(&at(key), "rhat*", actual, field(key), rule);
    }
    for (key, per_chain) in [
        ("crhat4", crhat4 as fn(&[f64]) -> f64),
        ("crhat4_sommer", crhat4_sommer),
    ] {
        let values = field(key)
            .as_array()
            .unwrap_or_else(|| panic!("{}: not an array", at(key)));
        assert_eq!(
            values.len(),
            chains.len(),
            "{}: one value per chain",
            at(key)
        );
        for (j, (chain, value)) in chains.iter().zip(values).enumerate() {
            let location = format!("{}[{j}]", at(key));
            report.check(
                &location,
                "crhat4*",
                per_chain(chain),
                value,
                Rule::Absolute(RHAT_ABSOLUTE),
            );
        }
    }

    let ess = [
        ("ess_bulk", ess_bulk(chains)),
        ("ess_tail", ess_tail(chains)),
        ("ess_quantile_05", ess_quantile(chains, 0.05)),
        ("ess_quantile_95", ess_quantile(chains, 0.95)),
        ("ess_mean", ess_mean(chains)),
        ("ess_sd", ess_sd(chains)),
        ("ess_identity", ess_identity(chains)),
    ];
    for (key, actual) in ess {
        report.check(
            &at(key),
            "ess*",
            actual,
            field(key),
            Rule::Relative(ESS_RELATIVE),
        );
    }
    for (key, actual) in [
        ("mcse_mean", mcse_mean(chains)),
        ("mcse_sd", mcse_sd(chains)),
    ] {
        report.check(
            &at(key),
            "mcse_mean/sd",
            actual,
            field(key),
            Rule::Relative(MCSE_RELATIVE),
        );
    }
    for (key, p) in [("mcse_quantile_05", 0.05), ("mcse_quantile_95", 0.95)] {
        report.check(
            &at(key),
            "mcse_quantile*",
            mcse_quantile(chains, p),
            field(key),
            Rule::Relative(MCSE_RELATIVE),
        );
    }

    let summary = summarize(chains);
    report.check(
        &at("mean"),
        "mean/sd",
        summary.mean,
        field("mean"),
        Rule::Relative(MOMENT_RELATIVE),
    );
    report.check(
        &at("sd"),
        "mean/sd",
        summary.sd,
        field("sd"),
        Rule::Relative(MOMENT_RELATIVE),
    );

    // az.summary's own code path: equal to the fields above, except r_hat for odd lengths, where
    // az.summary folds about the median of all draws instead of the split draws.
    let az_summary = field("az_summary");
    let summary_fields = [
        ("mean", summary.mean, Rule::Relative(MOMENT_RELATIVE)),
        ("sd", summary.sd, Rule::Relative(MOMENT_RELATIVE)),
        (
            "mcse_mean",
            summary.mcse_mean,
            Rule::Relative(MCSE_RELATIVE),
        ),
        ("mcse_sd", summary.mcse_sd, Rule::Relative(MCSE_RELATIVE)),
        ("ess_bulk", summary.ess_bulk, Rule::Relative(ESS_RELATIVE)),
        ("ess_tail", summary.ess_tail, Rule::Relative(ESS_RELATIVE)),
    ];
    for (key, actual, rule) in summary_fields {
        report.check(
            &at(&format!("az_summary.{key}")),
            "az_summary",
            actual,
            &az_summary[key],
            rule,
        );
    }
    let summary_rhat = larger(summary.rhat_bulk, tail_rhat_folded_about_all_draws(chains));
    let rule = rule_for(fragile, "rhat", Rule::Absolute(RHAT_ABSOLUTE), &at("rhat"));
    report.check(
        &at("az_summary.r_hat"),
        "az_summary",
        summary_rhat,
        &az_summary["r_hat"],
        rule,
    );
    let even_length = chains[0].len() % 2 != 1;
    if even_length {
        report.check(
            &at("az_summary.r_hat (= summarize().rhat)"),
            "az_summary",
            summary.rhat,
            &az_summary["r_hat"],
            rule,
        );
    }
    assert_eq!(summary.crhat.len(), chains.len());
    for (j, &value) in summary.crhat.iter().enumerate() {
        let location = format!("{}[{j}]", at("summarize().crhat (= crhat4_sommer)"));
        report.check(
            &location,
            "crhat4*",
            value,
            &field("crhat4_sommer")[j],
            Rule::Absolute(RHAT_ABSOLUTE),
        );
    }

    check_debug(report, &at("debug"), chains, field("debug"), fragile);
}

/// The intermediates: they localize a failure (threshold, Beta quantile, index, or fold median).
fn check_debug(
    report: &mut Report,
    at: &str,
    chains: &[Vec<f64>],
    debug: &Value,
    fragile: Option<&Value>,
) {
    let all: Vec<f64> = chains.concat();
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    let size = sorted.len() as f64;
    for (suffix, p) in [("05", 0.05), ("95", 0.95)] {
        let threshold = quantile_type7(&all, p);
        report.check(
            &format!("{at}.quantile_{suffix}"),
            "debug q_p",
            threshold,
            &debug[format!("quantile_{suffix}")],
            Rule::Relative(MOMENT_RELATIVE),
        );

        let expected = &debug[format!("mcse_quantile_{suffix}")];
        let location = |key: &str| format!("{at}.mcse_quantile_{suffix}.{key}");
        let ess = ess_quantile(chains, p);
        report.check(
            &location("ess"),
            "ess*",
            ess,
            &expected["ess"],
            Rule::Relative(ESS_RELATIVE),
        );
        for (k, probability) in ONE_SIGMA_PROBABILITIES.into_iter().enumerate() {
            let b = beta_quantile(probability, ess * p + 1.0, ess * (1.0 - p) + 1.0);
            report.check(
                &location(&format!("beta_ppf[{k}]")),
                "debug beta_ppf",
                b,
                &expected["beta_ppf"][k],
                Rule::Relative(BETA_QUANTILE_RELATIVE),
            );
            let position = b * size - 1.0;
            report.check(
                &location(&format!("pos[{k}]")),
                "debug pos",
                position,
                &expected["pos"][k],
                Rule::Relative(BETA_QUANTILE_RELATIVE),
            );
            let (index_key, value_key, index) = if k == 0 {
                ("index_lo", "sorted_lo", position.max(0.0).floor())
            } else {
                ("index_hi", "sorted_hi", position.min(size - 1.0).ceil())
            };
            report.check(
                &location(index_key),
                "debug indices",
                index,
                &expected[index_key],
                Rule::Absolute(0.0),
            );
            report.check(
                &location(value_key),
                "debug indices",
                sorted[index as usize],
                &expected[value_key],
                Rule::Absolute(0.0),
            );
        }
    }
    report.check(
        &format!("{at}.fold_median_all_draws"),
        "debug medians",
        median(&all),
        &debug["fold_median_all_draws"],
        Rule::Relative(MOMENT_RELATIVE),
    );
    report.check(
        &format!("{at}.fold_median_split_draws"),
        "debug medians",
        median(&split_draws(chains)),
        &debug["fold_median_split_draws"],
        Rule::Relative(MOMENT_RELATIVE),
    );
    let rule = rule_for(fragile, "rhat_tail", Rule::Absolute(RHAT_ABSOLUTE), at);
    report.check(
        &format!("{at}.rhat_tail_fold_all_draws"),
        "rhat*",
        tail_rhat_folded_about_all_draws(chains),
        &debug["rhat_tail_fold_all_draws"],
        rule,
    );
}

/// Python's `max(first, second)`.
fn larger(first: f64, second: f64) -> f64 {
    if second > first {
        second
    } else {
        first
    }
}

#[test]
fn every_fixture_value_matches_arviz() {
    let Some(dir) = bnn_data::require_fixtures_dir("every_fixture_value_matches_arviz") else {
        return;
    };
    let cases = case_names(&dir);
    assert!(
        cases.len() >= 7,
        "expected the 7 documented cases, found {cases:?}"
    );
    let mut report = Report::default();
    let mut parameters_checked = 0;
    for case in &cases {
        let json_text = std::fs::read_to_string(dir.join(format!("{case}.expected.json"))).unwrap();
        let expected: Value = serde_json::from_str(&json_text).unwrap();
        let draws = read_long_draws_csv(dir.join(format!("{case}.draws.csv")))
            .unwrap_or_else(|e| panic!("{case}: {e}"));

        let order: Vec<&str> = expected["param_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            draws.parameter_names, order,
            "{case}: CSV columns differ from param_order"
        );
        assert_eq!(
            draws.n_chains() as u64,
            expected["n_chains"].as_u64().unwrap(),
            "{case}: n_chains"
        );
        assert_eq!(
            draws.n_draws as u64,
            expected["n_draws"].as_u64().unwrap(),
            "{case}: n_draws"
        );

        let parameters = expected["parameters"].as_object().unwrap();
        assert_eq!(
            parameters.len(),
            order.len(),
            "{case}: parameters vs param_order"
        );
        for name in order {
            let chains = draws.parameter(name).unwrap();
            let fragile = expected["fragile"].get(name);
            check_parameter(&mut report, case, name, chains, &parameters[name], fragile);
            parameters_checked += 1;
        }
    }

    eprintln!("{} cases, {parameters_checked} parameters", cases.len());
    eprintln!(
        "{:<16} {:>12} {:>12} {:>6}",
        "family", "max abs err", "max rel err", "n"
    );
    for (family, (absolute, relative, count)) in &report.errors {
        eprintln!("{family:<16} {absolute:>12.3e} {relative:>12.3e} {count:>6}");
    }
    eprintln!(
        "non-finite or fragile values matched: {}",
        report.non_finite_matches
    );
    assert!(
        report.failures.is_empty(),
        "{} mismatches with ArviZ:\n{}",
        report.failures.len(),
        report.failures.join("\n")
    );
}

#[test]
fn fixture_files_match_their_checksums() {
    let Some(dir) = bnn_data::require_fixtures_dir("fixture_files_match_their_checksums") else {
        return;
    };
    let sums =
        std::fs::read_to_string(dir.join("SHA256SUMS")).expect("SHA256SUMS next to the fixtures");
    let mut checked = 0;
    for line in sums.lines().filter(|l| !l.trim().is_empty()) {
        let (digest, file) = line
            .split_once(char::is_whitespace)
            .expect("`<sha256>  <file>` lines");
        let file = file.trim_start().trim_start_matches('*');
        let bytes = std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let actual: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            actual,
            digest.to_lowercase(),
            "{file} differs from SHA256SUMS"
        );
        checked += 1;
    }
    assert_eq!(
        checked,
        2 * case_names(&dir).len(),
        "every case's two files are listed"
    );
}
