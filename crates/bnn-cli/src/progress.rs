//! Progress bars, one per chain: iterations, divergences, step size, acceptance and ETA.
//! indicatif draws nothing when stderr is not a terminal, so logs and CI stay clean.

use bnn_sampler::Draw;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct ChainProgress {
    _multi: MultiProgress,
    bars: Vec<ProgressBar>,
    divergences: std::sync::Mutex<Vec<usize>>,
}

impl ChainProgress {
    /// Bars for chains that each run `total` iterations; `done[c]` were completed before (resume).
    pub fn new(total: usize, done: &[usize]) -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("chain {prefix:>3} [{bar:30}] {pos}/{len} {msg} eta {eta}")
            .expect("a valid template")
            .progress_chars("=> ");
        let bars = done
            .iter()
            .enumerate()
            .map(|(c, &done)| {
                let bar = multi.add(ProgressBar::new(total as u64));
                bar.set_style(style.clone());
                bar.set_prefix(c.to_string());
                bar.set_position(done as u64);
                bar
            })
            .collect();
        Self { _multi: multi, bars, divergences: std::sync::Mutex::new(vec![0; done.len()]) }
    }

    pub fn update(&self, draw: &Draw<'_>) {
        let mut divergences = self.divergences.lock().unwrap_or_else(|p| p.into_inner());
        divergences[draw.chain] += usize::from(draw.stats.divergent);
        let bar = &self.bars[draw.chain];
        bar.set_position(draw.state.iteration as u64);
        bar.set_message(format!(
            "{} div {} eps {:.3} acc {:.2}",
            if draw.warmup { "warmup" } else { "sample" },
            divergences[draw.chain],
            draw.stats.step_size,
            draw.stats.accept_stat
        ));
    }

    pub fn finish(&self) {
        for bar in &self.bars {
            bar.abandon();
        }
    }
}
