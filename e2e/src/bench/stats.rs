//! Percentiles and the summary of a latency series.

use serde::Serialize;

/// The nearest-rank percentile of `sorted` (ascending): the smallest sample
/// that at least `p` % of the samples do not exceed. Always one of the
/// samples — no interpolation between two rounds that never happened.
/// `None` for no samples.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = (p.clamp(0.0, 100.0) / 100.0 * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// A latency series in milliseconds, summarised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |p| percentile(&sorted, p);
        Some(Summary {
            n: sorted.len(),
            min: *sorted.first()?,
            p50: at(50.0)?,
            p90: at(90.0)?,
            p99: at(99.0)?,
            max: *sorted.last()?,
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_one_to_a_hundred() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(50.0));
        assert_eq!(percentile(&sorted, 90.0), Some(90.0));
        assert_eq!(percentile(&sorted, 99.0), Some(99.0));
        assert_eq!(percentile(&sorted, 100.0), Some(100.0));
        assert_eq!(percentile(&sorted, 0.0), Some(1.0));
        assert_eq!(percentile(&sorted, 99.5), Some(100.0));
    }

    #[test]
    fn small_series_take_an_actual_sample() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 1.0), Some(7.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        // Four samples: p50 is the 2nd, p90 and p99 the 4th (never between two).
        let four = [1.0, 2.0, 3.0, 40.0];
        assert_eq!(percentile(&four, 50.0), Some(2.0));
        assert_eq!(percentile(&four, 90.0), Some(40.0));
        assert_eq!(percentile(&four, 99.0), Some(40.0));
        // Twenty samples (a CI run): p90 is the 18th, p99 the 20th.
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&twenty, 90.0), Some(18.0));
        assert_eq!(percentile(&twenty, 99.0), Some(20.0));
    }

    #[test]
    fn a_summary_sorts_its_input() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.n, s.min, s.p50, s.max, s.mean), (5, 1.0, 3.0, 5.0, 3.0));
        assert_eq!((s.p90, s.p99), (5.0, 5.0));
        assert_eq!(Summary::of(&[]), None);
    }
}
