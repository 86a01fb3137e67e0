//! A run's progress on the terminal: stage lines and one indicatif bar per chain (nothing drawn off a terminal).

use bnn_pipeline::{ChainIteration, Progress, ProgressEvent};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A bar is redrawn at most this often: a microcanonical chain reports a transition every two
/// gradients (~100 µs), and formatting its message each time cost about 2% of the run.
const REDRAW_INTERVAL: Duration = Duration::from_millis(100);

/// One chain's bar and when its message was last set.
struct ChainBar {
    chain: usize,
    /// Sampling iterations after the warmup (the bar's length is the warmup as planned plus these).
    draws: usize,
    bar: ProgressBar,
    last_update: Option<Instant>,
}

/// Renders [`ProgressEvent`]s; the bars exist while chains run.
#[derive(Default)]
pub struct ProgressBars {
    /// The bars and the chain number each shows (a shard runs some of a run's chains).
    bars: Mutex<Option<(MultiProgress, Vec<ChainBar>)>>,
}

impl ProgressBars {
    fn start(&self, draws: usize, warmup: &[usize], chains: &[usize], done: &[usize]) {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "chain {prefix:>3} [{bar:30}] {pos}/{len} {msg} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bars = chains
            .iter()
            .zip(done)
            .zip(warmup)
            .map(|((&c, &done), &warmup)| {
                let bar = multi.add(ProgressBar::new((warmup + draws) as u64));
                bar.set_style(style.clone());
                bar.set_prefix(c.to_string());
                bar.set_position(done as u64);
                ChainBar {
                    chain: c,
                    draws,
                    bar,
                    last_update: None,
                }
            })
            .collect();
        *self.bars.lock().unwrap_or_else(PoisonError::into_inner) = Some((multi, bars));
    }

    fn update(&self, it: &ChainIteration) {
        if let Some((_, bars)) = self
            .bars
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            let Some(entry) = bars.iter_mut().find(|b| b.chain == it.chain) else {
                return;
            };
            let length = (it.planned_warmup + entry.draws) as u64;
            if entry.bar.length() != Some(length) {
                entry.bar.set_length(length);
            }
            let now = Instant::now();
            let last = it.iteration as u64 >= entry.bar.length().unwrap_or(0);
            if !last
                && entry
                    .last_update
                    .is_some_and(|t| now.duration_since(t) < REDRAW_INTERVAL)
            {
                return;
            }
            entry.last_update = Some(now);
            entry.bar.set_position(it.iteration as u64);
            entry.bar.set_message(format!(
                "{} div {} eps {:.3} acc {:.2}",
                if it.warmup { "warmup" } else { "sample" },
                it.divergences,
                it.step_size,
                it.accept_stat
            ));
        }
    }

    fn end(&self) {
        if let Some((_, bars)) = self
            .bars
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            for ChainBar { bar, .. } in &bars {
                bar.abandon();
            }
        }
    }
}

impl Progress for ProgressBars {
    fn report(&self, event: &ProgressEvent<'_>) {
        match event {
            // Lines only while no bars are drawn: a line printed under them leaves stale copies.
            ProgressEvent::Started { message, .. } | ProgressEvent::Finished { message, .. } => {
                eprintln!("{message}")
            }
            ProgressEvent::ChainsStarted {
                draws,
                warmup,
                chains,
                done,
            } => self.start(*draws, warmup, chains, done),
            ProgressEvent::Iteration(it) => self.update(it),
            ProgressEvent::ChainsEnded => self.end(),
        }
    }
}
