//! The error of parsing a name that is not among the choices (an activation, a device, a
//! study's sampler): what was asked for and what would have been accepted.

/// A name that is not one of the choices; the `FromStr` error of the named enums.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{given}'; expected one of {}", .expected.join(", "))]
pub struct UnknownName {
    /// What the name names (`activation`, `device`).
    pub what: &'static str,
    pub given: String,
    pub expected: Vec<&'static str>,
}

impl UnknownName {
    pub fn new(
        what: &'static str,
        given: &str,
        expected: impl IntoIterator<Item = &'static str>,
    ) -> Self {
        Self {
            what,
            given: given.to_string(),
            expected: expected.into_iter().collect(),
        }
    }
}
