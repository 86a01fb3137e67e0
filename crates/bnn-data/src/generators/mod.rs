//! Synthetic regression problems from the BNN sampling literature, seeded and reproducible.

mod cos2x;
mod friedman;
mod robot_arm;

pub use cos2x::{cos2x, COS2X_DEFAULT_NOISE_SD, COS2X_DEFAULT_ROWS};
pub use friedman::{friedman1, FRIEDMAN1_DEFAULT_ROWS, FRIEDMAN1_FEATURES, FRIEDMAN1_NOISE_SD};
pub use robot_arm::{robot_arm, robot_arm_stacked, ROBOT_ARM_NOISE_SD, ROBOT_ARM_ROWS_PER_PART};
