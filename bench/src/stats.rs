//! Order statistics over samples: medians, tails and the spread across rounds.

/// Order statistics of one sample set (same unit as the samples).
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
}

/// Percentile `q` in [0, 1] of sorted samples, linear interpolation between ranks.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Summarises `samples` (any order).
pub fn summarize(samples: &[f64]) -> Summary {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Summary {
            mean: f64::NAN,
            min: f64::NAN,
            p10: f64::NAN,
            p50: f64::NAN,
            p90: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
            mad: f64::NAN,
            ..Summary::default()
        };
    }
    v.sort_by(f64::total_cmp);
    let p50 = percentile_sorted(&v, 0.5);
    let mut dev: Vec<f64> = v.iter().map(|x| (x - p50).abs()).collect();
    dev.sort_by(f64::total_cmp);
    Summary {
        n: v.len(),
        mean: v.iter().sum::<f64>() / v.len() as f64,
        min: v[0],
        p10: percentile_sorted(&v, 0.10),
        p50,
        p90: percentile_sorted(&v, 0.90),
        p99: percentile_sorted(&v, 0.99),
        max: v[v.len() - 1],
        mad: percentile_sorted(&dev, 0.5),
    }
}

/// Formats a number with a sensible number of digits.
pub fn fmt(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// `p50 (p10–p90)` of per-round values, the spread the table shows next to a ratio.
pub fn spread(rounds: &Summary) -> String {
    format!(
        "{} (p10–p90 {}–{}, n={})",
        fmt(rounds.p50),
        fmt(rounds.p10),
        fmt(rounds.p90),
        rounds.n
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_set() {
        let v: Vec<f64> = (1..=101).map(f64::from).collect();
        let s = summarize(&v);
        assert_eq!(s.n, 101);
        assert_eq!(s.p50, 51.0);
        assert_eq!(s.p10, 11.0);
        assert_eq!(s.p90, 91.0);
        assert_eq!(s.p99, 100.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 101.0);
        assert_eq!(s.mad, 25.0);
    }

    #[test]
    fn empty_is_nan_not_a_panic() {
        let s = summarize(&[]);
        assert_eq!(s.n, 0);
        assert!(s.p50.is_nan());
        assert_eq!(fmt(s.p50), "n/a");
    }
}
