//! `bnn data`: list and describe datasets.

use anyhow::Result;
use bnn_data::{describe, list_named, CsvOptions, DatasetSpec, TargetColumn, GENERATED_DATASET_NAMES};
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// List the named benchmark datasets and the generated ones.
    List,
    /// Rows, features and a target summary of a dataset (a name or a CSV path).
    Describe(DescribeArgs),
}

#[derive(Args, Debug)]
pub struct DescribeArgs {
    /// A benchmark name (e.g. concrete), a generator (cos2x, robot-arm) or a CSV file.
    pub dataset: String,
    /// Target column of a CSV file (default: the last column).
    #[arg(long)]
    pub target: Option<String>,
    /// Seed of generated data.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn run(command: DataCommand) -> Result<()> {
    match command {
        DataCommand::List => {
            let dir = bnn_data::data_dir();
            println!("{:<18} {:>6} {:>9}  {:<32} available", "name", "rows", "features", "target");
            for entry in list_named() {
                let available = match &dir {
                    Ok(d) if d.join(&entry.file).is_file() => "yes",
                    _ => "no",
                };
                println!("{:<18} {:>6} {:>9}  {:<32} {available}", entry.name, entry.rows, entry.features, entry.target);
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
            let mut csv = CsvOptions::default();
            if let Some(target) = args.target {
                csv.target = TargetColumn::Named(target);
            }
            let dataset = DatasetSpec::parse(&args.dataset)?.load(args.seed, &csv)?;
            print!("{}", describe(&dataset));
            Ok(())
        }
    }
}
