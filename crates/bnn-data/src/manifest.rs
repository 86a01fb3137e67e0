//! The list of named benchmark datasets, embedded from the crate's `manifest.json`.

use std::sync::OnceLock;

use serde::Deserialize;

/// One list for the Rust loader and `fetch.py` (`datasets/manifest.json` is a link to this
/// file, which sits in the crate so a published `bnn-data` holds it); it is embedded so the
/// binary needs no repository at run time.
const MANIFEST_JSON: &str = include_str!("../manifest.json");

/// One benchmark dataset: where its CSV lies under the data folder, what it must hash to, and
/// where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NamedDataset {
    pub name: String,
    /// Path of the CSV relative to the data folder, `/`-separated.
    pub file: String,
    /// Header name of the target column.
    pub target: String,
    pub rows: usize,
    pub features: usize,
    /// Lower-case hex SHA-256 of the CSV's bytes.
    pub sha256: String,
    pub uci_id: u32,
    /// The dataset's page at the UCI Machine Learning Repository.
    pub source_url: String,
    pub doi: String,
    pub citation: String,
    pub license: String,
}

#[derive(Deserialize)]
struct Manifest {
    datasets: Vec<NamedDataset>,
}

/// Every named dataset, in manifest order.
pub fn list_named() -> &'static [NamedDataset] {
    static NAMED: OnceLock<Vec<NamedDataset>> = OnceLock::new();
    NAMED.get_or_init(|| {
        let manifest: Manifest = serde_json::from_str(MANIFEST_JSON)
            .expect("datasets/manifest.json is embedded at build time and must parse");
        manifest.datasets
    })
}

pub fn find_named(name: &str) -> Option<&'static NamedDataset> {
    list_named().iter().find(|d| d.name == name)
}

pub fn named_dataset_names() -> Vec<String> {
    list_named().iter().map(|d| d.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_lists_the_seven_benchmarks_with_well_formed_hashes() {
        let names = named_dataset_names();
        assert_eq!(
            names,
            [
                "airfoil",
                "bikesharing",
                "concrete",
                "energy",
                "protein",
                "yacht",
                "wine-quality-red"
            ]
        );
        for d in list_named() {
            assert_eq!(d.sha256.len(), 64, "{}", d.name);
            assert!(
                d.sha256
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
                "{}",
                d.name
            );
            assert!(d.rows > 0 && d.features > 0, "{}", d.name);
        }
    }

    #[test]
    fn find_named_returns_none_for_unknown_names() {
        assert_eq!(find_named("yacht").map(|d| d.features), Some(6));
        assert!(find_named("boston").is_none());
    }
}
