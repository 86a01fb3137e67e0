//! Figure 2a of Dinh et al.: HMC efficiency `ε · a_ε` against the acceptance rate `a_ε` at a fixed
//! travel time, interpolated per seed on a common acceptance grid and averaged, and the
//! acceptance rate where that average peaks (the empirical optimal acceptance).

/// Acceptance rates at which every seed's curve is read: 0, 0.005, …, 1.
const GRID_STEP: f64 = 0.005;

/// One activation's averaged curve.
#[derive(Clone, Debug, PartialEq)]
pub struct EfficiencyCurve {
    /// `(acceptance, mean efficiency over seeds)` where every seed's curve is defined.
    pub points: Vec<(f64, f64)>,
    /// The point of highest mean efficiency.
    pub optimum: Option<(f64, f64)>,
}

impl EfficiencyCurve {
    /// Averages the seeds' curves. `seeds[s]` holds `(step size ε, acceptance a_ε)` of seed `s`;
    /// each seed's efficiency `ε · a_ε` is interpolated linearly in `a` between its points
    /// (sorted by acceptance), only inside the span of acceptances that seed reached.
    pub fn from_seeds(seeds: &[Vec<(f64, f64)>]) -> Self {
        let curves: Vec<Vec<(f64, f64)>> = seeds
            .iter()
            .map(|points| {
                let mut curve: Vec<(f64, f64)> = points
                    .iter()
                    .filter(|(e, a)| e.is_finite() && a.is_finite())
                    .map(|&(e, a)| (a, e * a))
                    .collect();
                curve.sort_by(|x, y| x.0.total_cmp(&y.0));
                curve
            })
            .collect();
        let steps = (1.0 / GRID_STEP).round() as usize;
        let points: Vec<(f64, f64)> = (0..=steps)
            .filter_map(|k| {
                let a = k as f64 * GRID_STEP;
                let values: Option<Vec<f64>> = curves.iter().map(|c| interpolate(c, a)).collect();
                values
                    .filter(|v| !v.is_empty())
                    .map(|v| (a, v.iter().sum::<f64>() / v.len() as f64))
            })
            .collect();
        let optimum = points.iter().copied().max_by(|x, y| x.1.total_cmp(&y.1));
        Self { points, optimum }
    }

    /// The mean efficiency at acceptance `a`, if the curve covers it.
    pub fn at(&self, a: f64) -> Option<f64> {
        interpolate(&self.points, a)
    }
}

/// Linear interpolation of `y(x)` through points sorted by `x`; `None` outside their span.
fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if x < first.0 - 1e-12 || x > last.0 + 1e-12 {
        return None;
    }
    let i = points.partition_point(|p| p.0 < x);
    if i == 0 {
        return Some(first.1);
    }
    if i == points.len() {
        return Some(last.1);
    }
    let ((x0, y0), (x1, y1)) = (points[i - 1], points[i]);
    if x1 == x0 {
        return Some(0.5 * (y0 + y1));
    }
    Some(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_optimum_of_a_known_curve_is_found() {
        // a(ε) = 1 - 100 ε² makes ε a = ε - 100 ε³, maximal at ε = 1/√300 where a = 2/3.
        let seed: Vec<(f64, f64)> = (1..=40)
            .map(|k| k as f64 * 0.0025)
            .map(|e| (e, 1.0 - 100.0 * e * e))
            .filter(|(_, a)| *a > 0.0)
            .collect();
        let curve = EfficiencyCurve::from_seeds(&[seed.clone(), seed]);
        let (a, _) = curve.optimum.unwrap();
        assert!((a - 2.0 / 3.0).abs() < 0.02, "optimum at {a}");
    }

    #[test]
    fn seeds_are_averaged_only_where_all_are_defined() {
        let one = vec![(0.001, 0.9), (0.002, 0.5)];
        let two = vec![(0.001, 0.8), (0.002, 0.4)];
        let curve = EfficiencyCurve::from_seeds(&[one, two]);
        let (lo, hi) = (
            curve.points.first().unwrap().0,
            curve.points.last().unwrap().0,
        );
        assert!(
            (lo - 0.5).abs() < 1e-9 && (hi - 0.8).abs() < 1e-9,
            "{lo}..{hi}"
        );
        // At a = 0.8: seed one interpolates between (0.5, 0.001) and (0.9, 0.0009): 0.000925;
        // seed two is at its point (0.8, 0.0008).
        let v = curve.at(0.8).unwrap();
        assert!((v - 0.5 * (0.000925 + 0.0008)).abs() < 1e-9, "{v}");
        assert!(curve.at(0.3).is_none());
    }
}
