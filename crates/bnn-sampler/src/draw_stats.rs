//! Per-draw statistics (the `info` of a transition): the fields every kernel reports, plus the
//! statistics a kernel declares for itself as named columns.

use serde::{Deserialize, Serialize};

/// What one transition did: the statistics every kernel has (CmdStan's columns and the energy
/// error), then the kernel's own in `kernel` (described by its `SamplerSettings::stat_columns`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DrawStats {
    /// `log p(q)` at the draw.
    pub log_density: f64,
    /// The adaptation statistic. HMC and random-walk Metropolis: the Metropolis acceptance
    /// probability `min(1, exp(H0 - H))`. NUTS: the mean of `min(1, exp(H0 - H))` over every
    /// leapfrog step of the trajectory (Stan's definition; Hoffman & Gelman 2014, §3.2.1).
    pub accept_stat: f64,
    /// Step size ε used (for random-walk Metropolis: the proposal scale multiplier).
    pub step_size: f64,
    /// NUTS: number of completed doublings; 0 for the other kernels (CmdStan's column).
    pub tree_depth: u32,
    /// Number of leapfrog steps (gradient evaluations) taken; 0 for random-walk Metropolis.
    pub n_leapfrog: u32,
    /// The energy error exceeded the divergence threshold or the log density was not finite or
    /// failed recoverably; the trajectory was cut and the chain did not move there.
    pub divergent: bool,
    /// Hamiltonian `H = -log p(q) + ½ pᵀM⁻¹p` at the draw (random-walk Metropolis: `-log p(q)`),
    /// for the E-BFMI diagnostic.
    pub energy: f64,
    /// `H - H0` at the proposal: the end of the trajectory (HMC), the selected point (NUTS),
    /// `log p(q) - log p(q')` (random-walk Metropolis), or MCLMC's energy change of the step
    /// (kinetic change minus the change of `log p`, whose variance its tuner controls).
    pub energy_error: f64,
    /// The kernel's own statistics, in the order of the columns its settings declare.
    #[serde(default)]
    pub kernel: KernelStats,
}

impl DrawStats {
    /// The columns of the common statistics in the draws files, CmdStan's names and order
    /// (`energy_error` is the kernels' business: those that report it declare it).
    pub const COLUMNS: [&'static str; 7] = [
        "lp__",
        "accept_stat__",
        "stepsize__",
        "treedepth__",
        "n_leapfrog__",
        "divergent__",
        "energy__",
    ];
}

/// A kernel's own per-draw statistics: up to [`KernelStats::CAPACITY`] numbers whose names and
/// kinds the kernel declares ([`StatColumn`]), so a sink writes them without knowing the kernel.
/// Fixed capacity keeps `DrawStats` `Copy` and allocation-free on the hot path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelStats {
    values: [f64; KernelStats::CAPACITY],
}

impl KernelStats {
    /// The most statistics a kernel may declare.
    pub const CAPACITY: usize = 4;

    /// The values in declared-column order; the rest stay 0.
    pub fn new(values: &[f64]) -> Self {
        assert!(
            values.len() <= Self::CAPACITY,
            "a kernel declares at most {} statistics",
            Self::CAPACITY
        );
        let mut stats = Self::default();
        stats.values[..values.len()].copy_from_slice(values);
        stats
    }

    /// The value of column `index` of the kernel's declared columns.
    pub fn get(&self, index: usize) -> f64 {
        self.values[index]
    }
}

/// How a kernel statistic is written: a real number or a count (written as an integer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatKind {
    Real,
    Count,
}

/// One statistic a kernel adds after the common ones: its column name (CmdStan's trailing
/// `__`), how to write it, and what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatColumn {
    pub name: &'static str,
    pub kind: StatKind,
    pub description: &'static str,
}

impl StatColumn {
    pub const fn real(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            kind: StatKind::Real,
            description,
        }
    }

    pub const fn count(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            kind: StatKind::Count,
            description,
        }
    }
}

/// The column `name` among `columns`, read from `stats` (`None` if the kernel has no such
/// column).
pub fn kernel_stat(stats: &DrawStats, columns: &[StatColumn], name: &str) -> Option<f64> {
    columns
        .iter()
        .position(|column| column.name == name)
        .map(|index| stats.kernel.get(index))
}
