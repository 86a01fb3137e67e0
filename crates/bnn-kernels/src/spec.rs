//! What the fused kernel computes: layer shapes and their place in θ, activation, likelihood head.

/// Hidden-layer nonlinearity (the same set and definitions as `bnn_model::Activation`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelActivation {
    Tanh,
    Relu,
    LeakyRelu {
        slope: f64,
    },
    Sigmoid,
    Silu,
    /// x·Φ(x), Φ the standard normal CDF (the exact, erf-based GELU).
    Gelu,
    /// log(1 + e^x).
    Softplus,
    /// min(max(x, 0), 1).
    TruncRelu,
    Identity,
}

/// Observation model on the network outputs (the same definitions as `bnn_model::Likelihood`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelHead {
    /// Outputs `[μ_1..μ_T, o_1..o_T]`; log σ = clamp(o, ln σ_min, ln σ_max) (`softplus = false`)
    /// or log clamp(softplus(o), σ_min, σ_max) (`softplus = true`).
    Heteroscedastic {
        softplus: bool,
        sigma_min: f64,
        sigma_max: f64,
    },
    /// y ~ N(f(x), σ²) with σ fixed.
    Fixed { sigma: f64 },
    /// y_t ~ N(f_t(x), σ_t²), one σ per target column: log σ_t is θ[`log_sigma_offset` + t]
    /// (`target_columns` consecutive values), each with a Normal(mean, sd) prior.
    LearnedSigma {
        log_sigma_offset: usize,
        prior_mean: f64,
        prior_sd: f64,
    },
    /// Σ_k y_k log softmax(f(x))_k with one-hot (or soft) label rows y.
    Categorical,
}

/// One dense layer: weight `[d_in, d_out]` row major and bias `[d_out]` inside θ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelLayer {
    pub d_in: usize,
    pub d_out: usize,
    pub weight_offset: usize,
    pub bias_offset: usize,
}

/// Everything the kernel needs to know about the model; `dim` is the length of θ.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSpec {
    pub layers: Vec<KernelLayer>,
    pub activation: KernelActivation,
    pub head: KernelHead,
    /// Columns of the target matrix: T for regression, K (one-hot) for the categorical head.
    pub target_columns: usize,
    pub dim: usize,
}

/// A spec whose pieces do not fit together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelError(pub String);

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fused MLP kernel: {}", self.0)
    }
}

impl std::error::Error for KernelError {}

impl KernelSpec {
    /// The layout of Burn's MLP module flattened in module order: each layer's weight
    /// `[d_in, d_out]` then its bias, layer by layer; a learned log σ per target column
    /// (whatever offset `head` names) goes last. `widths` runs from inputs to outputs, e.g. `[8, 16, 16, 2]`.
    pub fn dense(
        widths: &[usize],
        activation: KernelActivation,
        head: KernelHead,
        target_columns: usize,
    ) -> Self {
        let mut offset = 0;
        let mut layers = Vec::new();
        for w in widths.windows(2) {
            layers.push(KernelLayer {
                d_in: w[0],
                d_out: w[1],
                weight_offset: offset,
                bias_offset: offset + w[0] * w[1],
            });
            offset += w[0] * w[1] + w[1];
        }
        let head = match head {
            KernelHead::LearnedSigma {
                prior_mean,
                prior_sd,
                ..
            } => {
                offset += target_columns;
                KernelHead::LearnedSigma {
                    log_sigma_offset: offset - target_columns,
                    prior_mean,
                    prior_sd,
                }
            }
            other => other,
        };
        KernelSpec {
            layers,
            activation,
            head,
            target_columns,
            dim: offset,
        }
    }

    pub fn d_input(&self) -> usize {
        self.layers[0].d_in
    }

    pub fn d_output(&self) -> usize {
        self.layers[self.layers.len() - 1].d_out
    }

    /// Checks shapes, offsets and head parameters once, so that evaluation can index freely.
    pub fn validate(&self) -> Result<(), KernelError> {
        let fail = |m: String| Err(KernelError(m));
        if self.layers.is_empty() {
            return fail("no layers".into());
        }
        for (i, pair) in self.layers.windows(2).enumerate() {
            if pair[0].d_out != pair[1].d_in {
                return fail(format!(
                    "layer {i} has {} outputs but layer {} takes {}",
                    pair[0].d_out,
                    i + 1,
                    pair[1].d_in
                ));
            }
        }
        for (i, layer) in self.layers.iter().enumerate() {
            if layer.d_in == 0 || layer.d_out == 0 {
                return fail(format!("layer {i} has a zero width"));
            }
            if layer.weight_offset + layer.d_in * layer.d_out > self.dim
                || layer.bias_offset + layer.d_out > self.dim
            {
                return fail(format!("layer {i} reaches past θ (dimension {})", self.dim));
            }
        }
        let k = self.d_output();
        let t = self.target_columns;
        match self.head {
            KernelHead::Heteroscedastic {
                sigma_min,
                sigma_max,
                ..
            } => {
                if k != 2 * t {
                    return fail(format!(
                        "a heteroscedastic head needs 2 × {t} outputs, the network has {k}"
                    ));
                }
                if !(sigma_min > 0.0 && sigma_min < sigma_max && sigma_max.is_finite()) {
                    return fail(format!(
                        "σ clip range [{sigma_min}, {sigma_max}] is not valid"
                    ));
                }
            }
            KernelHead::Fixed { sigma } => {
                if k != t {
                    return fail(format!("{t} targets but {k} outputs"));
                }
                if !(sigma > 0.0 && sigma.is_finite()) {
                    return fail(format!("fixed σ must be positive and finite, got {sigma}"));
                }
            }
            KernelHead::LearnedSigma {
                log_sigma_offset,
                prior_sd,
                prior_mean,
            } => {
                if k != t {
                    return fail(format!("{t} targets but {k} outputs"));
                }
                if log_sigma_offset + t > self.dim {
                    return fail(format!("{t} log σ values from offset {log_sigma_offset} reach past θ (dimension {})", self.dim));
                }
                if !(prior_sd > 0.0 && prior_sd.is_finite() && prior_mean.is_finite()) {
                    return fail(format!(
                        "log σ prior N({prior_mean}, {prior_sd}) is not valid"
                    ));
                }
            }
            KernelHead::Categorical => {
                if k != t || k < 2 {
                    return fail(format!("a categorical head needs one output per class (≥ 2), got {k} outputs for {t} label columns"));
                }
            }
        }
        Ok(())
    }
}
