-- The same per version and slice.
WITH ranked AS (
    SELECT version_id, slice, ttft_ms,
           row_number() OVER (PARTITION BY version_id, slice ORDER BY ttft_ms) AS rank,
           count(*) OVER (PARTITION BY version_id, slice) AS runs
    FROM runs
),
p99 AS (
    SELECT version_id, slice, runs, ttft_ms AS ttft_p99_ms
    FROM ranked
    WHERE rank = ceil(0.99::DOUBLE * runs)
),
joined AS (
    SELECT r.version_id, r.slice,
           count(o.run_id) AS outcomes_joined,
           count(o.run_id) FILTER (WHERE o.outcome = 'accepted')::DOUBLE
               / nullif(count(o.run_id), 0) AS outcome_rate
    FROM runs r LEFT JOIN outcomes o USING (run_id)
    GROUP BY r.version_id, r.slice
)
SELECT version_id, slice, runs, ttft_p99_ms, outcomes_joined, outcome_rate
FROM p99 JOIN joined USING (version_id, slice)
ORDER BY version_id, slice;
