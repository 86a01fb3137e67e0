//! Warmup adaptation of the step size and the diagonal metric, Stan's windowed scheme.

pub mod dual_averaging;
pub mod step_size_search;
pub mod warmup;
pub mod welford;
pub mod window_schedule;
