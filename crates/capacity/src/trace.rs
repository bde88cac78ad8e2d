//! Workload traces: requests (arrival, prompt and output lengths, language slice, shared
//! prefix) from a seeded generator of mixed arrivals, or from a CSV or JSONL file.
//!
//! Trace files (one request per row, arrivals in seconds, not decreasing):
//!
//! ```text
//! arrival_s,prompt_tokens,output_tokens,slice      # CSV: this header, then rows
//! 0.000,42,17,en
//! 0.013,61,30,eu
//! ```
//!
//! ```text
//! {"arrival_s": 0.0, "prompt_tokens": 42, "output_tokens": 17, "slice": "en"}
//! ```
//!
//! Two optional columns name a shared prefix: the first `prefix_tokens` of the prompt are
//! the same in every request with that `prefix_id` (a system prompt, an earlier turn of a
//! conversation). In CSV the header then ends `,prefix_id,prefix_tokens` and a row without
//! a prefix leaves both empty; in JSONL a row has both keys or neither.
//!
//! Blank lines and lines starting with `#` are skipped in both.

use std::collections::HashMap;

use policy::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::error::{at_least_one, in_range, positive, CapacityError};
use crate::figures::shortest;
use crate::profile::preset;

/// The most requests one simulation takes (about 40 bytes each while it runs). A plan
/// simulates them once per configuration, within [`crate::MAX_PLAN_WORK`] in all.
pub const MAX_REQUESTS: usize = 20_000_000;

/// The slowest and fastest mean arrival rates a generated trace may have, requests per
/// second (one a week to a billion a second): beyond them the arrival times lose the
/// precision the simulator's clock needs, or the generator's loops their bound.
pub const MIN_RATE_PER_S: f64 = 1e-6;
pub const MAX_RATE_PER_S: f64 = 1e9;

/// The latest arrival a trace file may give, seconds (about 31,700 years): Unix times in
/// seconds fit; the planner measures from the first arrival.
pub const MAX_ARRIVAL_S: f64 = 1e12;

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub arrival_s: f64,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Index into [`Trace::slices`].
    pub slice: u16,
    /// The shared prefix the prompt starts with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<SharedPrefix>,
}

/// The first `tokens` of a prompt, shared by every request with the same prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedPrefix {
    /// Index into [`Trace::prefixes`].
    pub id: u32,
    pub tokens: u32,
}

/// Requests in arrival order, the names of their slices and of their shared prefixes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub slices: Vec<String>,
    pub requests: Vec<Request>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
}

/// How requests arrive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Arrivals {
    /// A Poisson process: exponential gaps with mean `1 / rate_per_s`.
    Poisson { rate_per_s: f64 },
    /// A two-state Markov-modulated Poisson process with the same mean rate: bursts hold
    /// `burst_share` of the time at `burst_factor` times the calm rate; a burst lasts
    /// `mean_burst_s` on average.
    Bursty {
        rate_per_s: f64,
        burst_factor: f64,
        burst_share: f64,
        mean_burst_s: f64,
    },
    /// A sinusoidal day: rate `rate_per_s · (1 + amplitude · sin(2πt / period_s))`, drawn by
    /// thinning (Lewis and Shedler).
    Diurnal {
        rate_per_s: f64,
        amplitude: f64,
        period_s: f64,
    },
}

impl Arrivals {
    pub fn mean_rate(&self) -> f64 {
        match *self {
            Arrivals::Poisson { rate_per_s }
            | Arrivals::Bursty { rate_per_s, .. }
            | Arrivals::Diurnal { rate_per_s, .. } => rate_per_s,
        }
    }

    /// Sets the mean rate and keeps the process's shape (its bursts, its day): what the
    /// CLI's `--rate` and the lab's rate field change of a preset. Not checked here;
    /// [`TraceSpec::validate`] holds it to its range.
    pub fn set_mean_rate(&mut self, rate: f64) {
        match self {
            Arrivals::Poisson { rate_per_s }
            | Arrivals::Bursty { rate_per_s, .. }
            | Arrivals::Diurnal { rate_per_s, .. } => *rate_per_s = rate,
        }
    }

    fn validate(&self) -> Result<(), CapacityError> {
        let rate = positive("arrival rate (requests/s)", self.mean_rate())?;
        in_range(
            "arrival rate (requests/s)",
            rate,
            MIN_RATE_PER_S,
            MAX_RATE_PER_S,
        )?;
        match *self {
            Arrivals::Poisson { .. } => {}
            Arrivals::Bursty {
                burst_factor,
                burst_share,
                mean_burst_s,
                ..
            } => {
                in_range("burst factor", burst_factor, 1.0, 1e6)?;
                in_range("burst share", burst_share, 1e-6, 1.0 - 1e-6)?;
                in_range("mean burst length (s)", mean_burst_s, 1e-6, 1e12)?;
                // The generator walks every burst and calm state; a cycle (burst plus calm,
                // mean_burst / share seconds) must hold at least 1/1000 of an arrival on
                // average, or it would switch states a million times per request.
                let per_cycle = rate * mean_burst_s / burst_share;
                if per_cycle < 1e-3 {
                    return Err(CapacityError::OutOfRange {
                        what: "arrivals per burst cycle (rate × mean burst length / burst share)"
                            .into(),
                        value: per_cycle,
                        min: 1e-3,
                        max: f64::INFINITY,
                    });
                }
            }
            Arrivals::Diurnal {
                amplitude,
                period_s,
                ..
            } => {
                // Below 1 the thinning accepts at least (1 - a) / (1 + a) of its candidates.
                in_range("diurnal amplitude", amplitude, 0.0, 0.95)?;
                in_range("diurnal period (s)", period_s, 1e-6, 1e12)?;
            }
        }
        Ok(())
    }
}

/// A distribution of token counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LengthDist {
    Constant {
        tokens: u32,
    },
    /// Uniform over `min..=max`.
    Uniform {
        min: u32,
        max: u32,
    },
    /// Log-normal with the given median and log-space standard deviation, rounded and
    /// clamped to `min..=max` (chat prompts and answers are roughly log-normal).
    LogNormal {
        median: f64,
        sigma: f64,
        min: u32,
        max: u32,
    },
}

impl LengthDist {
    fn validate(&self, what: &str) -> Result<(), CapacityError> {
        match *self {
            LengthDist::Constant { tokens } => {
                at_least_one(what, tokens as u64)?;
            }
            LengthDist::Uniform { min, max } | LengthDist::LogNormal { min, max, .. } => {
                at_least_one(&format!("{what} minimum"), min as u64)?;
                if min > max {
                    return Err(CapacityError::EmptyRange {
                        what: what.into(),
                        min: min as u64,
                        max: max as u64,
                    });
                }
                if let LengthDist::LogNormal { median, sigma, .. } = *self {
                    positive(&format!("{what} median"), median)?;
                    in_range(&format!("{what} sigma"), sigma, 0.0, 10.0)?;
                }
            }
        }
        Ok(())
    }

    /// The largest value a draw can take.
    pub fn max(&self) -> u32 {
        match *self {
            LengthDist::Constant { tokens } => tokens,
            LengthDist::Uniform { max, .. } | LengthDist::LogNormal { max, .. } => max,
        }
    }

    fn draw(&self, rng: &mut SplitMix64) -> u32 {
        match *self {
            LengthDist::Constant { tokens } => tokens,
            // Validated `min <= max`, so the span is 1 to 2^32: never the empty range.
            LengthDist::Uniform { min, max } => {
                (min as u64 + rng.below(max as u64 - min as u64 + 1)) as u32
            }
            LengthDist::LogNormal {
                median,
                sigma,
                min,
                max,
            } => {
                let x = median * (sigma * rng.normal()).exp();
                x.round().clamp(min as f64, max as f64) as u32
            }
        }
    }
}

/// One language slice of the traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceMix {
    /// The slice's code, as the quality profile names it ("en", "eu").
    pub slice: String,
    /// Share of requests, in (0, 1]; the shares sum to 1.
    pub share: f64,
    /// Prompt tokens relative to the base distribution: the same text costs more tokens in
    /// a language the tokenizer saw less of (Basque: 1.8 bytes per token against English's
    /// 2.5 in the tiny model, so 1.39).
    pub prompt_scale: f64,
}

/// A seeded generator of requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSpec {
    pub name: String,
    pub requests: u64,
    pub seed: u64,
    pub arrivals: Arrivals,
    pub prompt_tokens: LengthDist,
    pub output_tokens: LengthDist,
    pub slices: Vec<SliceMix>,
    /// Shared prefixes that prompts start with; none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefixes: Option<PrefixMix>,
}

/// Shared prompt prefixes (system prompts): `count` of them, each of a length drawn once
/// from `tokens`; a request starts with one, chosen uniformly, with probability `share`,
/// and its own prompt (drawn as without prefixes) follows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrefixMix {
    pub count: u32,
    pub tokens: LengthDist,
    pub share: f64,
}

/// The most distinct prefixes a generated trace has.
pub const MAX_PREFIXES: u32 = 1_000_000;

/// Mixed into the trace's seed for the prefixes' own stream, so that a spec's other draws
/// are the same with and without prefixes.
const PREFIX_STREAM: u64 = 0x9E37_79B9_7F4A_7C15;

impl TraceSpec {
    pub fn validate(&self) -> Result<(), CapacityError> {
        at_least_one("requests", self.requests)?;
        if self.requests as usize > MAX_REQUESTS || self.requests > usize::MAX as u64 {
            return Err(CapacityError::TooManyRequests {
                requests: self.requests.min(usize::MAX as u64) as usize,
                limit: MAX_REQUESTS,
            });
        }
        self.arrivals.validate()?;
        self.prompt_tokens.validate("prompt tokens")?;
        self.output_tokens.validate("output tokens")?;
        if self.slices.is_empty() {
            return Err(CapacityError::SliceMix {
                reason: "no slices".into(),
            });
        }
        if self.slices.len() > u16::MAX as usize {
            return Err(CapacityError::SliceMix {
                reason: format!("{} slices, more than {}", self.slices.len(), u16::MAX),
            });
        }
        let mut total = 0.0;
        for (i, s) in self.slices.iter().enumerate() {
            if s.slice.is_empty() || self.slices[..i].iter().any(|o| o.slice == s.slice) {
                return Err(CapacityError::SliceMix {
                    reason: format!(
                        "slice name {:?} is empty or repeated",
                        policy::Excerpt(&s.slice)
                    ),
                });
            }
            in_range(&format!("share of slice {:?}", s.slice), s.share, 1e-9, 1.0)?;
            in_range(
                &format!("prompt scale of slice {:?}", s.slice),
                s.prompt_scale,
                1e-3,
                1e3,
            )?;
            total += s.share;
        }
        if (total - 1.0).abs() > 1e-6 {
            return Err(CapacityError::SliceMix {
                reason: format!("shares sum to {}, not 1", shortest(total)),
            });
        }
        if let Some(p) = &self.shared_prefixes {
            at_least_one("shared prefixes", p.count as u64)?;
            in_range("shared prefixes", p.count as f64, 1.0, MAX_PREFIXES as f64)?;
            p.tokens.validate("shared prefix tokens")?;
            in_range("share of requests with a shared prefix", p.share, 0.0, 1.0)?;
        }
        Ok(())
    }

    /// Draws the trace. Same spec, same requests, bit for bit.
    pub fn generate(&self) -> Result<Trace, CapacityError> {
        self.validate()?;
        let n = self.requests as usize;
        let mut rng = SplitMix64::new(self.seed);
        let mut arrivals = ArrivalClock::new(&self.arrivals, &mut rng);
        let mut prefix_rng = SplitMix64::new(self.seed ^ PREFIX_STREAM);
        let prefix_lengths: Vec<u32> = self.shared_prefixes.as_ref().map_or(Vec::new(), |p| {
            (0..p.count)
                .map(|_| p.tokens.draw(&mut prefix_rng))
                .collect()
        });
        let mut requests = Vec::with_capacity(n);
        for _ in 0..n {
            let arrival_s = arrivals.next(&mut rng);
            let u = rng.uniform();
            let mut slice = self.slices.len() - 1;
            let mut cumulative = 0.0;
            for (i, s) in self.slices.iter().enumerate() {
                cumulative += s.share;
                if u < cumulative {
                    slice = i;
                    break;
                }
            }
            let scale = self.slices[slice].prompt_scale;
            let prompt = self.prompt_tokens.draw(&mut rng) as f64 * scale;
            let prompt_tokens = prompt.round().clamp(1.0, u32::MAX as f64) as u32;
            let output_tokens = self.output_tokens.draw(&mut rng);
            let prefix = self.shared_prefixes.as_ref().and_then(|p| {
                let shared = prefix_rng.uniform() < p.share;
                let id = prefix_rng.below(p.count as u64) as u32;
                shared.then(|| SharedPrefix {
                    id,
                    tokens: prefix_lengths[id as usize],
                })
            });
            requests.push(Request {
                arrival_s,
                prompt_tokens: prompt_tokens.saturating_add(prefix.map_or(0, |p| p.tokens)),
                output_tokens,
                slice: slice as u16,
                prefix,
            });
        }
        // Prefixes are numbered in order of first use, as a trace file's are when read.
        let mut first_use = vec![u32::MAX; prefix_lengths.len()];
        let mut prefixes = Vec::new();
        for p in requests.iter_mut().filter_map(|r| r.prefix.as_mut()) {
            let id = &mut first_use[p.id as usize];
            if *id == u32::MAX {
                *id = prefixes.len() as u32;
                prefixes.push(format!("prefix-{id}"));
            }
            p.id = *id;
        }
        Ok(Trace {
            slices: self.slices.iter().map(|s| s.slice.clone()).collect(),
            requests,
            prefixes,
        })
    }

    /// Chat traffic for the lab's tiny model (context 256): log-normal prompts (median 40)
    /// and answers (median 24), 95 % English and 5 % Basque, the rare slice, whose prompts
    /// take 1.39 times the tokens; 5,000 requests at 200 per second. Arrivals: `poisson`,
    /// `bursty` (bursts of 8x the calm rate 10 % of the time) or `diurnal` (±60 % over a
    /// 10-minute "day"). `chat-prefix` is `poisson` where every prompt starts with one of 8
    /// system prompts of 64 tokens, followed by the user's message (median 24 tokens).
    pub fn presets() -> Vec<TraceSpec> {
        let base = |name: &str, arrivals: Arrivals| TraceSpec {
            name: name.into(),
            requests: 5_000,
            seed: 6,
            arrivals,
            prompt_tokens: LengthDist::LogNormal {
                median: 40.0,
                sigma: 0.6,
                min: 4,
                max: 128,
            },
            output_tokens: LengthDist::LogNormal {
                median: 24.0,
                sigma: 0.6,
                min: 1,
                max: 64,
            },
            slices: vec![
                SliceMix {
                    slice: "en".into(),
                    share: 0.95,
                    prompt_scale: 1.0,
                },
                SliceMix {
                    slice: "eu".into(),
                    share: 0.05,
                    prompt_scale: 1.39,
                },
            ],
            shared_prefixes: None,
        };
        let rate = 200.0;
        vec![
            base("poisson", Arrivals::Poisson { rate_per_s: rate }),
            base(
                "bursty",
                Arrivals::Bursty {
                    rate_per_s: rate,
                    burst_factor: 8.0,
                    burst_share: 0.1,
                    mean_burst_s: 2.0,
                },
            ),
            base(
                "diurnal",
                Arrivals::Diurnal {
                    rate_per_s: rate,
                    amplitude: 0.6,
                    period_s: 600.0,
                },
            ),
            TraceSpec {
                prompt_tokens: LengthDist::LogNormal {
                    median: 24.0,
                    sigma: 0.6,
                    min: 2,
                    max: 64,
                },
                shared_prefixes: Some(PrefixMix {
                    count: 8,
                    tokens: LengthDist::Constant { tokens: 64 },
                    share: 1.0,
                }),
                ..base("chat-prefix", Arrivals::Poisson { rate_per_s: rate })
            },
        ]
    }

    pub fn preset(name: &str) -> Result<TraceSpec, CapacityError> {
        preset("trace", name, TraceSpec::presets(), |p| &p.name)
    }
}

/// The arrival processes as one resumable clock.
struct ArrivalClock {
    arrivals: Arrivals,
    t: f64,
    /// Bursty: whether in a burst, and when the current state ends.
    in_burst: bool,
    state_end: f64,
}

impl ArrivalClock {
    fn new(arrivals: &Arrivals, rng: &mut SplitMix64) -> ArrivalClock {
        let mut clock = ArrivalClock {
            arrivals: arrivals.clone(),
            t: 0.0,
            in_burst: false,
            state_end: f64::INFINITY,
        };
        if let Arrivals::Bursty {
            burst_share,
            mean_burst_s,
            ..
        } = *arrivals
        {
            let calm = mean_burst_s * (1.0 - burst_share) / burst_share;
            clock.state_end = rng.exponential(1.0 / calm);
        }
        clock
    }

    fn next(&mut self, rng: &mut SplitMix64) -> f64 {
        match self.arrivals {
            Arrivals::Poisson { rate_per_s } => {
                self.t += rng.exponential(rate_per_s);
            }
            Arrivals::Bursty {
                rate_per_s,
                burst_factor,
                burst_share,
                mean_burst_s,
            } => {
                let calm_rate = rate_per_s / ((1.0 - burst_share) + burst_factor * burst_share);
                let calm_dwell = mean_burst_s * (1.0 - burst_share) / burst_share;
                // Each pass either emits or moves to the next state; state lengths are
                // exponential with positive means, so this ends with probability 1.
                loop {
                    let rate = if self.in_burst {
                        calm_rate * burst_factor
                    } else {
                        calm_rate
                    };
                    let candidate = self.t + rng.exponential(rate);
                    if candidate <= self.state_end {
                        self.t = candidate;
                        break;
                    }
                    self.t = self.state_end;
                    self.in_burst = !self.in_burst;
                    let dwell = if self.in_burst {
                        mean_burst_s
                    } else {
                        calm_dwell
                    };
                    self.state_end = self.t + rng.exponential(1.0 / dwell);
                }
            }
            Arrivals::Diurnal {
                rate_per_s,
                amplitude,
                period_s,
            } => {
                let peak = rate_per_s * (1.0 + amplitude);
                loop {
                    self.t += rng.exponential(peak);
                    let phase = std::f64::consts::TAU * self.t / period_s;
                    let rate = rate_per_s * (1.0 + amplitude * phase.sin());
                    if rng.uniform() * peak < rate {
                        break;
                    }
                }
            }
        }
        self.t
    }
}

/// The format of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    Csv,
    Jsonl,
}

impl TraceFormat {
    /// From a file name: `.csv` or `.jsonl`/`.ndjson`.
    pub fn from_path(path: &str) -> Option<TraceFormat> {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".csv") {
            Some(TraceFormat::Csv)
        } else if lower.ends_with(".jsonl") || lower.ends_with(".ndjson") {
            Some(TraceFormat::Jsonl)
        } else {
            None
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRow {
    arrival_s: f64,
    prompt_tokens: u32,
    output_tokens: u32,
    slice: String,
    prefix_id: Option<String>,
    prefix_tokens: Option<u32>,
}

const CSV_HEADER: &str = "arrival_s,prompt_tokens,output_tokens,slice";
const CSV_PREFIX_COLUMNS: &str = ",prefix_id,prefix_tokens";

/// serde_json's reason without its "at line 1 column N" (a row is one line; the trace's
/// own line number leads the message): "invalid type: …, expected u32 (column 70)".
fn json_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((reason, _)) => format!("{reason} (column {})", e.column()),
        None => text,
    }
}

impl Trace {
    /// Reads a trace file's text. Errors name the line (1-based) and what is wrong with it.
    pub fn parse(text: &str, format: TraceFormat) -> Result<Trace, CapacityError> {
        let mut trace = Trace {
            slices: Vec::new(),
            requests: Vec::new(),
            prefixes: Vec::new(),
        };
        let mut header_seen = false;
        let mut columns = 4;
        // Prefix ids by name (a trace may name a prefix per conversation).
        let mut prefix_index: HashMap<String, usize> = HashMap::new();
        let mut previous = 0.0;
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let row = raw.trim();
            if row.is_empty() || row.starts_with('#') {
                continue;
            }
            let bad = |reason: String| CapacityError::TraceRow { line, reason };
            let (arrival_s, prompt_tokens, output_tokens, slice, prefix) = match format {
                TraceFormat::Csv => {
                    if !header_seen {
                        let header: String = row.chars().filter(|c| !c.is_whitespace()).collect();
                        columns = if header == CSV_HEADER {
                            4
                        } else if header == format!("{CSV_HEADER}{CSV_PREFIX_COLUMNS}") {
                            6
                        } else {
                            return Err(bad(format!(
                                "expected the header {CSV_HEADER:?}, optionally followed by {CSV_PREFIX_COLUMNS:?}, found {row:?}"
                            )));
                        };
                        header_seen = true;
                        continue;
                    }
                    let fields: Vec<&str> = row.split(',').map(str::trim).collect();
                    if fields.len() != columns {
                        let header = if columns == 4 {
                            CSV_HEADER.to_string()
                        } else {
                            format!("{CSV_HEADER}{CSV_PREFIX_COLUMNS}")
                        };
                        return Err(bad(format!(
                            "expected {columns} comma-separated fields ({header}), found {}",
                            fields.len()
                        )));
                    }
                    let arrival: f64 = fields[0].parse().map_err(|_| {
                        bad(format!(
                            "arrival_s {:?} is not a number of seconds",
                            policy::Excerpt(fields[0])
                        ))
                    })?;
                    let tokens = |i: usize, name: &str| -> Result<u32, CapacityError> {
                        fields[i].parse().map_err(|_| {
                            bad(format!(
                                "{name} {:?} is not a whole number from 1 to {}",
                                policy::Excerpt(fields[i]),
                                u32::MAX
                            ))
                        })
                    };
                    let prefix = match fields.get(4..6) {
                        Some(["", ""]) | None => None,
                        Some([id, _]) => Some((id.to_string(), tokens(5, "prefix_tokens")?)),
                        Some(_) => None,
                    };
                    (
                        arrival,
                        tokens(1, "prompt_tokens")?,
                        tokens(2, "output_tokens")?,
                        fields[3].to_string(),
                        prefix,
                    )
                }
                TraceFormat::Jsonl => {
                    let r: JsonRow = serde_json::from_str(row).map_err(|e| bad(json_reason(&e)))?;
                    let prefix = match (r.prefix_id, r.prefix_tokens) {
                        (None, None) => None,
                        (Some(id), Some(tokens)) => Some((id, tokens)),
                        _ => {
                            return Err(bad(
                                "a row gives both prefix_id and prefix_tokens, or neither".into(),
                            ))
                        }
                    };
                    (
                        r.arrival_s,
                        r.prompt_tokens,
                        r.output_tokens,
                        r.slice,
                        prefix,
                    )
                }
            };
            if !(arrival_s.is_finite() && (0.0..=MAX_ARRIVAL_S).contains(&arrival_s)) {
                return Err(bad(format!(
                    "arrival_s {} is not a time from 0 to {} s",
                    shortest(arrival_s),
                    shortest(MAX_ARRIVAL_S)
                )));
            }
            if arrival_s < previous {
                return Err(bad(format!(
                    "arrival_s {} is before the previous row's {}; rows must be in arrival order",
                    shortest(arrival_s),
                    shortest(previous)
                )));
            }
            if prompt_tokens == 0 || output_tokens == 0 {
                return Err(bad(format!(
                    "prompt_tokens {prompt_tokens} and output_tokens {output_tokens} must both be at least 1"
                )));
            }
            if slice.is_empty() {
                return Err(bad("the slice is empty".into()));
            }
            if trace.requests.len() >= MAX_REQUESTS {
                return Err(CapacityError::TooManyRequests {
                    requests: trace.requests.len() + 1,
                    limit: MAX_REQUESTS,
                });
            }
            let index = match trace.slices.iter().position(|s| *s == slice) {
                Some(i) => i,
                None => {
                    if trace.slices.len() >= u16::MAX as usize {
                        return Err(bad(format!("more than {} slices", u16::MAX)));
                    }
                    trace.slices.push(slice);
                    trace.slices.len() - 1
                }
            };
            let prefix = match prefix {
                None => None,
                Some((id, tokens)) => {
                    if id.is_empty() {
                        return Err(bad(format!(
                            "prefix_tokens {tokens} is given without a prefix_id"
                        )));
                    }
                    if tokens == 0 || tokens > prompt_tokens {
                        return Err(bad(format!(
                            "prefix_tokens {tokens} of prefix {id:?} is not 1 to the prompt's {prompt_tokens} tokens (a prefix cannot be longer than its prompt)"
                        )));
                    }
                    let next = trace.prefixes.len();
                    let id = match prefix_index.get(&id) {
                        Some(&i) => i,
                        None => {
                            if next >= MAX_PREFIXES as usize {
                                return Err(bad(format!("more than {MAX_PREFIXES} prefixes")));
                            }
                            prefix_index.insert(id.clone(), next);
                            trace.prefixes.push(id);
                            next
                        }
                    };
                    Some(SharedPrefix {
                        id: id as u32,
                        tokens,
                    })
                }
            };
            previous = arrival_s;
            trace.requests.push(Request {
                arrival_s,
                prompt_tokens,
                output_tokens,
                slice: index as u16,
                prefix,
            });
        }
        if trace.requests.is_empty() {
            return Err(CapacityError::EmptyTrace);
        }
        Ok(trace)
    }

    /// The trace as CSV, the schema [`Trace::parse`] reads.
    /// The trace as a CSV file [`Trace::parse`] reads back; the prefix columns only when a
    /// request has a prefix.
    pub fn to_csv(&self) -> String {
        let prefixed = self.requests.iter().any(|r| r.prefix.is_some());
        let mut out = String::from(CSV_HEADER);
        if prefixed {
            out.push_str(CSV_PREFIX_COLUMNS);
        }
        out.push('\n');
        for r in &self.requests {
            out.push_str(&format!(
                "{},{},{},{}",
                r.arrival_s,
                r.prompt_tokens,
                r.output_tokens,
                self.slices
                    .get(r.slice as usize)
                    .map_or("?", String::as_str)
            ));
            if prefixed {
                match r.prefix {
                    Some(p) => out.push_str(&format!(
                        ",{},{}",
                        self.prefixes.get(p.id as usize).map_or("?", String::as_str),
                        p.tokens
                    )),
                    None => out.push_str(",,"),
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(arrivals: Arrivals) -> TraceSpec {
        TraceSpec {
            requests: 100_000,
            arrivals,
            ..TraceSpec::preset("poisson").unwrap()
        }
    }

    fn observed_rate(trace: &Trace) -> f64 {
        trace.requests.len() as f64 / trace.requests.last().unwrap().arrival_s
    }

    #[test]
    fn a_new_mean_rate_keeps_the_process_shape() {
        for preset in TraceSpec::presets() {
            let mut arrivals = preset.arrivals.clone();
            arrivals.set_mean_rate(7.5);
            assert_eq!(arrivals.mean_rate(), 7.5);
            let mut back = arrivals.clone();
            back.set_mean_rate(preset.arrivals.mean_rate());
            assert_eq!(back, preset.arrivals);
        }
    }

    #[test]
    fn every_arrival_process_keeps_its_mean_rate() {
        for arrivals in [
            Arrivals::Poisson { rate_per_s: 50.0 },
            // Short bursts, so that 100,000 requests span thousands of burst cycles (the
            // rate's standard error is then about 1.5 %).
            Arrivals::Bursty {
                rate_per_s: 50.0,
                burst_factor: 8.0,
                burst_share: 0.1,
                mean_burst_s: 0.05,
            },
            Arrivals::Diurnal {
                rate_per_s: 50.0,
                amplitude: 0.6,
                period_s: 60.0,
            },
        ] {
            let trace = spec(arrivals.clone()).generate().unwrap();
            let rate = observed_rate(&trace);
            assert!((rate - 50.0).abs() < 2.5, "{arrivals:?}: {rate}");
        }
    }

    #[test]
    fn bursty_arrivals_are_overdispersed_and_poisson_ones_are_not() {
        // Index of dispersion of counts in 1-second windows: 1 for Poisson, above 1 for
        // bursts.
        let dispersion = |trace: &Trace| {
            let end = trace.requests.last().unwrap().arrival_s.floor() as usize;
            let mut counts = vec![0.0f64; end];
            for r in &trace.requests {
                let i = r.arrival_s as usize;
                if i < end {
                    counts[i] += 1.0;
                }
            }
            let mean = counts.iter().sum::<f64>() / end as f64;
            let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / end as f64;
            var / mean
        };
        let poisson = dispersion(
            &spec(Arrivals::Poisson { rate_per_s: 50.0 })
                .generate()
                .unwrap(),
        );
        let bursty = dispersion(
            &spec(Arrivals::Bursty {
                rate_per_s: 50.0,
                burst_factor: 8.0,
                burst_share: 0.1,
                mean_burst_s: 2.0,
            })
            .generate()
            .unwrap(),
        );
        assert!((poisson - 1.0).abs() < 0.1, "{poisson}");
        assert!(bursty > 5.0, "{bursty}");
    }

    #[test]
    fn slice_shares_and_prompt_scale_hold() {
        let trace = spec(Arrivals::Poisson { rate_per_s: 50.0 })
            .generate()
            .unwrap();
        let rare: Vec<_> = trace.requests.iter().filter(|r| r.slice == 1).collect();
        let share = rare.len() as f64 / trace.requests.len() as f64;
        assert!((share - 0.05).abs() < 0.003, "{share}");
        let mean = |rs: &[&Request]| {
            rs.iter().map(|r| r.prompt_tokens as f64).sum::<f64>() / rs.len() as f64
        };
        let common: Vec<_> = trace.requests.iter().filter(|r| r.slice == 0).collect();
        let ratio = mean(&rare) / mean(&common);
        assert!((ratio - 1.39).abs() < 0.05, "{ratio}");
    }

    #[test]
    fn csv_and_jsonl_round_trip_and_bad_rows_name_their_line() {
        let trace = TraceSpec {
            requests: 50,
            ..TraceSpec::preset("bursty").unwrap()
        }
        .generate()
        .unwrap();
        assert_eq!(
            Trace::parse(&trace.to_csv(), TraceFormat::Csv).unwrap(),
            trace
        );
        let jsonl = "# a comment\n{\"arrival_s\": 0.5, \"prompt_tokens\": 3, \"output_tokens\": 2, \"slice\": \"eu\"}\n\n{\"arrival_s\": 0.25, \"prompt_tokens\": 3, \"output_tokens\": 2, \"slice\": \"eu\"}\n";
        let e = Trace::parse(jsonl, TraceFormat::Jsonl).unwrap_err();
        assert!(matches!(e, CapacityError::TraceRow { line: 4, .. }), "{e}");
        assert!(e.to_string().contains("0.25"), "{e}");
        let csv = "arrival_s,prompt_tokens,output_tokens,slice\n0.1,5,5,en\n0.2,five,5,en\n";
        let e = Trace::parse(csv, TraceFormat::Csv).unwrap_err();
        assert_eq!(
            e.to_string(),
            "trace line 3: prompt_tokens \"five\" is not a whole number from 1 to 4294967295"
        );
        let e = Trace::parse("0.1,5,5,en\n", TraceFormat::Csv).unwrap_err();
        assert!(matches!(e, CapacityError::TraceRow { line: 1, .. }), "{e}");
        let e = Trace::parse(
            "arrival_s,prompt_tokens,output_tokens,slice\n0.1,0,5,en\n",
            TraceFormat::Csv,
        )
        .unwrap_err();
        assert!(matches!(e, CapacityError::TraceRow { line: 2, .. }), "{e}");
        assert_eq!(
            Trace::parse("# nothing\n", TraceFormat::Jsonl).unwrap_err(),
            CapacityError::EmptyTrace
        );
    }

    #[test]
    fn bad_specs_are_errors_that_name_the_value() {
        let mut s = TraceSpec::preset("poisson").unwrap();
        s.arrivals = Arrivals::Poisson { rate_per_s: -2.0 };
        assert_eq!(
            s.generate().unwrap_err().to_string(),
            "arrival rate (requests/s) must be a finite number above zero, got -2"
        );
        s.arrivals = Arrivals::Poisson { rate_per_s: 0.0 };
        assert!(s.generate().is_err());
        let mut s = TraceSpec::preset("poisson").unwrap();
        s.slices[0].share = 0.5;
        assert!(matches!(s.generate(), Err(CapacityError::SliceMix { .. })));
    }
}
