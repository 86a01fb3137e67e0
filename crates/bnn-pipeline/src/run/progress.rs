//! How a run reports its stages and chain iterations to the caller ([`Progress`]).

/// A stage of a DEI-MCMC run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Training the deep ensemble (or finding a saved one).
    Ensemble,
    /// Running the chains.
    Sampling,
    /// The posterior predictive pass over the stored draws and `predictions.csv`.
    Prediction,
    /// Metrics and baselines into `summary.json`.
    Evaluation,
    /// Convergence diagnostics into `diagnostics.json`.
    Diagnostics,
}

/// One iteration of one chain, as it happens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChainIteration {
    pub chain: usize,
    /// Iterations of this chain done so far, warmup included (resumed runs count from the checkpoint).
    pub iteration: usize,
    pub warmup: bool,
    /// The chain's warmup iterations as planned after this one (grows when a stationarity
    /// check fails).
    pub planned_warmup: usize,
    /// Divergent transitions of this chain since sampling (re)started.
    pub divergences: usize,
    pub step_size: f64,
    pub accept_stat: f64,
}

/// What a run reports.
#[derive(Debug, Clone, Copy)]
pub enum ProgressEvent<'a> {
    /// A stage begins; `message` says what it does, e.g. "training 4 members on 80 rows (...)".
    Started {
        stage: Stage,
        message: &'a str,
    },
    /// The chains start: chain `chains[k]` (its number in the whole run; a shard runs some of
    /// them) runs `warmup[k]` warmup iterations as planned now (the stationary policy may add
    /// more: see [`ChainIteration::planned_warmup`]) and `draws`, `done[k]` of them before (a
    /// resumed run).
    ChainsStarted {
        draws: usize,
        warmup: &'a [usize],
        chains: &'a [usize],
        done: &'a [usize],
    },
    Iteration(&'a ChainIteration),
    /// The chains stopped (finished, or interrupted by the stop flag).
    ChainsEnded,
    /// A stage ends; `message` says how, e.g. "sampled in 2.5 s; draws in runs/cos2x".
    Finished {
        stage: Stage,
        message: &'a str,
    },
}

/// Receives a run's events; called from the threads that run the chains, hence `Sync`.
pub trait Progress: Send + Sync {
    fn report(&self, event: &ProgressEvent<'_>);
}

impl<F: Fn(&ProgressEvent<'_>) + Send + Sync> Progress for F {
    fn report(&self, event: &ProgressEvent<'_>) {
        self(event)
    }
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn report(&self, _: &ProgressEvent<'_>) {}
}

/// Prints each stage's start and end message to stderr (e.g. "training 4 members ...",
/// "sampled in 2.5 s; draws in runs/x"); the chains' iterations are not printed.
pub struct PrintStages;

impl Progress for PrintStages {
    fn report(&self, event: &ProgressEvent<'_>) {
        if let ProgressEvent::Started { message, .. } | ProgressEvent::Finished { message, .. } =
            event
        {
            eprintln!("{message}");
        }
    }
}
