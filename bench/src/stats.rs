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

/// The ranks (1-based) of the samples that bound the `q`-quantile (0–1) of
/// `n` samples with `confidence` (0–1), without assuming a distribution: the
/// count of samples at or below the true quantile is Binomial(n, q), so the
/// interval between the `low`-th and `high`-th smallest samples holds it
/// with at least that probability. `high` is `None` when even the largest
/// sample is not enough (too few samples for that tail).
pub fn quantile_ranks(n: usize, q: f64, confidence: f64) -> (usize, Option<usize>) {
    let tail = (1.0 - confidence) / 2.0;
    // cdf[k] = P(B <= k), from the pmf built up in log space.
    let (ln_q, ln_p) = (q.ln(), (1.0 - q).ln());
    let mut ln_choose = 0.0;
    let mut cdf = Vec::with_capacity(n + 1);
    let mut total = 0.0;
    for k in 0..=n {
        if k > 0 {
            ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        total += (ln_choose + k as f64 * ln_q + (n - k) as f64 * ln_p).exp();
        cdf.push(total);
    }
    // P(x_(j) <= true quantile) = P(B >= j) = 1 - cdf[j - 1].
    let low = (1..=n).rev().find(|&j| cdf[j - 1] <= tail).unwrap_or(1);
    let high = (1..=n).find(|&j| cdf[j - 1] >= 1.0 - tail);
    (low, high)
}

/// A latency series in milliseconds, summarised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    /// The samples that bound the true p99 with 95 % confidence
    /// ([`quantile_ranks`]); no upper bound when the series is too short
    /// for its tail.
    pub p99_low: f64,
    pub p99_high: Option<f64>,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |p| percentile(&sorted, p);
        let (low, high) = quantile_ranks(sorted.len(), 0.99, 0.95);
        Some(Summary {
            p99_low: *sorted.get(low.checked_sub(1)?)?,
            p99_high: high.and_then(|h| sorted.get(h - 1).copied()),
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

    #[test]
    fn the_p99_interval_needs_a_long_series() {
        // 200 rounds: the true p99 may lie above the largest sample.
        assert_eq!(quantile_ranks(200, 0.99, 0.95).1, None);
        // 500: between the 491st and the 500th of 500 (the p99 is the 495th).
        let (low, high) = quantile_ranks(500, 0.99, 0.95);
        assert!((488..=492).contains(&low), "{low}");
        assert_eq!(high, Some(500));
        // 1000: the 6th largest or so, well inside the series.
        let (low, high) = quantile_ranks(1000, 0.99, 0.95);
        assert!(low < 990 && high.is_some_and(|h| (994..1000).contains(&h)), "{low} {high:?}");
        // The median of 100 (a textbook case): ranks 40 and 61.
        assert_eq!(quantile_ranks(100, 0.5, 0.95), (40, Some(61)));
    }
}
