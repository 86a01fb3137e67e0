//! Seeded train / validation / test splits that are identical on every platform.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dataset::Dataset;
use crate::error::DataError;
use crate::matrix::Matrix;

/// Share of rows held out for testing when the caller has no preference.
pub const DEFAULT_TEST_FRACTION: f64 = 0.2;

/// A partition of a dataset's rows. Every row is in exactly one part; within a part rows keep
/// their original order, and `*_indices` say which original rows they are.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub train: Dataset,
    pub valid: Option<Dataset>,
    pub test: Dataset,
    pub train_indices: Vec<usize>,
    /// Empty when there is no validation part.
    pub valid_indices: Vec<usize>,
    pub test_indices: Vec<usize>,
}

impl Split {
    fn from_indices(
        dataset: &Dataset,
        train: Vec<usize>,
        valid: Option<Vec<usize>>,
        test: Vec<usize>,
    ) -> Self {
        Split {
            train: dataset.select_rows(&train),
            valid: valid.as_deref().map(|v| dataset.select_rows(v)),
            test: dataset.select_rows(&test),
            train_indices: train,
            valid_indices: valid.unwrap_or_default(),
            test_indices: test,
        }
    }

    /// The dataset the split was made from, rows back in their original order.
    pub fn original_rows(&self) -> Dataset {
        let n = self.train_indices.len() + self.valid_indices.len() + self.test_indices.len();
        let mut x = Matrix::zeros(n, self.train.n_features());
        let mut y = Matrix::zeros(n, self.train.n_targets());
        let parts = [Some(&self.train), self.valid.as_ref(), Some(&self.test)];
        let indices = [&self.train_indices, &self.valid_indices, &self.test_indices];
        for (part, rows) in parts.into_iter().zip(indices) {
            let Some(part) = part else { continue };
            for (k, &i) in rows.iter().enumerate() {
                x.data[i * x.cols..(i + 1) * x.cols].copy_from_slice(part.x.row(k));
                y.data[i * y.cols..(i + 1) * y.cols].copy_from_slice(part.y.row(k));
            }
        }
        Dataset {
            x,
            y,
            ..self.train.clone()
        }
    }
}

/// Splits off `round(n * test_fraction)` test rows (at least 1) by a permutation seeded with
/// `seed`; the rest is training data, which must keep at least 2 rows.
pub fn train_test_split(
    dataset: &Dataset,
    test_fraction: f64,
    seed: u64,
) -> Result<Split, DataError> {
    let sizes = PartSizes::new(dataset, None, test_fraction)?;
    let (train, valid, test) = sizes.assign(seeded_permutation(dataset.n_rows(), seed));
    Ok(Split::from_indices(dataset, train, valid, test))
}

/// Like [`train_test_split`] with a validation part of `round(n * valid_fraction)` rows.
pub fn train_valid_test_split(
    dataset: &Dataset,
    valid_fraction: f64,
    test_fraction: f64,
    seed: u64,
) -> Result<Split, DataError> {
    let sizes = PartSizes::new(dataset, Some(valid_fraction), test_fraction)?;
    let (train, valid, test) = sizes.assign(seeded_permutation(dataset.n_rows(), seed));
    Ok(Split::from_indices(dataset, train, valid, test))
}

/// Rows `0..n_train` for training and the rest for testing, for data that come with a
/// canonical split (the robot arm's first 200 rows).
pub fn split_at_row(dataset: &Dataset, n_train: usize) -> Result<Split, DataError> {
    let n = dataset.n_rows();
    if n_train < 2 || n_train >= n {
        return Err(DataError::TooFewRows {
            dataset: dataset.name.clone(),
            rows: n,
            needed: n_train.max(2) + 1,
            purpose: format!(
                "a split with the first {n_train} rows for training and at least 1 for testing"
            ),
        });
    }
    Ok(Split::from_indices(
        dataset,
        (0..n_train).collect(),
        None,
        (n_train..n).collect(),
    ))
}

/// Row counts of each part, validated before anything is shuffled.
struct PartSizes {
    train: usize,
    valid: Option<usize>,
    test: usize,
}

impl PartSizes {
    fn new(
        dataset: &Dataset,
        valid_fraction: Option<f64>,
        test_fraction: f64,
    ) -> Result<Self, DataError> {
        check_fraction("test_fraction", test_fraction)?;
        if let Some(v) = valid_fraction {
            check_fraction("valid_fraction", v)?;
            if v + test_fraction >= 1.0 {
                return Err(DataError::InvalidParameter {
                    name: "valid_fraction + test_fraction",
                    value: v + test_fraction,
                    requirement: "below 1, so that rows remain for training",
                });
            }
        }
        let n = dataset.n_rows();
        // f64::round rounds halves away from zero, e.g. 2.5 -> 3.
        let part_rows = |fraction: f64| ((n as f64 * fraction).round() as usize).max(1);
        let test = part_rows(test_fraction);
        let valid = valid_fraction.map(part_rows);
        let held_out = test + valid.unwrap_or(0);
        if n < held_out + 2 {
            return Err(DataError::TooFewRows {
                dataset: dataset.name.clone(),
                rows: n,
                needed: held_out + 2,
                purpose: match valid {
                    Some(v) => format!(
                        "{test} test rows, {v} validation rows and at least 2 training rows"
                    ),
                    None => format!("{test} test rows and at least 2 training rows"),
                },
            });
        }
        Ok(Self {
            train: n - held_out,
            valid,
            test,
        })
    }

    /// Deals out a permutation: train first, then validation, then test; each part sorted.
    fn assign(&self, permutation: Vec<usize>) -> (Vec<usize>, Option<Vec<usize>>, Vec<usize>) {
        let sorted = |rows: &[usize]| {
            let mut rows = rows.to_vec();
            rows.sort_unstable();
            rows
        };
        let (train, rest) = permutation.split_at(self.train);
        let (valid, test) = rest.split_at(self.valid.unwrap_or(0));
        debug_assert_eq!(test.len(), self.test);
        (
            sorted(train),
            self.valid.map(|_| sorted(valid)),
            sorted(test),
        )
    }
}

fn check_fraction(name: &'static str, value: f64) -> Result<(), DataError> {
    if value > 0.0 && value < 1.0 {
        Ok(())
    } else {
        Err(DataError::InvalidParameter {
            name,
            value,
            requirement: "strictly between 0 and 1",
        })
    }
}

/// Fisher–Yates shuffle of `0..n` driven by ChaCha8. Indices are drawn as `u64`, never
/// `usize`, so 32- and 64-bit targets consume the stream identically.
pub(crate) fn seeded_permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut permutation: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..=i as u64) as usize;
        permutation.swap(i, j);
    }
    permutation
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_pinned_for_seed_42() {
        // A change in rand, rand_chacha or the shuffle would silently change every split of
        // every experiment; this fixed value makes such a change visible.
        assert_eq!(seeded_permutation(10, 42), PINNED_PERMUTATION_SEED_42);
    }

    /// Recorded from this implementation on x86_64 Linux with rand 0.9 / rand_chacha 0.9.
    const PINNED_PERMUTATION_SEED_42: [usize; 10] = [9, 7, 2, 5, 0, 1, 4, 3, 8, 6];

    #[test]
    fn permutation_is_a_permutation() {
        let mut p = seeded_permutation(1000, 7);
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
    }
}
