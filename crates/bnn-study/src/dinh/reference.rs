//! The paper's numbers: Dinh et al. (NeurIPS 2024), Table 2 (acceptance rates, mean ± s.e. over
//! 5 seeds) and the empirical optimal acceptance rates of their Figure 2a (§4).

use crate::MeanSe;
use anyhow::{bail, Context as _, Result};
use bnn_model::Activation;

/// Table 2 of Dinh et al., as published (three decimals), carried into the crate so that the
/// study compares against it on any machine. `tests/reference_table.rs` checks it against
/// `shared/reference/dinh2024_table2.csv` where that exists.
pub const TABLE2_CSV: &str = include_str!("../../reference/dinh2024_table2.csv");

/// Empirical optimal acceptance rates of Figure 2a (T = 0.1), §4 of the paper.
pub const OPTIMAL_ACCEPTANCE: [(Activation, f64); 3] = [
    (Activation::Sigmoid, 0.755),
    (Activation::Relu, 0.6525),
    (Activation::LeakyRelu, 0.724),
];

/// One cell of Table 2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReferenceCell {
    pub activation: Activation,
    pub num_steps: usize,
    pub step_size: f64,
    pub acceptance: MeanSe,
}

/// Parses Table 2 (`activation,num_steps,step_size,acceptance_mean,acceptance_se`).
pub fn parse_table2(text: &str) -> Result<Vec<ReferenceCell>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers()?.iter().map(str::to_string).collect();
    if header
        != [
            "activation",
            "num_steps",
            "step_size",
            "acceptance_mean",
            "acceptance_se",
        ]
    {
        bail!("unexpected Table 2 header {header:?}");
    }
    reader
        .records()
        .enumerate()
        .map(|(i, record)| {
            let record = record?;
            let line = i + 2;
            let number = |k: usize| -> Result<f64> {
                record[k].trim().parse::<f64>().with_context(|| {
                    format!("Table 2 line {line}: `{}` is not a number", &record[k])
                })
            };
            let activation: Activation = record[0]
                .parse()
                .map_err(|e| anyhow::anyhow!("Table 2 line {line}: {e}"))?;
            Ok(ReferenceCell {
                activation,
                num_steps: number(1)? as usize,
                step_size: number(2)?,
                acceptance: MeanSe {
                    mean: number(3)?,
                    se: number(4)?,
                    n: 5,
                },
            })
        })
        .collect()
}

/// The paper's Table 2.
pub fn table2() -> Vec<ReferenceCell> {
    parse_table2(TABLE2_CSV).expect("the embedded Table 2 parses (checked by a test)")
}

/// The paper's cell for `(activation, L, ε)`, if Table 2 has it.
pub fn table2_cell(
    cells: &[ReferenceCell],
    activation: Activation,
    num_steps: usize,
    step_size: f64,
) -> Option<ReferenceCell> {
    cells.iter().copied().find(|c| {
        c.activation == activation
            && c.num_steps == num_steps
            && (c.step_size - step_size).abs() < 1e-12
    })
}

/// The paper's empirical optimal acceptance for Figure 2a.
pub fn optimal_acceptance(activation: Activation) -> Option<f64> {
    OPTIMAL_ACCEPTANCE
        .iter()
        .find(|(a, _)| *a == activation)
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_table_has_every_cell_of_the_grid() {
        let cells = table2();
        assert_eq!(cells.len(), 75);
        let c = table2_cell(&cells, Activation::Relu, 200, 0.0010).unwrap();
        assert_eq!((c.acceptance.mean, c.acceptance.se), (0.652, 0.019));
        assert!(table2_cell(&cells, Activation::Tanh, 200, 0.001).is_none());
        assert!(parse_table2("a,b\n1,2\n").is_err());
        assert!(parse_table2("activation,num_steps,step_size,acceptance_mean,acceptance_se\nrelu,200,0.001,high,0.1\n").unwrap_err().to_string().contains("line 2"));
    }
}
