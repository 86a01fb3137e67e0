//! Early stopping on a validation loss: remembers the best epoch and says when to stop.

/// What to do after an epoch's validation loss has been observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The loss is the best so far: keep these parameters.
    Improved,
    /// No improvement, but patience is not used up yet.
    Continue,
    /// `patience` epochs in a row without improvement: stop and return the best parameters.
    Stop,
}

/// Patience-based early stopping (Prechelt 1998, "Early stopping — but when?"): stop after
/// `patience` consecutive epochs whose loss is not strictly below the best seen. A NaN loss
/// never counts as an improvement.
#[derive(Debug, Clone)]
pub(crate) struct EarlyStopping {
    patience: usize,
    best: f64,
    since_best: usize,
}

impl EarlyStopping {
    pub(crate) fn new(patience: usize) -> Self {
        EarlyStopping {
            patience,
            best: f64::INFINITY,
            since_best: 0,
        }
    }

    pub(crate) fn observe(&mut self, loss: f64) -> Verdict {
        if loss < self.best {
            self.best = loss;
            self.since_best = 0;
            Verdict::Improved
        } else {
            self.since_best += 1;
            if self.since_best >= self.patience {
                Verdict::Stop
            } else {
                Verdict::Continue
            }
        }
    }

    /// The best loss seen (`+∞` before any finite observation).
    pub(crate) fn best(&self) -> f64 {
        self.best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_after_patience_epochs_without_improvement() {
        let mut stop = EarlyStopping::new(2);
        let verdicts: Vec<_> = [3.0, 2.0, 2.0, 2.5, 1.0, 1.5, f64::NAN]
            .iter()
            .map(|&l| stop.observe(l))
            .collect();
        use Verdict::*;
        // Equal is not an improvement; NaN is not either.
        assert_eq!(
            verdicts,
            [Improved, Improved, Continue, Stop, Improved, Continue, Stop]
        );
        assert_eq!(stop.best(), 1.0);
    }

    #[test]
    fn a_nan_first_epoch_is_not_the_best() {
        let mut stop = EarlyStopping::new(1);
        assert_eq!(stop.observe(f64::NAN), Verdict::Stop);
        assert_eq!(stop.best(), f64::INFINITY);
    }
}
