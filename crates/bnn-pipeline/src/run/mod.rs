//! The stages of a DEI-MCMC run: prepare the data, train (or reuse) the ensemble, sample
//! the chains, with progress reported and early stopping.

pub(crate) mod dei_mcmc;
pub(crate) mod early_stop;
pub(crate) mod map_ensemble;
pub(crate) mod module_run;
pub(crate) mod prepared_data;
pub(crate) mod progress;
pub(crate) mod sampling;
pub(crate) mod trained_ensemble;
