//! The Dinh et al. study at toy size: every file is written, the numbers do not depend on the
//! number of worker threads or on which chains share a block, and bad settings are refused.

use bnn_model::Activation;
use bnn_study::dinh::{run_dinh, DinhConfig, DinhPart};
use bnn_study::{run_fixed_step_chains, ChainSettings, FixedStepChain, Network, Quiet};
use std::sync::atomic::AtomicBool;

fn toy() -> DinhConfig {
    DinhConfig::new()
        .with_activations(vec![Activation::Sigmoid, Activation::Relu])
        .with_num_steps(vec![10, 20])
        .with_step_sizes(vec![0.001, 0.004])
        .with_efficiency_step_sizes(vec![0.002, 0.004, 0.008])
        .with_travel_time(0.04)
        .with_architectures(vec![vec![5], vec![8], vec![5, 5]])
        .with_architecture_num_steps(10)
        .with_seeds(2)
        .with_draws(12)
        .with_burn_in(3)
        .with_hidden(8)
        .with_rows(20)
        .with_sensitivity_cells(vec![(10, 0.004)])
}

#[test]
fn a_toy_study_writes_every_file_the_same_with_one_or_two_workers() {
    let stop = AtomicBool::new(false);
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    let report = run_dinh(&toy().with_workers(Some(1)), one.path(), &Quiet, &stop).unwrap();
    run_dinh(&toy().with_workers(Some(2)), two.path(), &Quiet, &stop).unwrap();
    for name in [
        "table2.csv",
        "table2.md",
        "figure1_acceptance_vs_num_steps.svg",
        "figure1_acceptance_vs_step_size.svg",
        "figure2a.csv",
        "figure2a.md",
        "figure2a_efficiency.svg",
        "figure3.csv",
        "figure3.md",
        "figure3_acceptance_vs_parameters.svg",
        "sensitivity.csv",
        "sensitivity.md",
        "study.json",
    ] {
        let path = one.path().join(name);
        assert!(report.files.contains(&path), "{name} not reported");
        let text = std::fs::read_to_string(&path).unwrap();
        if name.ends_with(".csv") {
            assert_eq!(
                text,
                std::fs::read_to_string(two.path().join(name)).unwrap(),
                "{name} depends on the worker count"
            );
        }
        if name.ends_with(".svg") {
            assert!(
                text.starts_with("<svg") && text.trim_end().ends_with("</svg>"),
                "{name} is not an SVG"
            );
        }
    }
    // 2 activations × 2 L × 2 ε × 2 seeds chains, one row each.
    let table = std::fs::read_to_string(one.path().join("table2.csv")).unwrap();
    assert_eq!(table.lines().count(), 1 + 16);
    for line in table.lines().skip(1) {
        let acceptance: f64 = line.split(',').nth(6).unwrap().parse().unwrap();
        assert!((0.0..=1.0).contains(&acceptance), "{line}");
    }
    // Table 2's markdown carries the paper's number for a cell of its grid (sigmoid, L = 200,
    // ε = 0.001 is not in this toy grid, so only our numbers and dashes appear).
    let md = std::fs::read_to_string(one.path().join("table2.md")).unwrap();
    assert!(
        md.contains("## sigmoid") && md.contains("## relu") && md.contains("chain-gradients/s"),
        "{md}"
    );
    assert!(md.contains("**") && md.contains("/ —"), "{md}");
    let fig3 = std::fs::read_to_string(one.path().join("figure3.csv")).unwrap();
    assert!(fig3.contains("relu,5x5,"), "{fig3}");
    assert_eq!(report.table2_deviations, Some((0, 0)));
    // Four variants (as configured, F64, the other σ, the other start) × 2 activations × 1 cell
    // × 2 seeds.
    let sensitivity = std::fs::read_to_string(one.path().join("sensitivity.csv")).unwrap();
    assert_eq!(sensitivity.lines().count(), 1 + 4 * 4, "{sensitivity}");
    let md = std::fs::read_to_string(one.path().join("sensitivity.md")).unwrap();
    for variant in ["as configured", "F64", "σ = 0.7071", "start PriorDraw"] {
        assert!(md.contains(variant), "{variant} missing: {md}");
    }
}

#[test]
fn the_paper_grid_cells_are_compared_and_deviations_counted() {
    // One real Table 2 cell (ReLU, L = 200, ε = 0.0025: paper 0.003 ± 0.003) at a tiny budget.
    let config = DinhConfig::new()
        .with_parts(vec![DinhPart::Table2])
        .with_activations(vec![Activation::Relu])
        .with_num_steps(vec![200])
        .with_step_sizes(vec![0.0025])
        .with_seeds(2)
        .with_draws(5)
        .with_burn_in(2)
        .with_workers(Some(1));
    let out = tempfile::tempdir().unwrap();
    let report = run_dinh(&config, out.path(), &Quiet, &AtomicBool::new(false)).unwrap();
    let (marked, compared) = report.table2_deviations.unwrap();
    assert_eq!(compared, 1);
    let md = std::fs::read_to_string(out.path().join("table2.md")).unwrap();
    assert!(md.contains("/ 0.003 ± 0.003"), "{md}");
    // A marked cell is listed under "Agreement" with its distance; an unmarked one is not.
    assert_eq!(
        md.contains("relu L=200 ε=0.0025: ours"),
        marked == 1,
        "{md}"
    );
}

#[test]
fn a_chain_moves_the_same_alone_or_in_a_block() {
    let data = bnn_data::cos2x(20, 0.1, 0).unwrap();
    let settings = ChainSettings {
        data: bnn_model::HostData::new(data.x.data, 20, 1, data.y.data, 1),
        likelihood: bnn_model::Likelihood::GaussianFixed { sigma: 0.1 },
        prior: bnn_model::PriorSpec::default(),
        device: bnn_model::DeviceName::Cpu.device().unwrap(),
        dtype: burn::tensor::DType::F32,
        burn_in: 3,
        draws: 10,
        seed: 4,
        start: bnn_study::StartPoint::Initialization,
        workers: 1,
    };
    let network = Network {
        hidden: vec![6],
        activation: Activation::Tanh,
    };
    let chain = |step_size: f64, replicate: usize| FixedStepChain {
        network: network.clone(),
        num_steps: 15,
        step_size,
        replicate,
    };
    let stop = AtomicBool::new(false);
    let block = run_fixed_step_chains(
        &[chain(0.003, 1), chain(0.002, 0), chain(0.003, 0)],
        &settings,
        &Quiet,
        &stop,
    )
    .unwrap();
    let alone = run_fixed_step_chains(&[chain(0.003, 0)], &settings, &Quiet, &stop).unwrap();
    assert_eq!(block[2], alone[0]);
    assert_ne!(
        block[0], block[2],
        "another replicate starts elsewhere and draws another stream"
    );
    assert_eq!(block[2].gradients, 13 * 15);
}

#[test]
fn impossible_settings_and_a_used_folder_are_refused_before_any_work() {
    let stop = AtomicBool::new(false);
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("keep.txt"), "earlier results").unwrap();
    let error = run_dinh(&toy(), out.path(), &Quiet, &stop)
        .unwrap_err()
        .to_string();
    assert!(error.contains("not empty"), "{error}");
    assert_eq!(
        std::fs::read_to_string(out.path().join("keep.txt")).unwrap(),
        "earlier results"
    );
    let fresh = tempfile::tempdir().unwrap();
    for config in [
        toy().with_step_sizes(vec![0.0]),
        toy().with_num_steps(vec![0]),
        toy().with_seeds(0),
        toy().with_activations(vec![]),
        toy().with_architectures(vec![vec![]]),
        toy().with_workers(Some(0)),
        toy().with_sensitivity_cells(vec![(0, 0.001)]),
        toy().with_step_sizes(vec![0.001, 0.001]),
    ] {
        assert!(
            run_dinh(&config, &fresh.path().join("x"), &Quiet, &stop).is_err(),
            "{config:?}"
        );
    }
    assert!(
        !fresh.path().join("x").exists(),
        "a refused study created its folder"
    );
}

#[test]
fn the_embedded_table_equals_the_shared_reference() {
    let Some(path) = bnn_data::require_reference_file(
        "the_embedded_table_equals_the_shared_reference",
        "dinh2024_table2.csv",
    ) else {
        return;
    };
    let shared = std::fs::read_to_string(path).unwrap();
    assert_eq!(shared, bnn_study::dinh::reference::TABLE2_CSV);
}
