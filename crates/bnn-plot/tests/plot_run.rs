//! End to end: hand-written run directories in, SVG files (or skips, or errors) out.
//!
//! Series are counted from the SVG itself: plotters writes every line series as one
//! `<polyline>` with its colour as `stroke`; axes and ticks are black, legend samples and dash
//! pieces have two points, so a data line is a non-black polyline of three or more points.

use bnn_plot::{plot_run, PlotError, PlotOptions, PlotReport};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

const CHAINS: usize = 3;
const DRAWS: usize = 20;
const WARMUP: usize = 15;
/// tab10 colours of chains 0, 1, 2 as the SVG backend writes them.
const CHAIN_COLOURS: [&str; 3] = ["#1F77B4", "#FF7F0E", "#2CA02C"];
/// The dashed references of the cumulative LPPD plot (deep ensemble, pooled) and the diagonal.
const REFERENCE: &str = "#282828";
const SECOND_REFERENCE: &str = "#828282";

/// Parameter columns of a 1 → 3 → 1 network, as `bnn sample` names them.
const PARAMETERS: [&str; 10] = [
    "layer0_weight.1.1",
    "layer0_weight.1.2",
    "layer0_weight.1.3",
    "layer0_bias.1",
    "layer0_bias.2",
    "layer0_bias.3",
    "layer1_weight.1.1",
    "layer1_weight.2.1",
    "layer1_weight.3.1",
    "layer1_bias.1",
];
const DEFAULT_TRACES: [&str; 4] = [
    "layer0_weight.1.1",
    "layer0_bias.1",
    "layer1_weight.1.1",
    "layer1_bias.1",
];

/// A run directory written file by file, each in the format `bnn sample` uses.
struct RunFixture {
    dir: tempfile::TempDir,
}

impl RunFixture {
    fn empty() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Every input of every plot, for `CHAINS` chains.
    fn complete() -> Self {
        let run = Self::empty();
        run.draws();
        run.layout();
        run.adaptation();
        run.cumulative_lppd();
        run.summary(r#""de_lppd": -0.9,"#);
        run.predictions(1);
        run.train();
        run
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) {
        fs::write(self.path().join(name), text).unwrap();
    }

    /// CmdStan-style draws with comment lines before and after the header, as CmdStan writes.
    fn draws(&self) {
        for chain in 0..CHAINS {
            let mut text = String::from("# model = bnn\n");
            text += "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,";
            text += &PARAMETERS.join(",");
            text += "\n# Adaptation terminated\n# Step size = 0.05\n";
            for draw in 0..DRAWS {
                let t = (draw + 7 * chain) as f64;
                write!(
                    text,
                    "{},{},0.05,3,7,0,{}",
                    -50.0 - t.sin(),
                    0.8 + 0.1 * t.cos(),
                    48.0 + t.cos()
                )
                .unwrap();
                for p in 0..PARAMETERS.len() {
                    write!(text, ",{}", (0.3 * t + p as f64).sin() + chain as f64).unwrap();
                }
                text.push('\n');
            }
            text += "# Elapsed Time: 1.0 seconds (Sampling)\n";
            self.write(&format!("draws_chain_{chain}.csv"), &text);
        }
    }

    fn layout(&self) {
        self.write(
            "layout.json",
            r#"{"entries": [
                {"name": "network.layers.0.weight", "layer": 0, "kind": "weight", "shape": [1, 3], "offset": 0, "fan_in": 1},
                {"name": "network.layers.0.bias", "layer": 0, "kind": "bias", "shape": [3], "offset": 3, "fan_in": 1},
                {"name": "network.layers.1.weight", "layer": 1, "kind": "weight", "shape": [3, 1], "offset": 6, "fan_in": 3},
                {"name": "network.layers.1.bias", "layer": 1, "kind": "bias", "shape": [1], "offset": 9, "fan_in": 3}
            ], "format_version": 1}"#,
        );
    }

    fn adaptation(&self) {
        for chain in 0..CHAINS {
            let mut text = String::from("iteration,lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__\n");
            for it in 1..=WARMUP {
                let step = 0.5 * (-(it as f64) / 4.0).exp() + 0.01 * (chain + 1) as f64;
                writeln!(text, "{it},-60,{},{step},3,7,0,55", 0.6 + 0.02 * it as f64).unwrap();
            }
            self.write(&format!("adaptation_chain_{chain}.csv"), &text);
        }
    }

    fn cumulative_lppd(&self) {
        let mut text = String::from("chain,draw,lppd\n");
        for chain in 0..CHAINS {
            for draw in 1..=DRAWS {
                writeln!(
                    text,
                    "{chain},{draw},{}",
                    -1.0 + 0.2 / draw as f64 + 0.01 * chain as f64
                )
                .unwrap();
            }
        }
        self.write("cumulative_lppd.csv", &text);
    }

    /// `extra` is spliced into the object, e.g. `"de_lppd": null,`.
    fn summary(&self, extra: &str) {
        self.write(
            "summary.json",
            &format!(
                r#"{{{extra} "lppd": -0.95, "rmse": 0.3, "config": {{"hidden": [3]}},
                   "coverage_50": 0.46, "coverage_75": 0.7, "coverage_90": 0.88, "coverage_95": 0.97}}"#
            ),
        );
    }

    /// `inputs` x columns; the bands plot needs exactly one.
    fn predictions(&self, inputs: usize) {
        let xs: Vec<String> = (0..inputs).map(|i| format!("x{i}")).collect();
        // Original units, then the standardized copies `bnn sample` also writes (not plotted).
        let bands = "y,mean,sd,lower_50,upper_50,lower_90,upper_90,lower_95,upper_95";
        let standardized: Vec<String> = bands.split(',').map(|c| format!("{c}_std")).collect();
        // Then each row's log score and the deep ensemble's, in both scales.
        let mut text = format!(
            "index,{},{bands},{},log_score,log_score_std,ensemble_log_score,ensemble_log_score_std\n",
            xs.join(","),
            standardized.join(",")
        );
        for i in 0..12 {
            // Unsorted x, to check that bands are drawn in x order.
            let x = ((i * 5) % 12) as f64 / 4.0 - 1.5;
            let mean = (2.0 * x).cos();
            let inputs: Vec<String> = (0..inputs).map(|k| (x + k as f64).to_string()).collect();
            write!(text, "{i},{},{},{mean},0.2", inputs.join(","), mean + 0.1).unwrap();
            for z in [0.674, 1.645, 1.96] {
                write!(text, ",{},{}", mean - 0.2 * z, mean + 0.2 * z).unwrap();
            }
            text += &",0".repeat(9);
            // Row 7 costs the posterior 20 nats against the ensemble; the others gain 0.5.
            let score = if i == 7 { -20.75 } else { -0.25 };
            write!(text, ",{score},{score},-0.75,-0.75").unwrap();
            text.push('\n');
        }
        self.write("predictions.csv", &text);
    }

    fn train(&self) {
        let mut text = String::from("x0,y\n");
        for i in 0..30 {
            let x = i as f64 / 10.0 - 1.5;
            writeln!(text, "{x},{}", (2.0 * x).cos() - 0.05).unwrap();
        }
        self.write("train.csv", &text);
    }

    fn plot(&self) -> PlotReport {
        plot_run(self.path(), &PlotOptions::default()).unwrap()
    }

    fn plot_file(&self, name: &str) -> PathBuf {
        self.path().join("plots").join(name)
    }
}

/// The parts of an SVG file the tests look at; parsing it checks that it is well-formed XML.
struct Svg {
    text: String,
}

impl Svg {
    fn read(path: &Path) -> Self {
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc = roxmltree::Document::parse(&text)
            .unwrap_or_else(|e| panic!("{} is not valid XML: {e}", path.display()));
        assert_eq!(
            doc.root_element().tag_name().name(),
            "svg",
            "{}",
            path.display()
        );
        Self { text }
    }

    fn elements<'a>(
        &self,
        doc: &'a roxmltree::Document<'a>,
        tag: &str,
    ) -> Vec<roxmltree::Node<'a, 'a>> {
        doc.descendants()
            .filter(|n| n.tag_name().name() == tag)
            .collect()
    }

    fn count(&self, tag: &str) -> usize {
        let doc = roxmltree::Document::parse(&self.text).unwrap();
        self.elements(&doc, tag).len()
    }

    /// Stroke colour of each data line (non-black polyline with three or more points).
    fn data_lines(&self) -> Vec<String> {
        let doc = roxmltree::Document::parse(&self.text).unwrap();
        self.elements(&doc, "polyline")
            .into_iter()
            .filter(|n| {
                n.attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .count()
                    >= 3
            })
            .filter_map(|n| n.attribute("stroke").map(str::to_string))
            .filter(|stroke| stroke != "#000000")
            .collect()
    }

    fn has_stroke(&self, colour: &str) -> bool {
        self.text.contains(&format!("stroke=\"{colour}\""))
    }

    fn texts(&self) -> Vec<String> {
        let doc = roxmltree::Document::parse(&self.text).unwrap();
        self.elements(&doc, "text")
            .iter()
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_string())
            .collect()
    }

    fn assert_text(&self, expected: &str) {
        let texts = self.texts();
        assert!(
            texts.iter().any(|t| t == expected),
            "no text `{expected}` in {texts:?}"
        );
    }
}

fn names(report: &PlotReport) -> Vec<String> {
    report
        .written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_complete_run_gets_every_plot() {
    let run = RunFixture::complete();
    let report = run.plot();
    assert!(report.skipped.is_empty(), "{report}");
    let mut expected: Vec<String> = DEFAULT_TRACES
        .iter()
        .map(|p| format!("trace_{p}.svg"))
        .collect();
    expected.extend(
        [
            "cumulative_lppd.svg",
            "calibration.svg",
            "predictive_bands.svg",
            "predicted_vs_observed.svg",
            "log_score_difference.svg",
            "warmup_adaptation.svg",
        ]
        .map(String::from),
    );
    assert_eq!(names(&report), expected);
    for file in &report.written {
        assert!(
            file.starts_with(run.path().join("plots")),
            "{}",
            file.display()
        );
        Svg::read(file);
    }
}

#[test]
fn traces_have_one_line_per_chain() {
    let run = RunFixture::complete();
    run.plot();
    for parameter in DEFAULT_TRACES {
        let svg = Svg::read(&run.plot_file(&format!("trace_{parameter}.svg")));
        assert_eq!(svg.data_lines(), CHAIN_COLOURS, "{parameter}");
        svg.assert_text(&format!("Trace of {parameter}"));
        svg.assert_text("draw");
        svg.assert_text(parameter);
        svg.assert_text("chain 2");
    }
}

#[test]
fn cumulative_lppd_has_chains_and_both_references() {
    let run = RunFixture::complete();
    run.plot();
    let svg = Svg::read(&run.plot_file("cumulative_lppd.svg"));
    assert_eq!(svg.data_lines(), CHAIN_COLOURS);
    assert!(svg.has_stroke(REFERENCE) && svg.has_stroke(SECOND_REFERENCE));
    svg.assert_text("Cumulative test LPPD per chain");
    svg.assert_text("deep ensemble (-0.9000)");
    svg.assert_text("all chains pooled (-0.9500)");
}

#[test]
fn a_null_deep_ensemble_lppd_leaves_only_the_pooled_reference() {
    let run = RunFixture::complete();
    run.summary(r#""de_lppd": null,"#);
    run.plot();
    let svg = Svg::read(&run.plot_file("cumulative_lppd.svg"));
    assert!(svg.has_stroke(SECOND_REFERENCE));
    assert!(!svg.has_stroke(REFERENCE));
}

#[test]
fn calibration_marks_each_summary_level() {
    let run = RunFixture::complete();
    run.plot();
    let svg = Svg::read(&run.plot_file("calibration.svg"));
    // One observed curve, one marker per level (50, 75, 90, 95) plus the legend's marker.
    assert_eq!(svg.data_lines(), [CHAIN_COLOURS[0]]);
    assert_eq!(svg.count("circle"), 4 + 1);
    assert!(svg.has_stroke(REFERENCE), "no diagonal");
    svg.assert_text("nominal coverage");
    svg.assert_text("0.97");
}

#[test]
fn predictive_bands_show_three_bands_mean_and_points() {
    let run = RunFixture::complete();
    run.plot();
    let svg = Svg::read(&run.plot_file("predictive_bands.svg"));
    assert_eq!(svg.count("polygon"), 3);
    assert_eq!(svg.data_lines(), [CHAIN_COLOURS[0]], "one mean line");
    // 12 test points, 30 training points, one legend marker for each kind.
    assert_eq!(svg.count("circle"), 12 + 30 + 2);
    for label in [
        "95% interval",
        "90% interval",
        "50% interval",
        "predictive mean",
        "test points",
        "training points",
    ] {
        svg.assert_text(label);
    }
}

#[test]
fn the_row_that_costs_the_lppd_is_labelled() {
    let run = RunFixture::complete();
    run.plot();
    let svg = Svg::read(&run.plot_file("log_score_difference.svg"));
    // 12 rows and the legend's marker.
    assert_eq!(svg.count("circle"), 12 + 1);
    // The mean difference: (11 · 0.5 − 20) / 12.
    svg.assert_text("Log score per test row, posterior − deep ensemble (mean -1.208)");
    svg.assert_text("row 7");
    svg.assert_text("no difference");
}

#[test]
fn log_scores_without_the_ensembles_skip_that_plot() {
    let run = RunFixture::complete();
    // A run that did not start from an ensemble: the columns stop before the ensemble's score.
    let path = run.path().join("predictions.csv");
    let text: String = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| l.rsplitn(3, ',').nth(2).unwrap().to_string() + "\n")
        .collect();
    fs::write(&path, text).unwrap();
    let report = run.plot();
    let skip = report
        .skipped
        .iter()
        .find(|s| s.plot == "log_score_difference")
        .expect("log score plot not skipped");
    assert!(
        skip.reason.contains("no `ensemble_log_score_std` column"),
        "{}",
        skip.reason
    );
}

#[test]
fn bands_are_drawn_in_x_order() {
    let run = RunFixture::complete();
    run.plot();
    let text = fs::read_to_string(run.plot_file("predictive_bands.svg")).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let mean = doc
        .descendants()
        .find(|n| {
            n.tag_name().name() == "polyline" && n.attribute("stroke") == Some(CHAIN_COLOURS[0])
        })
        .unwrap();
    let xs: Vec<i32> = mean
        .attribute("points")
        .unwrap()
        .split_whitespace()
        .map(|p| p.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        xs.windows(2).all(|w| w[0] <= w[1]),
        "mean line not sorted by x: {xs:?}"
    );
}

#[test]
fn warmup_adaptation_has_two_panels_of_chains() {
    let run = RunFixture::complete();
    run.plot();
    let svg = Svg::read(&run.plot_file("warmup_adaptation.svg"));
    let twice: Vec<&str> = CHAIN_COLOURS
        .iter()
        .chain(&CHAIN_COLOURS)
        .copied()
        .collect();
    assert_eq!(svg.data_lines(), twice);
    svg.assert_text("Step size during warmup");
    svg.assert_text("Acceptance statistic during warmup");
    svg.assert_text("step size (log scale)");
}

#[test]
fn max_chains_limits_every_per_chain_plot() {
    let run = RunFixture::complete();
    let options = PlotOptions {
        max_chains: Some(2),
        ..PlotOptions::default()
    };
    plot_run(run.path(), &options).unwrap();
    for name in ["trace_layer0_bias.1.svg", "cumulative_lppd.svg"] {
        assert_eq!(
            Svg::read(&run.plot_file(name)).data_lines(),
            CHAIN_COLOURS[..2],
            "{name}"
        );
    }
    assert_eq!(
        Svg::read(&run.plot_file("warmup_adaptation.svg"))
            .data_lines()
            .len(),
        4
    );
}

#[test]
fn named_parameters_and_out_dir_are_honoured() {
    let run = RunFixture::complete();
    let out = run.path().join("figures");
    let options = PlotOptions {
        out_dir: Some(out.clone()),
        parameters: vec!["lp__".into(), "layer1_weight.2.1".into()],
        max_chains: None,
    };
    let report = plot_run(run.path(), &options).unwrap();
    assert_eq!(
        report.written[..2],
        [
            out.join("trace_lp__.svg"),
            out.join("trace_layer1_weight.2.1.svg")
        ]
    );
    assert!(report.written.iter().all(|f| f.starts_with(&out)));
    assert!(!run.path().join("plots").exists());
}

#[test]
fn an_unknown_parameter_is_an_error_naming_it() {
    let run = RunFixture::complete();
    let options = PlotOptions {
        parameters: vec!["layer9_weight.1.1".into()],
        ..PlotOptions::default()
    };
    let err = plot_run(run.path(), &options).unwrap_err();
    assert!(
        matches!(err, PlotError::UnknownParameter { ref name, .. } if name == "layer9_weight.1.1"),
        "{err}"
    );
    assert!(err.to_string().contains("draws_chain_0.csv"), "{err}");
}

#[test]
fn without_layout_traces_take_the_first_column_of_each_tensor() {
    let run = RunFixture::complete();
    fs::remove_file(run.path().join("layout.json")).unwrap();
    let report = run.plot();
    let expected: Vec<String> = DEFAULT_TRACES
        .iter()
        .map(|p| format!("trace_{p}.svg"))
        .collect();
    assert_eq!(names(&report)[..4], expected);
}

#[test]
fn an_empty_directory_skips_every_plot_with_a_reason() {
    let run = RunFixture::empty();
    let report = run.plot();
    assert!(report.written.is_empty());
    let skipped: Vec<(&str, &str)> = report
        .skipped
        .iter()
        .map(|s| (s.plot, s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("trace", "no draws_chain_0.csv"),
            ("cumulative_lppd", "no cumulative_lppd.csv"),
            ("calibration", "no summary.json"),
            ("predictive_bands", "no predictions.csv"),
            ("predicted_vs_observed", "no predictions.csv"),
            ("log_score_difference", "no predictions.csv"),
            ("warmup_adaptation", "no adaptation_chain_0.csv"),
        ]
    );
    assert!(
        report
            .to_string()
            .contains("skipped calibration: no summary.json"),
        "{report}"
    );
}

#[test]
fn only_draws_give_only_traces() {
    let run = RunFixture::empty();
    run.draws();
    let report = run.plot();
    assert_eq!(report.written.len(), DEFAULT_TRACES.len());
    assert_eq!(report.skipped.len(), 6);
}

#[test]
fn multi_input_predictions_skip_the_bands() {
    let run = RunFixture::complete();
    run.predictions(2);
    let report = run.plot();
    let skip = report
        .skipped
        .iter()
        .find(|s| s.plot == "predictive_bands")
        .expect("bands not skipped");
    assert!(
        skip.reason.contains("has 2 input columns"),
        "{}",
        skip.reason
    );
}

#[test]
fn multi_target_predictions_skip_the_bands() {
    let run = RunFixture::complete();
    run.write(
        "predictions.csv",
        "index,target,x0,y,mean,sd,lower_50,upper_50\n0,0,1,1,1,1,0,2\n0,1,1,1,1,1,0,2\n",
    );
    let report = run.plot();
    let skip = report
        .skipped
        .iter()
        .find(|s| s.plot == "predictive_bands")
        .expect("bands not skipped");
    assert!(skip.reason.contains("`target` column"), "{}", skip.reason);
}

#[test]
fn multi_target_predictions_get_one_parity_plot_per_target() {
    let run = RunFixture::complete();
    let mut text = String::from("index,target,x0,x1,y,mean,sd,lower_90,upper_90\n");
    for i in 0..6 {
        for k in 0..2 {
            let y = i as f64 + 10.0 * k as f64;
            writeln!(
                text,
                "{i},{k},0.5,{i},{y},{},0.3,{},{}",
                y + 0.1,
                y - 0.4,
                y + 0.6
            )
            .unwrap();
        }
    }
    run.write("predictions.csv", &text);
    let report = run.plot();
    let written = names(&report);
    for k in 0..2 {
        let file = format!("predicted_vs_observed_target{k}.svg");
        assert!(written.contains(&file), "{written:?}");
        let svg = Svg::read(&run.path().join("plots").join(&file));
        assert!(
            svg.texts()
                .iter()
                .any(|t| t == &format!("Target {k}: test predictions against observations")),
            "{file}"
        );
    }
    assert!(!written.contains(&"predicted_vs_observed.svg".to_string()));
}

#[test]
fn a_target_column_that_is_not_an_index_is_an_error() {
    let run = RunFixture::complete();
    run.write(
        "predictions.csv",
        "index,target,x0,y,mean,sd,lower_90,upper_90\n0,0.5,1,1,1,1,0,2\n",
    );
    let error = bnn_plot::plot_run(run.path(), &bnn_plot::PlotOptions::default())
        .expect_err("target 0.5 accepted");
    assert!(error.to_string().contains("not a target index"), "{error}");
}

#[test]
fn a_summary_without_coverage_skips_calibration() {
    let run = RunFixture::complete();
    run.write("summary.json", r#"{"lppd": -1.0, "de_lppd": null}"#);
    let report = run.plot();
    let skip = report
        .skipped
        .iter()
        .find(|s| s.plot == "calibration")
        .expect("calibration not skipped");
    assert!(
        skip.reason.contains("no coverage_<level> fields"),
        "{}",
        skip.reason
    );
}

/// Replaces field `field` of line `line` (1-based) of `name`.
fn corrupt(run: &RunFixture, name: &str, line: usize, field: usize, value: &str) {
    let path = run.path().join(name);
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut fields: Vec<&str> = lines[line - 1].split(',').collect();
    fields[field] = value;
    lines[line - 1] = fields.join(",");
    fs::write(&path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_bad_value_names_the_file_and_line() {
    let run = RunFixture::complete();
    // Line 7 is the third draw: a comment, the header and two comments come first. Field 7 is
    // `layer0_weight.1.1`, a default trace, so it is parsed.
    corrupt(&run, "draws_chain_1.csv", 7, 7, "abc");
    let err = plot_run(run.path(), &PlotOptions::default()).unwrap_err();
    assert!(matches!(err, PlotError::Malformed { line: 7, .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("draws_chain_1.csv:7: column `layer0_weight.1.1`: `abc` is not a number"),
        "{message}"
    );
}

#[test]
fn a_short_row_names_the_file_and_line() {
    let run = RunFixture::complete();
    let path = run.path().join("adaptation_chain_2.csv");
    let mut text = fs::read_to_string(&path).unwrap();
    text += "16,-60,0.8\n";
    fs::write(&path, text).unwrap();
    let err = plot_run(run.path(), &PlotOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!(
            "adaptation_chain_2.csv:{}: expected 8 fields",
            WARMUP + 2
        )),
        "{err}"
    );
}

#[test]
fn a_fractional_chain_number_names_the_line() {
    let run = RunFixture::complete();
    corrupt(&run, "cumulative_lppd.csv", 3, 0, "0.5");
    let err = plot_run(run.path(), &PlotOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cumulative_lppd.csv:3: column `chain`: `0.5` is not a chain number"),
        "{err}"
    );
}

#[test]
fn a_missing_column_is_named() {
    let run = RunFixture::complete();
    run.write("cumulative_lppd.csv", "chain,draws,lppd\n0,1,-1\n");
    let err = plot_run(run.path(), &PlotOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cumulative_lppd.csv: no column `draw`"),
        "{err}"
    );
}

#[test]
fn malformed_json_names_the_file_and_line() {
    let run = RunFixture::complete();
    run.write(
        "layout.json",
        "{\"entries\": [\n  {\"name\": \"a\", \"layer\": 0,}\n]}",
    );
    let err = plot_run(run.path(), &PlotOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("layout.json") && err.contains("line 2"),
        "{err}"
    );

    let run = RunFixture::complete();
    run.write("summary.json", r#"{"lppd": "high", "coverage_50": 0.5}"#);
    let err = plot_run(run.path(), &PlotOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("summary.json: field `lppd`"), "{err}");
}

#[test]
fn non_finite_draws_are_left_out_of_the_lines() {
    let run = RunFixture::complete();
    corrupt(&run, "draws_chain_0.csv", 5, 7, "NaN");
    corrupt(&run, "draws_chain_0.csv", 6, 7, "inf");
    run.plot();
    let svg = Svg::read(&run.plot_file("trace_layer0_weight.1.1.svg"));
    assert_eq!(svg.data_lines(), CHAIN_COLOURS);
}

#[test]
fn a_missing_run_directory_is_an_error() {
    let run = RunFixture::empty();
    let err = plot_run(&run.path().join("nope"), &PlotOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nope") && err.contains("not a run directory"),
        "{err}"
    );
}
