//! A base-10 logarithmic axis with 1-2-5 style ticks over any range.
//!
//! plotters' own log axis labels only from the first power of ten inside the range, so a
//! step size that settles between 0.01 and 0.1 would get no tick labels near it.

use crate::figure::tick_label;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use std::ops::Range;

/// Tick mantissas from densest to sparsest; the densest has no gap wider than ×1.5, so a
/// padded range (at least ×1.56 wide) always holds a tick.
const MANTISSAS: [&[f64]; 4] = [
    &[1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    &[1.0, 2.0, 5.0],
    &[1.0, 3.0],
    &[1.0],
];
/// More labels than this crowd a panel's axis.
const MAX_TICKS: usize = 10;

/// A log-scaled axis over `range` (both ends positive).
#[derive(Clone)]
pub(crate) struct LogAxis {
    range: Range<f64>,
}

impl LogAxis {
    pub fn new(range: Range<f64>) -> Self {
        Self { range }
    }

    /// Ticks `m × 10^k` inside the range for the densest mantissa set that fits `max` ticks,
    /// else every few powers of ten.
    fn ticks(&self, max: usize) -> Vec<f64> {
        let max = max.clamp(1, MAX_TICKS);
        let (lo, hi) = (
            self.range.start.log10().floor() as i32,
            self.range.end.log10().ceil() as i32,
        );
        let inside = |v: &f64| self.range.contains(v);
        for mantissas in MANTISSAS {
            let ticks: Vec<f64> = (lo..=hi)
                .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
                .filter(inside)
                .collect();
            if ticks.len() <= max {
                return ticks;
            }
        }
        let decades = (hi - lo) as usize + 1;
        let stride = decades.div_ceil(max).max(1);
        (lo..=hi)
            .step_by(stride)
            .map(|k| 10f64.powi(k))
            .filter(inside)
            .collect()
    }
}

impl Ranged for LogAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let (lo, hi) = (self.range.start.log10(), self.range.end.log10());
        let t = (value.log10() - lo) / (hi - lo);
        limit.0 + (t * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        self.ticks(hint.max_num_points())
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

impl ValueFormatter<f64> for LogAxis {
    fn format(value: &f64) -> String {
        tick_label(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_a_range_below_the_first_power_of_ten() {
        // The case plotters' log axis leaves bare: everything between 0.04 and 0.1.
        assert_eq!(
            LogAxis::new(0.04..0.095).ticks(10),
            [0.04, 0.05, 0.06, 0.07, 0.08, 0.09]
        );
    }

    #[test]
    fn thins_ticks_over_wide_ranges() {
        let ticks = LogAxis::new(0.03..1.3).ticks(10);
        assert!(ticks.len() <= 10, "{ticks:?}");
        assert!(ticks.contains(&0.1) && ticks.contains(&1.0), "{ticks:?}");
        let decades = LogAxis::new(1e-9..1e3).ticks(5);
        assert!(!decades.is_empty() && decades.len() <= 5, "{decades:?}");
    }

    #[test]
    fn maps_log_evenly() {
        let axis = LogAxis::new(0.01..1.0);
        assert_eq!(axis.map(&0.1, (0, 100)), 50);
        assert_eq!(axis.map(&1.0, (0, 100)), 100);
    }
}
