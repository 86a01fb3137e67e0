//! `bnn model`: inspect model shapes before training or sampling.

use crate::model_args::ModelArgs;
use anyhow::Result;
use bnn_model::layout_of;
use burn::tensor::Device;
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Parameter count and the flat-parameter layout table of an MLP.
    Info(InfoArgs),
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Number of input features.
    #[arg(long)]
    pub features: usize,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print the layout as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: ModelCommand) -> Result<()> {
    match command {
        ModelCommand::Info(args) => {
            let config = args.model.config(args.features)?;
            // Shapes only: build on the CPU whatever device a later run will use.
            let layout = layout_of(&config.init(&Device::flex()));
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "config": serde_json::to_value(&config)?,
                        "n_params": layout.dim(),
                        "layout": layout,
                    }))?
                );
            } else {
                println!(
                    "MLP {:?} -> {} outputs, activation {}, likelihood {:?}",
                    config.mlp().widths(),
                    config.mlp().d_output,
                    config.activation,
                    config.likelihood
                );
                print!("{}", layout.table());
            }
            Ok(())
        }
    }
}
