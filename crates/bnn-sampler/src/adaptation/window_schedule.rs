//! Stan's windowed warmup schedule: fast init buffer, doubling slow windows, fast term buffer.

use serde::{Deserialize, Serialize};

/// When the metric estimator collects draws and when it updates the metric (Stan reference
/// manual, "HMC algorithm parameters: automatic parameter tuning").
///
/// The warmup starts with an initial fast interval (step size only, default 75 iterations) while
/// the chain finds the typical set, then a series of slow windows (default first size 25, each
/// twice the previous) that estimate the variances, then a terminal fast interval (default 50)
/// that tunes the step size to the final metric. A window is stretched to the start of the
/// terminal interval when the window after it would not fit. When the warmup is shorter than
/// the three defaults together it is split 15% / 75% / 10%, and below 20 iterations there are no
/// slow windows at all (step size only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSchedule {
    num_warmup: usize,
    /// Half-open `[start, end)` iteration ranges of the slow windows, in order.
    windows: Vec<(usize, usize)>,
}

impl WindowSchedule {
    /// `base_window` must be at least 1.
    pub fn new(
        num_warmup: usize,
        init_buffer: usize,
        term_buffer: usize,
        base_window: usize,
    ) -> Self {
        let mut windows = Vec::new();
        if num_warmup >= 20 && base_window > 0 {
            let (init, term, base) = if init_buffer + base_window + term_buffer > num_warmup {
                let init = (0.15 * num_warmup as f64) as usize;
                let term = (0.1 * num_warmup as f64) as usize;
                (init, term, num_warmup - init - term)
            } else {
                (init_buffer, term_buffer, base_window)
            };
            let last = num_warmup - term;
            let mut end = (init + base).min(last);
            windows.push((init, end));
            let mut size = base;
            while end < last {
                size *= 2;
                let mut next = end + size;
                // Stretch this window to the terminal buffer if the next one would not fit.
                if next + 2 * size > last {
                    next = last;
                }
                windows.push((end, next));
                end = next;
            }
        }
        Self {
            num_warmup,
            windows,
        }
    }

    /// An extension of a warmup (the stationary policy's): one slow window of `slow` iterations
    /// (none when 0) from the extension's start, then a terminal buffer of `term_buffer`.
    pub fn extension(slow: usize, term_buffer: usize) -> Self {
        Self {
            num_warmup: slow + term_buffer,
            windows: if slow > 0 { vec![(0, slow)] } else { vec![] },
        }
    }

    pub fn num_warmup(&self) -> usize {
        self.num_warmup
    }

    /// The slow windows as half-open iteration ranges.
    pub fn windows(&self) -> &[(usize, usize)] {
        &self.windows
    }

    /// Whether the draw of warmup iteration `iteration` (0-based) feeds the variance estimate.
    pub fn collects(&self, iteration: usize) -> bool {
        self.windows
            .iter()
            .any(|&(start, end)| (start..end).contains(&iteration))
    }

    /// Whether the metric is updated after warmup iteration `iteration`.
    pub fn ends_window(&self, iteration: usize) -> bool {
        self.windows.iter().any(|&(_, end)| end == iteration + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stan_default_windows_for_1000_iterations() {
        let s = WindowSchedule::new(1000, 75, 50, 25);
        assert_eq!(
            s.windows(),
            &[(75, 100), (100, 150), (150, 250), (250, 450), (450, 950)]
        );
    }

    #[test]
    fn short_warmup_uses_percentages() {
        let s = WindowSchedule::new(100, 75, 50, 25);
        assert_eq!(s.windows(), &[(15, 90)]);
        assert!(WindowSchedule::new(19, 75, 50, 25).windows().is_empty());
        let s = WindowSchedule::new(20, 75, 50, 25);
        assert_eq!(s.windows(), &[(3, 18)]);
    }

    #[test]
    fn tight_second_window_is_stretched() {
        assert_eq!(
            WindowSchedule::new(200, 75, 50, 25).windows(),
            &[(75, 100), (100, 150)]
        );
        assert_eq!(
            WindowSchedule::new(160, 75, 50, 25).windows(),
            &[(75, 100), (100, 110)]
        );
        assert!(WindowSchedule::new(1000, 75, 50, 25).ends_window(949));
        assert!(!WindowSchedule::new(1000, 75, 50, 25).collects(950));
    }
}
