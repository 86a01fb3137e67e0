//! Many fixed-step HMC chains on MLP posteriors, run in lockstep blocks (one per network and
//! trajectory length) spread over worker threads, reduced to acceptance statistics.

use anyhow::{anyhow, bail, Context as _, Result};
use bnn_model::{
    initial_parameters, Activation, AutodiffLogDensity, BnnConfig, HostData, Likelihood,
    MlpPosterior, Posterior, PriorSpec, UnknownName,
};
use bnn_sampler::{
    ChainStart, Draw, DrawSink, HmcConfig, RunStatus, SamplerConfig, SinkError, WarmupConfig,
};
use burn::tensor::{DType, Device};
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// A one-input, one-output MLP: its hidden widths and activation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Network {
    pub hidden: Vec<usize>,
    pub activation: Activation,
}

impl Network {
    /// Number of weights and biases.
    pub fn parameters(&self) -> usize {
        let mut widths = vec![1];
        widths.extend(&self.hidden);
        widths.push(1);
        widths.windows(2).map(|w| (w[0] + 1) * w[1]).sum()
    }

    /// `1-50-1`, `1-20-20-1`.
    pub fn shape(&self) -> String {
        let inner: Vec<String> = self.hidden.iter().map(|w| w.to_string()).collect();
        format!("1-{}-1", inner.join("-"))
    }
}

/// One fixed-step HMC chain: a network, a trajectory of `num_steps` leapfrog steps of size
/// `step_size`, and the replicate (seed index) that picks its start and random stream.
#[derive(Clone, Debug, PartialEq)]
pub struct FixedStepChain {
    pub network: Network,
    pub num_steps: usize,
    pub step_size: f64,
    pub replicate: usize,
}

impl FixedStepChain {
    /// The chain's random stream: a hash of everything that defines it, so its draws do not
    /// depend on which other chains share its block or on the order they are listed in.
    fn stream(&self) -> usize {
        // FNV-1a over a canonical byte string.
        let key = format!(
            "{}|{:?}|{}|{:016x}|{}",
            self.network.shape(),
            self.network.activation,
            self.num_steps,
            self.step_size.to_bits(),
            self.replicate
        );
        let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        // Stream ids are `usize`; keep 48 bits so they fit everywhere.
        (hash >> 16) as usize
    }
}

/// What one chain's kept draws showed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ChainAcceptance {
    /// Mean Metropolis acceptance probability `min(1, exp(-ΔH))` over the kept draws (the
    /// draws file's `accept_stat__`).
    pub acceptance: f64,
    /// Share of kept draws whose proposal was taken (the chain moved).
    pub accepted_fraction: f64,
    /// Share of kept draws whose trajectory was cut (energy error above 1000, or not finite).
    pub divergent_fraction: f64,
    /// Gradient evaluations of the whole chain, burn-in included.
    pub gradients: u64,
}

/// Where a replicate's chains start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartPoint {
    /// PyTorch's U(±1/√fan_in) initialization (what an optimizer would start from).
    Initialization,
    /// A draw from the N(0, 1) prior.
    PriorDraw,
}

impl std::str::FromStr for StartPoint {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s.trim() {
            "init" | "initialization" => Ok(Self::Initialization),
            "prior" | "prior_draw" => Ok(Self::PriorDraw),
            other => Err(UnknownName::new("start", other, ["init", "prior"])),
        }
    }
}

impl StartPoint {
    /// Replicate `replicate`'s start for `layout` (stream `replicate` of `seed`).
    fn position(
        self,
        layout: &bnn_model::ParameterLayout,
        seed: u64,
        replicate: usize,
    ) -> Vec<f64> {
        match self {
            StartPoint::Initialization => initial_parameters(layout, seed, replicate as u64),
            StartPoint::PriorDraw => {
                use rand::SeedableRng;
                use rand_distr::Distribution;
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
                rng.set_stream(replicate as u64);
                (0..layout.dim())
                    .map(|_| rand_distr::StandardNormal.sample(&mut rng))
                    .collect()
            }
        }
    }
}

/// What every chain of a study shares.
#[derive(Clone, Debug)]
pub struct ChainSettings {
    /// The training rows (one input, one target).
    pub data: HostData,
    pub likelihood: Likelihood,
    pub prior: PriorSpec,
    pub device: Device,
    /// Float type of the log density and gradient (the sampler itself runs in f64).
    pub dtype: DType,
    /// Transitions discarded before the kept draws (no adaptation happens in them).
    pub burn_in: usize,
    pub draws: usize,
    pub seed: u64,
    pub start: StartPoint,
    /// Blocks run at once, each on its own thread.
    pub workers: usize,
}

/// A progress bar's view of a study: a stage starts with its planned gradient count, then each
/// finished transition reports its planned leapfrog steps.
pub trait Progress: Sync {
    fn stage(&self, _name: &str, _planned_gradients: u64) {}
    fn advance(&self, gradients: u64);
}

/// No progress reporting.
pub struct Quiet;

impl Progress for Quiet {
    fn advance(&self, _gradients: u64) {}
}

/// Leapfrog steps the chains plan to take, burn-in included (trajectories cut by a divergence
/// take fewer): the total a progress bar counts to.
pub fn planned_gradients(chains: &[FixedStepChain], settings: &ChainSettings) -> u64 {
    let transitions = (settings.burn_in + settings.draws) as u64;
    chains
        .iter()
        .map(|c| c.num_steps as u64 * transitions)
        .sum()
}

/// Runs every chain to its end and returns its acceptance statistics, in the order given.
///
/// Chains of the same network and trajectory length form one block that advances in lockstep
/// with one `[C, D]` gradient call per leapfrog step, each chain with its own step size;
/// `settings.workers` blocks run at once, the longest first. Each chain starts from
/// `settings.start` drawn from stream `replicate` of `settings.seed` (shared by all chains of a
/// replicate on the same network) and draws from its own random stream, so its numbers do not
/// depend on the grouping, the order or the number of workers.
pub fn run_fixed_step_chains(
    chains: &[FixedStepChain],
    settings: &ChainSettings,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Vec<ChainAcceptance>> {
    if settings.draws == 0 {
        bail!("at least one kept draw per chain is needed");
    }
    for (i, chain) in chains.iter().enumerate() {
        if chain.num_steps == 0 || !(chain.step_size > 0.0 && chain.step_size.is_finite()) {
            bail!("chain {chain:?}: the number of steps and the step size must be positive");
        }
        // Equal chains would share a random stream and a tally: a repeated grid value.
        if let Some(other) = chains[..i].iter().find(|c| c.stream() == chain.stream()) {
            bail!("the chain {} {} L = {} ε = {} seed {} is listed twice (a repeated value in the grid?)", other.network.shape(), other.network.activation.name(), other.num_steps, other.step_size, other.replicate);
        }
    }
    let mut blocks: Vec<(Network, usize, Vec<usize>)> = Vec::new();
    for (i, chain) in chains.iter().enumerate() {
        match blocks
            .iter_mut()
            .find(|(n, l, _)| *n == chain.network && *l == chain.num_steps)
        {
            Some(block) => block.2.push(i),
            None => blocks.push((chain.network.clone(), chain.num_steps, vec![i])),
        }
    }
    // Longest first, so the last block to start is a short one (a simple makespan heuristic).
    blocks.sort_by_key(|(network, num_steps, members)| {
        std::cmp::Reverse(network.parameters() * num_steps * members.len())
    });
    let queue = Mutex::new(blocks.into_iter());
    let results = Mutex::new(vec![None; chains.len()]);
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..settings.workers.max(1) {
            scope.spawn(|| loop {
                if failure.lock().map_or(true, |f| f.is_some()) {
                    return;
                }
                let Some((network, num_steps, members)) =
                    queue.lock().ok().and_then(|mut q| q.next())
                else {
                    return;
                };
                let block: Vec<&FixedStepChain> = members.iter().map(|&i| &chains[i]).collect();
                match run_block(&network, num_steps, &block, settings, progress, stop) {
                    Ok(stats) => {
                        let mut results = results.lock().unwrap_or_else(|p| p.into_inner());
                        for (&i, s) in members.iter().zip(stats) {
                            results[i] = Some(s);
                        }
                    }
                    Err(e) => {
                        failure
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(e);
                        return;
                    }
                }
            });
        }
    });
    if let Some(error) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(error);
    }
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.ok_or_else(|| anyhow!("a block did not run")))
        .collect()
}

fn run_block(
    network: &Network,
    num_steps: usize,
    chains: &[&FixedStepChain],
    settings: &ChainSettings,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Vec<ChainAcceptance>> {
    let config = BnnConfig::new(1)
        .with_hidden(network.hidden.clone())
        .with_activation(network.activation)
        .with_likelihood(settings.likelihood)
        .with_prior(settings.prior.clone());
    let posterior = MlpPosterior::new(config, &settings.data, &settings.device, settings.dtype)
        .with_context(|| {
            format!(
                "building the {} {} posterior",
                network.shape(),
                network.activation.name()
            )
        })?;
    let layout = posterior.layout().clone();
    let density = AutodiffLogDensity::new(posterior);
    let sampler = SamplerConfig::new(
        HmcConfig::new()
            .with_num_steps(num_steps)
            .with_max_num_steps(num_steps)
            .into(),
    )
    .with_warmup(
        WarmupConfig::new()
            .with_adapt_step_size(false)
            .with_adapt_metric(false),
    )
    .with_num_warmup(settings.burn_in)
    .with_num_draws(settings.draws)
    .with_seed(settings.seed)
    .with_batched(true)
    .init()?;
    let mut states = chains
        .iter()
        .map(|chain| {
            let start = ChainStart::at(settings.start.position(
                &layout,
                settings.seed,
                chain.replicate,
            ))
            .with_step_size(chain.step_size);
            sampler.init_chain(&density, chain.stream(), &start)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut sink = AcceptanceSink {
        streams: chains.iter().map(|c| c.stream()).collect(),
        tallies: vec![Tally::default(); chains.len()],
        previous: states.iter().map(|s| s.kernel.position.clone()).collect(),
        num_steps: num_steps as u64,
        progress,
    };
    if sampler.run(&density, &mut states, &mut sink, stop)? == RunStatus::Stopped {
        bail!("interrupted");
    }
    if let Some(t) = sink
        .tallies
        .iter()
        .find(|t| t.kept != settings.draws as u64)
    {
        bail!("a chain kept {} of its {} draws", t.kept, settings.draws);
    }
    Ok(sink.tallies.iter().map(|t| t.summary()).collect())
}

#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    kept: u64,
    accept_sum: f64,
    accepted: u64,
    divergent: u64,
    gradients: u64,
}

impl Tally {
    fn summary(&self) -> ChainAcceptance {
        let n = self.kept.max(1) as f64;
        ChainAcceptance {
            acceptance: self.accept_sum / n,
            accepted_fraction: self.accepted as f64 / n,
            divergent_fraction: self.divergent as f64 / n,
            gradients: self.gradients,
        }
    }
}

/// Keeps running sums per chain instead of draws: a study runs hundreds of chains of thousands
/// of draws, whose positions it never needs.
struct AcceptanceSink<'a> {
    streams: Vec<usize>,
    tallies: Vec<Tally>,
    /// Each chain's position before its latest transition (to tell an accepted proposal).
    previous: Vec<Vec<f64>>,
    /// The block's trajectory length L.
    num_steps: u64,
    progress: &'a dyn Progress,
}

impl DrawSink for AcceptanceSink<'_> {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
        let slot = self
            .streams
            .iter()
            .position(|&s| s == draw.chain)
            .ok_or("a draw of an unknown chain")?;
        let tally = &mut self.tallies[slot];
        let stats = draw.stats;
        tally.gradients += u64::from(stats.n_leapfrog);
        if !draw.warmup {
            tally.kept += 1;
            tally.accept_sum += stats.accept_stat;
            tally.accepted += u64::from(self.previous[slot] != draw.position);
            tally.divergent += u64::from(stats.divergent);
        }
        self.previous[slot].copy_from_slice(draw.position);
        // Planned steps, so the bar's total is reached even when divergences cut trajectories.
        self.progress.advance(self.num_steps);
        Ok(())
    }
}
