//! Runs split over machines: a shard of the chains, and merging shards into the
//! single-machine run.

pub(crate) mod merge;
pub(crate) mod shard;
