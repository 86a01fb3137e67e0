//! Reading draws from a long-format CSV: header `chain,draw,<param>...`, one row per
//! (chain, draw), as written by the samplers and by the ArviZ fixture generator.
//!
//! Rows may come in any order (chains interleaved, draws shuffled); they are placed by their
//! `chain` and `draw` columns. Every chain must have draws `0..N` exactly once, with the same N
//! for all chains. Problems are reported with the 1-based line and column, never by panicking.

use crate::summary::{summarize_all, ParameterSummary};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Draws of every parameter, indexed `draws[parameter][chain][draw]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LongDraws {
    /// Parameter names in column order.
    pub parameter_names: Vec<String>,
    /// The `chain` values of the file, ascending; `draws[p][j]` belongs to `chain_ids[j]`.
    pub chain_ids: Vec<u64>,
    /// Draws per chain.
    pub n_draws: usize,
    /// `draws[p]` is the input of every diagnostic in this crate for parameter `p`.
    pub draws: Vec<Vec<Vec<f64>>>,
}

impl LongDraws {
    pub fn n_chains(&self) -> usize {
        self.chain_ids.len()
    }

    /// The chains of the parameter called `name`.
    pub fn parameter(&self, name: &str) -> Option<&[Vec<f64>]> {
        let index = self.parameter_names.iter().position(|n| n == name)?;
        Some(&self.draws[index])
    }

    /// [`ParameterSummary`] of every parameter, in column order.
    pub fn summarize_all(&self) -> Vec<ParameterSummary> {
        summarize_all(&self.draws)
    }
}

/// Why a long-format draws CSV was rejected. Lines and columns are 1-based; line 1 is the header.
#[derive(Debug)]
#[non_exhaustive]
pub enum DrawsCsvError {
    /// The file could not be read.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file has no header line.
    Empty,
    /// The header is not `chain,draw,<param>...` with distinct, non-empty parameter names.
    Header { message: String },
    /// A quoted field is not closed on its line.
    UnterminatedQuote { line: usize },
    /// A row has a different number of cells than the header.
    RaggedRow {
        line: usize,
        expected: usize,
        found: usize,
    },
    /// A `chain` or `draw` cell is not a non-negative integer.
    InvalidIndex {
        line: usize,
        column: &'static str,
        text: String,
    },
    /// A parameter cell does not parse as a floating-point number.
    NotANumber {
        line: usize,
        column: usize,
        parameter: String,
        text: String,
    },
    /// Two rows have the same chain and draw.
    DuplicateDraw {
        line: usize,
        first_line: usize,
        chain: u64,
        draw: u64,
    },
    /// A chain lacks a draw below its largest draw index.
    MissingDraw { chain: u64, draw: u64 },
    /// Two chains have different numbers of draws.
    UnequalChainLengths {
        chain: u64,
        draws: usize,
        first_chain: u64,
        first_draws: usize,
    },
    /// The header is fine but no row follows.
    NoDraws,
}

impl fmt::Display for DrawsCsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Self::Empty => write!(f, "the draws CSV is empty (expected a header `chain,draw,<param>...`)"),
            Self::Header { message } => write!(f, "line 1 (header): {message}"),
            Self::UnterminatedQuote { line } => write!(f, "line {line}: a quoted field is not closed"),
            Self::RaggedRow { line, expected, found } => {
                write!(f, "line {line}: {found} cells, but the header has {expected} columns")
            }
            Self::InvalidIndex { line, column, text } => {
                write!(f, "line {line}, column `{column}`: `{text}` is not a non-negative integer")
            }
            Self::NotANumber { line, column, parameter, text } => {
                write!(f, "line {line}, column {column} (`{parameter}`): `{text}` is not a number")
            }
            Self::DuplicateDraw { line, first_line, chain, draw } => {
                write!(f, "line {line}: chain {chain} draw {draw} was already given on line {first_line}")
            }
            Self::MissingDraw { chain, draw } => {
                write!(f, "chain {chain} has no draw {draw} (draws must be numbered 0, 1, 2, ...)")
            }
            Self::UnequalChainLengths { chain, draws, first_chain, first_draws } => write!(
                f,
                "chain {chain} has {draws} draws but chain {first_chain} has {first_draws}; all chains must have the same length"
            ),
            Self::NoDraws => write!(f, "the draws CSV has a header but no rows"),
        }
    }
}

/// The messages name their causes (the I/O error of `Io`), so `source()` is `None`: a report of
/// the error chain says each cause once.
impl std::error::Error for DrawsCsvError {}

/// Reads and validates a long-format draws CSV file.
pub fn read_long_draws_csv(path: impl AsRef<Path>) -> Result<LongDraws, DrawsCsvError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| DrawsCsvError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_long_draws_csv(&text)
}

/// Parses and validates long-format draws CSV text (see [`read_long_draws_csv`]).
pub fn parse_long_draws_csv(text: &str) -> Result<LongDraws, DrawsCsvError> {
    // Spreadsheet exports often start with a UTF-8 byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, l)| !l.trim().is_empty());
    let (header_line, header) = lines.next().ok_or(DrawsCsvError::Empty)?;
    let parameter_names = parse_header(&split_cells(header, header_line)?)?;
    let n_columns = parameter_names.len() + 2;

    let mut chains: BTreeMap<u64, ChainRows> = BTreeMap::new();
    for (line, row) in lines {
        let cells = split_cells(row, line)?;
        if cells.len() != n_columns {
            return Err(DrawsCsvError::RaggedRow {
                line,
                expected: n_columns,
                found: cells.len(),
            });
        }
        let chain = parse_index(&cells[0], line, "chain")?;
        let draw = parse_index(&cells[1], line, "draw")?;
        let rows = chains.entry(chain).or_default();
        rows.origins.push(RowOrigin { draw, line });
        for (offset, cell) in cells[2..].iter().enumerate() {
            let value = cell
                .trim()
                .parse::<f64>()
                .map_err(|_| DrawsCsvError::NotANumber {
                    line,
                    column: offset + 3,
                    parameter: parameter_names[offset].clone(),
                    text: cell.to_string(),
                })?;
            rows.values.push(value);
        }
    }
    if chains.is_empty() {
        return Err(DrawsCsvError::NoDraws);
    }

    let mut n_draws = None;
    let mut draw_order = Vec::with_capacity(chains.len());
    for (&chain, rows) in &chains {
        let order = rows.rows_in_draw_order(chain)?;
        match n_draws {
            None => n_draws = Some((chain, order.len())),
            Some((first_chain, first_draws)) if first_draws != order.len() => {
                return Err(DrawsCsvError::UnequalChainLengths {
                    chain,
                    draws: order.len(),
                    first_chain,
                    first_draws,
                });
            }
            Some(_) => {}
        }
        draw_order.push(order);
    }
    let n_draws = n_draws.map_or(0, |(_, n)| n);

    let n_parameters = parameter_names.len();
    let draws = (0..n_parameters)
        .map(|p| {
            chains
                .values()
                .zip(&draw_order)
                .map(|(rows, order)| {
                    order
                        .iter()
                        .map(|&row| rows.values[row * n_parameters + p])
                        .collect()
                })
                .collect()
        })
        .collect();
    Ok(LongDraws {
        parameter_names,
        chain_ids: chains.keys().copied().collect(),
        n_draws,
        draws,
    })
}

/// Where a row came from, for placing it and for error messages.
#[derive(Debug, Clone, Copy)]
struct RowOrigin {
    draw: u64,
    line: usize,
}

/// The rows of one chain in file order: their origins, and their values row-major.
#[derive(Debug, Default)]
struct ChainRows {
    origins: Vec<RowOrigin>,
    values: Vec<f64>,
}

impl ChainRows {
    /// Row indices sorted by draw, after checking that the draws are exactly `0..len`.
    fn rows_in_draw_order(&self, chain: u64) -> Result<Vec<usize>, DrawsCsvError> {
        let mut order: Vec<usize> = (0..self.origins.len()).collect();
        order.sort_by_key(|&row| (self.origins[row].draw, self.origins[row].line));
        for (expected, &row) in order.iter().enumerate() {
            let origin = self.origins[row];
            if expected > 0 {
                let previous = self.origins[order[expected - 1]];
                if previous.draw == origin.draw {
                    return Err(DrawsCsvError::DuplicateDraw {
                        line: origin.line,
                        first_line: previous.line,
                        chain,
                        draw: origin.draw,
                    });
                }
            }
            if origin.draw != expected as u64 {
                return Err(DrawsCsvError::MissingDraw {
                    chain,
                    draw: expected as u64,
                });
            }
        }
        Ok(order)
    }
}

fn parse_header(cells: &[Cow<'_, str>]) -> Result<Vec<String>, DrawsCsvError> {
    let header_error = |message: String| DrawsCsvError::Header { message };
    let leading: Vec<&str> = cells.iter().take(2).map(|c| c.trim()).collect();
    if leading != ["chain", "draw"] {
        return Err(header_error(format!(
            "the first two columns must be `chain,draw`, found `{}`",
            leading.join(",")
        )));
    }
    let names: Vec<String> = cells[2..].iter().map(|c| c.trim().to_string()).collect();
    if names.is_empty() {
        return Err(header_error(
            "no parameter columns after `chain,draw`".to_string(),
        ));
    }
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(header_error(format!(
                "column {} has an empty parameter name",
                i + 3
            )));
        }
        if let Some(first) = names[..i].iter().position(|other| other == name) {
            return Err(header_error(format!(
                "parameter `{name}` appears in columns {} and {}",
                first + 3,
                i + 3
            )));
        }
    }
    Ok(names)
}

fn parse_index(cell: &str, line: usize, column: &'static str) -> Result<u64, DrawsCsvError> {
    cell.trim()
        .parse::<u64>()
        .map_err(|_| DrawsCsvError::InvalidIndex {
            line,
            column,
            text: cell.to_string(),
        })
}

/// Splits one line at commas, honouring RFC 4180 double quotes within the line (parameter names
/// such as `"w[0,1]"` need them). Unquoted lines, i.e. all data rows, are split without copying.
fn split_cells(line: &str, line_number: usize) -> Result<Vec<Cow<'_, str>>, DrawsCsvError> {
    if !line.contains('"') {
        return Ok(line.split(',').map(Cow::Borrowed).collect());
    }
    let mut cells = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars().peekable();
    let mut in_quotes = false;
    while let Some(c) = chars.next() {
        match (c, in_quotes) {
            ('"', true) if chars.peek() == Some(&'"') => {
                current.push('"');
                chars.next();
            }
            ('"', true) => in_quotes = false,
            ('"', false) if current.trim().is_empty() => {
                current.clear();
                in_quotes = true;
            }
            (',', false) => cells.push(Cow::Owned(std::mem::take(&mut current))),
            _ => current.push(c),
        }
    }
    if in_quotes {
        return Err(DrawsCsvError::UnterminatedQuote { line: line_number });
    }
    cells.push(Cow::Owned(current));
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LongDraws, DrawsCsvError> {
        parse_long_draws_csv(text)
    }

    #[test]
    fn places_rows_by_chain_and_draw_in_any_order() {
        let text =
            "\u{feff}chain,draw,a,\"w[0,1]\"\r\n1,1,4.0,40\n0,0,1.0,10\n1,0,3.0,30\n0,1,2.0,20\n\n";
        let draws = parse(text).unwrap();
        assert_eq!(draws.parameter_names, ["a", "w[0,1]"]);
        assert_eq!(draws.chain_ids, [0, 1]);
        assert_eq!(draws.n_draws, 2);
        assert_eq!(
            draws.parameter("a").unwrap(),
            [vec![1.0, 2.0], vec![3.0, 4.0]]
        );
        assert_eq!(draws.draws[1], [vec![10.0, 20.0], vec![30.0, 40.0]]);
        assert!(draws.parameter("b").is_none());
    }

    #[test]
    fn non_numeric_cells_name_line_and_column() {
        let error = parse("chain,draw,a,b\n0,0,1.0,2.0\n0,1,1.5,abc\n").unwrap_err();
        assert!(
            matches!(&error, DrawsCsvError::NotANumber { line: 3, column: 4, parameter, text }
            if parameter == "b" && text == "abc")
        );
        assert_eq!(
            error.to_string(),
            "line 3, column 4 (`b`): `abc` is not a number"
        );
    }

    #[test]
    fn ragged_rows_are_rejected() {
        let error = parse("chain,draw,a,b\n0,0,1.0,2.0\n0,1,1.5\n").unwrap_err();
        assert!(
            matches!(
                error,
                DrawsCsvError::RaggedRow {
                    line: 3,
                    expected: 4,
                    found: 3
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn bad_indices_are_rejected() {
        let error = parse("chain,draw,a\n0,-1,1.0\n").unwrap_err();
        assert!(
            matches!(
                error,
                DrawsCsvError::InvalidIndex {
                    line: 2,
                    column: "draw",
                    ..
                }
            ),
            "{error}"
        );
        let error = parse("chain,draw,a\nx,0,1.0\n").unwrap_err();
        assert!(
            matches!(
                error,
                DrawsCsvError::InvalidIndex {
                    line: 2,
                    column: "chain",
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn missing_and_duplicate_draws_are_rejected() {
        let error = parse("chain,draw,a\n0,0,1\n0,2,1\n").unwrap_err();
        assert!(
            matches!(error, DrawsCsvError::MissingDraw { chain: 0, draw: 1 }),
            "{error}"
        );
        let error = parse("chain,draw,a\n0,1,1\n0,2,1\n").unwrap_err();
        assert!(
            matches!(error, DrawsCsvError::MissingDraw { chain: 0, draw: 0 }),
            "{error}"
        );
        let error = parse("chain,draw,a\n0,0,1\n0,1,1\n0,1,2\n").unwrap_err();
        assert!(
            matches!(
                error,
                DrawsCsvError::DuplicateDraw {
                    line: 4,
                    first_line: 3,
                    chain: 0,
                    draw: 1
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn unequal_chain_lengths_are_rejected() {
        let error = parse("chain,draw,a\n0,0,1\n0,1,1\n3,0,1\n").unwrap_err();
        assert!(
            matches!(
                error,
                DrawsCsvError::UnequalChainLengths {
                    chain: 3,
                    draws: 1,
                    first_chain: 0,
                    first_draws: 2
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn bad_headers_and_empty_files_are_rejected() {
        assert!(matches!(parse(""), Err(DrawsCsvError::Empty)));
        assert!(matches!(
            parse("chain,draw,a\n"),
            Err(DrawsCsvError::NoDraws)
        ));
        for header in [
            "draw,chain,a",
            "chain,draw",
            "chain,draw,a,a",
            "chain,draw,,b",
        ] {
            let error = parse(&format!("{header}\n0,0,1,2\n")).unwrap_err();
            assert!(
                matches!(error, DrawsCsvError::Header { .. }),
                "{header}: {error}"
            );
        }
        assert!(matches!(
            parse("chain,draw,\"a\n"),
            Err(DrawsCsvError::UnterminatedQuote { line: 1 })
        ));
    }

    #[test]
    fn missing_files_report_their_path() {
        let path = std::env::temp_dir().join("bnn-diagnostics-no-such-file.csv");
        let error = read_long_draws_csv(&path).unwrap_err();
        assert!(matches!(&error, DrawsCsvError::Io { .. }));
        assert!(error
            .to_string()
            .contains("bnn-diagnostics-no-such-file.csv"));
    }

    #[test]
    fn reads_a_file_from_disk() {
        let path = std::env::temp_dir().join(format!("bnn-diagnostics-{}.csv", std::process::id()));
        std::fs::write(&path, "chain,draw,x\n0,0,0.5\n0,1,-1e-3\n").unwrap();
        let draws = read_long_draws_csv(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(draws.unwrap().draws, [[vec![0.5, -1e-3]]]);
    }
}
