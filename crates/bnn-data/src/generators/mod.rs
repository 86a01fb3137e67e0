//! Synthetic regression problems from the BNN sampling literature, seeded and reproducible.

mod cos2x;
mod robot_arm;

pub use cos2x::{cos2x, COS2X_DEFAULT_NOISE_SD, COS2X_DEFAULT_ROWS};
pub use robot_arm::{robot_arm, robot_arm_stacked, ROBOT_ARM_NOISE_SD, ROBOT_ARM_ROWS_PER_PART};
