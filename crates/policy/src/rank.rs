//! The nearest-rank quantile, the one percentile rule of the project: the p99 time to first
//! token that `observe` reports of run records and the one the capacity simulator reports
//! of its requests are the same statistic.

/// The 1-based rank of the nearest-rank `p`-quantile of `n` values: ⌈p · n⌉, held to
/// 1..=n (0 when there are no values). The value at that rank in ascending order is the
/// quantile.
///
/// ```
/// // Of 200 values, the p99 is the 198th smallest; the p50 the 100th; p 0 the smallest.
/// assert_eq!(policy::nearest_rank(0.99, 200), 198);
/// assert_eq!(policy::nearest_rank(0.5, 200), 100);
/// assert_eq!(policy::nearest_rank(0.0, 200), 1);
/// assert_eq!(policy::nearest_rank(1.0, 3), 3);
/// assert_eq!(policy::nearest_rank(0.99, 0), 0);
/// ```
pub fn nearest_rank(p: f64, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    ((p * n as f64).ceil() as u64).clamp(1, n)
}
