//! Deterministic four-lane summation for the hot dot products.

/// Four interleaved partial sums.
///
/// A plain left-to-right sum of `D` terms is one chain of dependent additions (about four cycles
/// each), which dominated the sampler's own cost at `D` in the hundreds. Here term `i` goes to
/// lane `i mod 4`, each lane sums in index order, and the total is `(l0 + l1) + (l2 + l3)`:
/// four independent chains, and a fixed order, so every caller that follows this definition gets
/// bit-identical results (the fast NUTS, its recursive oracle, the batched HMC).
#[derive(Clone, Copy, Debug, Default)]
pub struct LaneSum {
    lanes: [f64; 4],
}

impl LaneSum {
    /// Adds the terms of a whole chunk `4k..4k+4`.
    #[inline(always)]
    pub fn add_chunk(&mut self, terms: [f64; 4]) {
        self.lanes[0] += terms[0];
        self.lanes[1] += terms[1];
        self.lanes[2] += terms[2];
        self.lanes[3] += terms[3];
    }

    /// Adds term `index` (for the tail after the last whole chunk).
    #[inline(always)]
    pub fn add(&mut self, index: usize, term: f64) {
        self.lanes[index & 3] += term;
    }

    #[inline(always)]
    pub fn total(&self) -> f64 {
        (self.lanes[0] + self.lanes[1]) + (self.lanes[2] + self.lanes[3])
    }
}

/// `Σ aᵢ bᵢ` in lane order.
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut sum = LaneSum::default();
    for (x, y) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
        sum.add_chunk([x[0] * y[0], x[1] * y[1], x[2] * y[2], x[3] * y[3]]);
    }
    for i in n - n % 4..n {
        sum.add(i, a[i] * b[i]);
    }
    sum.total()
}
