//! `bnn data`: list and describe datasets; write a run's split as it was sampled.

use anyhow::{bail, Context, Result};
use bnn_data::{
    describe, list_named, CsvOptions, DatasetSpec, TargetColumn, GENERATED_DATASET_NAMES,
};
use bnn_model::HostData;
use bnn_pipeline::{prepare, write_atomic, Preparation, RunDir};
use clap::{Args, Subcommand};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// List the named benchmark datasets and the generated ones.
    List,
    /// Rows, features and a target summary of a dataset (a name or a CSV path).
    Describe(DescribeArgs),
    /// Write the training and test rows of a run as its posterior saw them (split and
    /// standardized by its config.toml), so that another tool can sample the same problem.
    Split(SplitArgs),
}

#[derive(Args, Debug)]
pub struct SplitArgs {
    /// A run directory (its config.toml says dataset, split and standardization).
    #[arg(long)]
    pub run: PathBuf,
    /// Folder for train.csv, test.csv (columns x0.., y0.., standardized) and standardizer.json
    /// (created; existing files of these names are replaced).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct DescribeArgs {
    /// A benchmark name (e.g. concrete), a generator (cos2x, robot-arm) or a CSV file.
    pub dataset: String,
    /// Target column of a CSV file; repeat it for several targets (default: the last column).
    #[arg(long)]
    pub target: Vec<String>,
    /// Seed of generated data.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn run(command: DataCommand) -> Result<()> {
    match command {
        DataCommand::List => {
            let dir = bnn_data::data_dir();
            println!(
                "{:<18} {:>6} {:>9}  {:<32} available",
                "name", "rows", "features", "target"
            );
            for entry in list_named() {
                let available = match &dir {
                    Ok(d) if d.join(&entry.file).is_file() => "yes",
                    _ => "no",
                };
                println!(
                    "{:<18} {:>6} {:>9}  {:<32} {available}",
                    entry.name, entry.rows, entry.features, entry.target
                );
            }
            for name in GENERATED_DATASET_NAMES {
                println!("{name:<18} {:>6} {:>9}  {:<32} generated", "-", "-", "-");
            }
            match dir {
                Ok(d) => println!("\ndata folder: {}", d.display()),
                Err(e) => println!("\n{e}"),
            }
            Ok(())
        }
        DataCommand::Describe(args) => {
            let csv = CsvOptions {
                target: TargetColumn::from_names(&args.target),
                ..CsvOptions::default()
            };
            let dataset = DatasetSpec::parse(&args.dataset)?.load(args.seed, &csv)?;
            print!("{}", describe(&dataset));
            Ok(())
        }
        DataCommand::Split(args) => write_split(&args.run, &args.out),
    }
}

/// The split of the run in `run`, standardized as it was sampled, into `out`.
fn write_split(run: &Path, out: &Path) -> Result<()> {
    let dir = RunDir::new(run);
    if !dir.config().is_file() {
        bail!("{} has no config.toml: not a run directory", run.display());
    }
    let config = dir.load_config()?;
    let data = prepare(&config.data.dataset, &Preparation::for_run(&config))?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    write_atomic(&out.join("train.csv"), rows_csv(&data.train).as_bytes())?;
    write_atomic(&out.join("test.csv"), rows_csv(&data.test).as_bytes())?;
    let s = &data.standardizer;
    let stats = serde_json::json!({"x_mean": s.x_mean, "x_sd": s.x_sd, "y_mean": s.y_mean, "y_sd": s.y_sd,
        "dataset": config.data.dataset, "split_seed": config.data.split_seed});
    write_atomic(
        &out.join("standardizer.json"),
        serde_json::to_string_pretty(&stats)?.as_bytes(),
    )?;
    println!(
        "wrote {} training and {} test rows to {}",
        data.train.rows,
        data.test.rows,
        out.display()
    );
    Ok(())
}

/// `x0,…,y0,…` with a header, every value with round-trip precision.
fn rows_csv(d: &HostData) -> String {
    let mut text = (0..d.x_cols)
        .map(|j| format!("x{j}"))
        .chain((0..d.y_cols).map(|j| format!("y{j}")))
        .collect::<Vec<_>>()
        .join(",");
    text.push('\n');
    for (x, y) in
        d.x.chunks_exact(d.x_cols.max(1))
            .zip(d.y.chunks_exact(d.y_cols.max(1)))
            .take(d.rows)
    {
        let values: Vec<String> = x.iter().chain(y).map(|v| format!("{v:?}")).collect();
        let _ = writeln!(text, "{}", values.join(","));
    }
    text
}
