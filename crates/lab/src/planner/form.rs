//! The capacity planner's form as plain data, compiled by the page and the planner worker
//! alike: its text (from the URL or the inputs) checks into [`capacity::PlanInputs`] or into
//! every field's problem. Only the planner worker calls the check: the page sends it the
//! form's pairs as the fields change and shows the problems it sends back, and the worker
//! checks them again before it plans ([`crate::planner::display`]). So the page's wasm links
//! none of the check's rules, only the URL's reading ([`Form::from_pairs`]) and the presets'
//! names its selects offer. The panel's side of the worker is
//! `panels/capacity/view_model.rs`.
//!
//! URL keys (each optional; a value that does not read stays in its field and is reported
//! there, and a name a select does not offer is reported at the select, which keeps its
//! default): `cap_hw` hardware preset, `cap_model` model preset, `cap_weights` (`both`,
//! `full` or `int8`), `cap_trace` trace preset (`poisson`, `bursty`, `diurnal`), `cap_n`
//! requests, `cap_rate` arrival rate (requests/s), `cap_batching` (a comma list of `static`,
//! `continuous`, `chunked`), `cap_chunk` chunked prefill's token budget, `cap_seqs` batch
//! limits (comma list), `cap_loads` load scales (comma list), `cap_ttft` p99 TTFT SLO (ms),
//! `cap_tpot` p99 time-per-output-token SLO (ms), `cap_floor` quality floor (% above each
//! slice's full-precision bits per byte). The fleet and its release, each off by default
//! so the default plan is the single engine: `cap_replicas` replica counts (comma list),
//! `cap_router` routers (comma list of the crate's six names), `cap_prefix` (`on`/`off`)
//! a prefix cache per replica, `cap_attention` (`fused`/`naive`) attention's memory
//! traffic, `cap_pd` disaggregation `P:D` (empty: off), `cap_k`
//! speculative tokens per step (empty: off) under `cap_decoding` (`greedy`,
//! `temperature-0.7`, `temperature-1.5`, whose measured acceptance applies), `cap_lengths`
//! (`trace`, or `policy`: each output cut where that policy stopped), `cap_canary`
//! the canary's share of requests (empty: no rollout) meeting `cap_rollout_trace` (`plan`,
//! the plan's own trace, or a preset at the plan's rate and request count) and judged over
//! `cap_windows` detector windows. They mirror `decode-lab capacity`'s `--replicas`,
//! `--router`, `--prefix-cache`, `--attention`, `--disaggregate`, `--speculative`, `--decoding`,
//! `--lengths-from-policy`,
//! `--rollout canary:F`, `--rollout-trace` and `--detector-windows`.
//!
//! The check reads the form as the `capacity` crate's [`PlanRequest`], the parser of
//! `decode-lab capacity`'s flags: a field under a knob's URL key ([`capacity::KNOBS`]) is
//! handed over as typed, and the fields the panel writes in its own form (SLOs in
//! milliseconds, the floor as a percentage, the batching ticks and their budget, `both`
//! weight paths, the canary's fraction) are read here and handed over as the knobs they
//! stand for. So the rules of a value (one list rule, the ranges, the names) are the
//! crate's, and the CLI and the lab give a bad value the same answer. The lab bounds a plan
//! itself, so that a learner waits seconds at most: at most
//! [`MAX_REQUESTS`] requests and [`MAX_WORK`] simulated requests over the whole sweep. The
//! default plan, 120 configurations of 2,000 requests, takes about 150 ms natively in
//! release and 210 ms as WebAssembly in Node 20 (median of 5 on the 2-vCPU EPYC); the
//! limit, about 0.7 s and 0.9 s.

use std::ops::Bound;

use capacity::{
    shortest, Arrivals, CapacityError, HardwareProfile, Knob, KnobKind, ModelProfile, PlanInputs,
    PlanRequest, TraceSpec, WeightPath,
};

use policy::figure_short;
use report::sentence;

use crate::widgets::form::{pairs_from_texts, texts_from_pairs, Form, Problems};
use crate::widgets::number::{number, number_in, whole_in, FieldError};

/// Most requests one trace of the panel may hold.
pub const MAX_REQUESTS: u64 = 20_000;
/// Most simulated requests in one plan (configurations × requests): about 0.7 s natively.
pub const MAX_WORK: u64 = 1_000_000;

/// The id of the Plan button: where a problem the plan found, and no one field owns, points.
pub const PLAN_ID: &str = "cap-plan";

/// The field a problem names, by its input's id, as the page holds it: a problem the planner
/// worker sent back names one of the form's fields, or else the Plan button.
pub fn field_named(id: &str) -> &'static str {
    FIELDS
        .iter()
        .map(|f| f.id)
        .find(|known| *known == id)
        .unwrap_or(PLAN_ID)
}

/// The form, as the text the learner typed or the URL held.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityForm {
    pub hardware: String,
    pub model: String,
    pub weights: String,
    pub trace: String,
    pub requests: String,
    pub rate: String,
    pub batchings: String,
    pub chunk_budget: String,
    pub max_sequences: String,
    pub loads: String,
    pub ttft_ms: String,
    pub tpot_ms: String,
    pub floor_pct: String,
    pub replicas: String,
    pub routers: String,
    pub prefix_cache: String,
    pub attention: String,
    pub disaggregate: String,
    pub speculative_k: String,
    pub decoding: String,
    pub lengths: String,
    pub canary: String,
    pub rollout_trace: String,
    pub detector_windows: String,
    /// The knobs of [`field::MORE`], as `decode-lab capacity` takes them, in that order.
    pub more: [String; MORE_KNOBS],
}

/// One field: its URL key, its input's id, its name in messages and its default text.
#[derive(Clone, Copy)]
pub(crate) struct FieldSpec {
    pub(crate) key: &'static str,
    pub(crate) id: &'static str,
    name: &'static str,
    default: &'static str,
}

/// The form's fields, by name.
pub(crate) mod field {
    use super::FieldSpec;
    pub const HARDWARE: FieldSpec = FieldSpec {
        key: "cap_hw",
        id: "cap-hw",
        name: "hardware",
        default: "lab-cpu",
    };
    pub const MODEL: FieldSpec = FieldSpec {
        key: "cap_model",
        id: "cap-model",
        name: "model",
        default: "decode-lab-tiny-v1",
    };
    pub const WEIGHTS: FieldSpec = FieldSpec {
        key: "cap_weights",
        id: "cap-weights",
        name: "weight paths",
        default: "both",
    };
    pub const TRACE: FieldSpec = FieldSpec {
        key: "cap_trace",
        id: "cap-trace",
        name: "trace",
        default: "poisson",
    };
    pub const REQUESTS: FieldSpec = FieldSpec {
        key: "cap_n",
        id: "cap-n",
        name: "Requests in the trace",
        default: "2000",
    };
    pub const RATE: FieldSpec = FieldSpec {
        key: "cap_rate",
        id: "cap-rate",
        name: "Arrival rate (requests/s)",
        default: "200",
    };
    pub const BATCHINGS: FieldSpec = FieldSpec {
        key: "cap_batching",
        id: "cap-batchings",
        name: "batching",
        default: "static,continuous,chunked",
    };
    pub const CHUNK: FieldSpec = FieldSpec {
        key: "cap_chunk",
        id: "cap-chunk",
        name: "Chunked prefill's tokens per iteration",
        default: "128",
    };
    pub const SEQUENCES: FieldSpec = FieldSpec {
        key: "cap_seqs",
        id: "cap-seqs",
        name: "Batch limits",
        default: "1, 4, 16, 64",
    };
    pub const LOADS: FieldSpec = FieldSpec {
        key: "cap_loads",
        id: "cap-loads",
        name: "Load scales",
        default: "0.5, 1, 2, 4, 8",
    };
    pub const TTFT: FieldSpec = FieldSpec {
        key: "cap_ttft",
        id: "cap-ttft",
        name: "SLO: p99 time to first token (ms)",
        default: "50",
    };
    pub const TPOT: FieldSpec = FieldSpec {
        key: "cap_tpot",
        id: "cap-tpot",
        name: "SLO: p99 time per output token (ms)",
        default: "1",
    };
    pub const FLOOR: FieldSpec = FieldSpec {
        key: "cap_floor",
        id: "cap-floor",
        name: "Quality floor (%)",
        default: "0.01",
    };
    pub const REPLICAS: FieldSpec = FieldSpec {
        key: "cap_replicas",
        id: "cap-replicas",
        name: "Replica counts",
        default: "1",
    };
    pub const ROUTERS: FieldSpec = FieldSpec {
        key: "cap_router",
        id: "cap-router",
        name: "Routers",
        default: "round-robin",
    };
    pub const PREFIX_CACHE: FieldSpec = FieldSpec {
        key: "cap_prefix",
        id: "cap-prefix",
        name: "prefix cache",
        default: "off",
    };
    pub const ATTENTION: FieldSpec = FieldSpec {
        key: "cap_attention",
        id: "cap-attention",
        name: "attention",
        default: "fused",
    };
    pub const DISAGGREGATE: FieldSpec = FieldSpec {
        key: "cap_pd",
        id: "cap-pd",
        name: "Disaggregation P:D",
        default: "",
    };
    pub const SPECULATIVE_K: FieldSpec = FieldSpec {
        key: "cap_k",
        id: "cap-k",
        name: "Speculative tokens per step (k)",
        default: "",
    };
    pub const DECODING: FieldSpec = FieldSpec {
        key: "cap_decoding",
        id: "cap-decoding",
        name: "decoding policy",
        default: "temperature-0.7",
    };
    pub const LENGTHS: FieldSpec = FieldSpec {
        key: "cap_lengths",
        id: "cap-lengths",
        name: "output lengths",
        default: "trace",
    };
    pub const CANARY: FieldSpec = FieldSpec {
        key: "cap_canary",
        id: "cap-canary",
        name: "Canary fraction",
        default: "",
    };
    pub const ROLLOUT_TRACE: FieldSpec = FieldSpec {
        key: "cap_rollout_trace",
        id: "cap-rollout-trace",
        name: "rollout trace",
        default: "plan",
    };
    pub const WINDOWS: FieldSpec = FieldSpec {
        key: "cap_windows",
        id: "cap-windows",
        name: "Detector windows",
        default: "20",
    };

    /// A field that takes a knob's value as the CLI does: its key is the knob's URL key,
    /// its name the knob's label, and it is empty (the plan's own default) until set.
    const fn knob(key: &'static str, id: &'static str, name: &'static str) -> FieldSpec {
        FieldSpec {
            key,
            id,
            name,
            default: "",
        }
    }

    /// The fields under "More plan inputs", each under its knob's URL key.
    pub const MORE: [FieldSpec; super::MORE_KNOBS] = [
        knob("cap_seed", "cap-seed", "Seed"),
        knob("cap_datasheet", "cap-datasheet", "Datasheet figures"),
        knob("cap_block", "cap-block", "KV block size (tokens)"),
        knob("cap_staleness", "cap-staleness", "Router staleness (s)"),
        knob("cap_queue", "cap-queue", "Queue cap"),
        knob("cap_kv_link", "cap-kv-link", "KV link (Gbit/s)"),
        knob("cap_floors", "cap-floors", "Slice floor"),
        knob("cap_mitigation", "cap-mitigation", "Mitigation delay (s)"),
        knob("cap_owner_latency", "cap-owner-latency", "Latency owner"),
        knob("cap_owner_quality", "cap-owner-quality", "Quality owner"),
    ];
}

/// How many of the plan's knobs the panel offers under "More plan inputs" ([`field::MORE`]):
/// each a field that takes the knob's value as `decode-lab capacity` takes its flag (a
/// repeated flag as a comma list, a switch as a box), found in the knob table
/// ([`capacity::KNOBS`]) by its URL key, which labels and explains it; the check hands each
/// to [`PlanRequest`] under the knob's name.
pub const MORE_KNOBS: usize = 10;

/// In the order of [`CapacityForm::texts`]: the panel's own fields, then [`field::MORE`].
const FIELDS: [FieldSpec; 34] = [
    field::HARDWARE,
    field::MODEL,
    field::WEIGHTS,
    field::TRACE,
    field::REQUESTS,
    field::RATE,
    field::BATCHINGS,
    field::CHUNK,
    field::SEQUENCES,
    field::LOADS,
    field::TTFT,
    field::TPOT,
    field::FLOOR,
    field::REPLICAS,
    field::ROUTERS,
    field::PREFIX_CACHE,
    field::ATTENTION,
    field::DISAGGREGATE,
    field::SPECULATIVE_K,
    field::DECODING,
    field::LENGTHS,
    field::CANARY,
    field::ROLLOUT_TRACE,
    field::WINDOWS,
    field::MORE[0],
    field::MORE[1],
    field::MORE[2],
    field::MORE[3],
    field::MORE[4],
    field::MORE[5],
    field::MORE[6],
    field::MORE[7],
    field::MORE[8],
    field::MORE[9],
];

/// The batching choices: the URL's name, the label in the form. `static` and `continuous`
/// are the crate's own names ([`Batching`]'s `Display`); `chunked` is chunked prefill at the
/// form's own token budget, which the crate writes `chunked:BUDGET`.
pub const BATCHINGS: [(&str, &str); 3] = [
    ("static", "Static (request-level) batching"),
    ("continuous", "Continuous batching (paged KV cache)"),
    ("chunked", "Continuous batching with chunked prefill"),
];

impl CapacityForm {
    fn from_texts(t: [String; 34]) -> CapacityForm {
        let [hardware, model, weights, trace, requests, rate, batchings, chunk_budget, max_sequences, loads, ttft_ms, tpot_ms, floor_pct, replicas, routers, prefix_cache, attention, disaggregate, speculative_k, decoding, lengths, canary, rollout_trace, detector_windows, m0, m1, m2, m3, m4, m5, m6, m7, m8, m9] =
            t;
        CapacityForm {
            hardware,
            model,
            weights,
            trace,
            requests,
            rate,
            batchings,
            chunk_budget,
            max_sequences,
            loads,
            ttft_ms,
            tpot_ms,
            floor_pct,
            replicas,
            routers,
            prefix_cache,
            attention,
            disaggregate,
            speculative_k,
            decoding,
            lengths,
            canary,
            rollout_trace,
            detector_windows,
            more: [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9],
        }
    }

    fn texts(&self) -> [&str; 34] {
        [
            &self.hardware,
            &self.model,
            &self.weights,
            &self.trace,
            &self.requests,
            &self.rate,
            &self.batchings,
            &self.chunk_budget,
            &self.max_sequences,
            &self.loads,
            &self.ttft_ms,
            &self.tpot_ms,
            &self.floor_pct,
            &self.replicas,
            &self.routers,
            &self.prefix_cache,
            &self.attention,
            &self.disaggregate,
            &self.speculative_k,
            &self.decoding,
            &self.lengths,
            &self.canary,
            &self.rollout_trace,
            &self.detector_windows,
            &self.more[0],
            &self.more[1],
            &self.more[2],
            &self.more[3],
            &self.more[4],
            &self.more[5],
            &self.more[6],
            &self.more[7],
            &self.more[8],
            &self.more[9],
        ]
    }

    /// The form of a job's pairs, as the planner worker reads them. The page sends its own
    /// form's pairs, whose selects hold only names they offer; another name is still a
    /// problem here.
    #[cfg(feature = "planner")]
    pub fn from_job(pairs: &[(String, String)]) -> Result<CapacityForm, Problems> {
        let (form, url) =
            CapacityForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if url.is_empty() {
            Ok(form)
        } else {
            Err(url)
        }
    }

    /// Whether the batching choice `name` (see [`BATCHINGS`]) is ticked.
    pub fn has_batching(&self, name: &str) -> bool {
        self.batchings
            .split(',')
            .any(|b| b.trim().eq_ignore_ascii_case(name))
    }

    /// The batchings list with `name` ticked or not, in [`BATCHINGS`]' order.
    pub fn with_batching(&self, name: &str, on: bool) -> String {
        BATCHINGS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| if *n == name { on } else { self.has_batching(n) })
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Form for CapacityForm {
    type Checked = PlanInputs;

    /// The form a URL's pairs ask for: each key's text goes into its field as it is, for the
    /// check to report at the field if it does not read. The selects and the batching boxes
    /// hold only the names they offer, so another name is a problem of that field, which
    /// keeps its default.
    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (CapacityForm, Problems) {
        let defaults = FIELDS.map(|f| f.default.to_string());
        let mut form =
            CapacityForm::from_texts(texts_from_pairs(FIELDS.map(|f| f.key), defaults, pairs));
        let mut problems = Problems::default();
        for (text, spec, options) in [
            (&mut form.hardware, &field::HARDWARE, hardware_options()),
            (&mut form.model, &field::MODEL, model_options()),
            (&mut form.weights, &field::WEIGHTS, weight_options()),
            (&mut form.trace, &field::TRACE, trace_options()),
            (
                &mut form.prefix_cache,
                &field::PREFIX_CACHE,
                on_off_options(),
            ),
            (&mut form.attention, &field::ATTENTION, attention_options()),
            (&mut form.decoding, &field::DECODING, decoding_options()),
            (&mut form.lengths, &field::LENGTHS, length_options()),
            (
                &mut form.rollout_trace,
                &field::ROLLOUT_TRACE,
                rollout_trace_options(),
            ),
        ] {
            let names: Vec<&str> = options.iter().map(|(v, _)| v.as_str()).collect();
            let asked = text.trim().to_string();
            *text = if names.contains(&asked.as_str()) {
                asked
            } else {
                problems.add(spec.id, not_offered(spec, &asked, &names));
                spec.default.to_string()
            };
        }
        let offered = BATCHINGS.map(|(name, _)| name);
        let unknown = form
            .batchings
            .split(',')
            .map(str::trim)
            .find(|b| !b.is_empty() && !offered.iter().any(|n| n.eq_ignore_ascii_case(b)));
        if let Some(unknown) = unknown {
            let spec = &field::BATCHINGS;
            problems.add(spec.id, not_offered(spec, unknown, &offered));
            form.batchings = spec.default.to_string();
        }
        (form, problems)
    }

    /// The pairs to write to the URL, every field trimmed; a knob of [`field::MORE`] only when set.
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = pairs_from_texts(FIELDS.map(|f| f.key), self.texts());
        pairs.retain(|(k, v)| !v.is_empty() || !field::MORE.iter().any(|f| f.key == *k));
        pairs
    }

    /// The plan's inputs, or every field's problem. The fields the panel writes in its own
    /// form (milliseconds, a percentage, ticks, `both`) are read here and written as the
    /// knobs they stand for; then the crate's [`PlanRequest`] reads every knob, as it reads
    /// `decode-lab capacity`'s flags. It stops at the first knob it refuses, so the check
    /// names that knob's field, sets the knob aside and asks again, until the request
    /// reads; every field's problem is found, each in the context of the others. Last, the
    /// sweep is held to the lab's [`MAX_WORK`] (a problem of the request count, the field
    /// that scales it most simply).
    fn check(&self) -> Result<PlanInputs, Problems> {
        let mut problems = Problems::default();
        let mut pairs: Vec<(&'static str, String)> = Vec::new();
        let mut knob = |problems: &mut Problems,
                        field: &FieldSpec,
                        name,
                        read: Result<Option<String>, FieldError>| {
            if let Some(Some(value)) = problems.field(field.id, read) {
                pairs.push((name, value));
            }
        };
        let text = |t: &str| Ok(Some(t.trim().to_string()));
        knob(
            &mut problems,
            &field::HARDWARE,
            "hardware",
            text(&self.hardware),
        );
        knob(&mut problems, &field::MODEL, "model", text(&self.model));
        knob(&mut problems, &field::TRACE, "trace", text(&self.trace));
        let requests = request_count(&self.requests, field::REQUESTS.name);
        knob(
            &mut problems,
            &field::REQUESTS,
            "requests",
            requests.clone().map(|n| Some(n.to_string())),
        );
        knob(&mut problems, &field::RATE, "rate", text(&self.rate));
        let batchings = match (
            batching_names(&self.batchings),
            count(&self.chunk_budget, field::CHUNK.name),
        ) {
            (names, Err(e)) => {
                problems.add(field::CHUNK.id, e.to_string());
                names.map(|_| None)
            }
            (names, Ok(budget)) => names.map(|names| {
                let list = names.iter().map(|n| match *n {
                    "chunked" => format!("chunked:{budget}"),
                    other => other.to_string(),
                });
                Some(list.collect::<Vec<_>>().join(","))
            }),
        };
        knob(&mut problems, &field::BATCHINGS, "policy", batchings);
        knob(
            &mut problems,
            &field::SEQUENCES,
            "batch-limits",
            text(&self.max_sequences),
        );
        knob(
            &mut problems,
            &field::WEIGHTS,
            "weights",
            weight_paths(&self.weights, field::WEIGHTS.name).map(Some),
        );
        knob(
            &mut problems,
            &field::LOADS,
            "load-scales",
            text(&self.loads),
        );
        knob(
            &mut problems,
            &field::TTFT,
            "slo-ttft-p99",
            milliseconds(&self.ttft_ms, field::TTFT.name),
        );
        knob(
            &mut problems,
            &field::TPOT,
            "slo-tpot-p99",
            milliseconds(&self.tpot_ms, field::TPOT.name),
        );
        let tolerance = number_in(&self.floor_pct, field::FLOOR.name, 0.0..)
            .map(|pct| Some(shortest(pct / 100.0)));
        knob(&mut problems, &field::FLOOR, "quality-tolerance", tolerance);
        knob(
            &mut problems,
            &field::REPLICAS,
            "replicas",
            text(&self.replicas),
        );
        knob(
            &mut problems,
            &field::ROUTERS,
            "router",
            text(&self.routers),
        );
        knob(
            &mut problems,
            &field::PREFIX_CACHE,
            "prefix-cache",
            text(&self.prefix_cache),
        );
        knob(
            &mut problems,
            &field::ATTENTION,
            "attention",
            text(&self.attention),
        );
        knob(
            &mut problems,
            &field::DISAGGREGATE,
            "disaggregate",
            optional(&self.disaggregate),
        );
        knob(
            &mut problems,
            &field::DECODING,
            "decoding",
            text(&self.decoding),
        );
        knob(
            &mut problems,
            &field::SPECULATIVE_K,
            "speculative",
            optional(&self.speculative_k),
        );
        let by_policy = (self.lengths.trim() == "policy").then(String::new);
        knob(
            &mut problems,
            &field::LENGTHS,
            "lengths-from-policy",
            Ok(by_policy),
        );
        // The canary's trace and detector windows shape a canary; with none they are not
        // read.
        let canary = optional(&self.canary).and_then(|f| match f {
            Some(f) => number(&f, field::CANARY.name).map(|_| Some(format!("canary:{f}"))),
            None => Ok(None),
        });
        let rollout = matches!(canary, Ok(Some(_)));
        knob(&mut problems, &field::CANARY, "rollout", canary);
        if rollout {
            let trace = match self.rollout_trace.trim() {
                "plan" => None,
                name => Some(name.to_string()),
            };
            knob(
                &mut problems,
                &field::ROLLOUT_TRACE,
                "rollout-trace",
                Ok(trace),
            );
            knob(
                &mut problems,
                &field::WINDOWS,
                "detector-windows",
                text(&self.detector_windows),
            );
        }
        // The knobs the panel takes as the CLI does: a switch ticked is its flag, a repeated
        // flag's comma list is one pair an entry (an empty entry is the crate's to refuse).
        for (spec, text) in field::MORE.iter().zip(&self.more) {
            let Some(knob) = Knob::at_url(spec.key) else {
                continue;
            };
            let text = text.trim();
            match (text, knob.kind) {
                ("", _) | ("off", KnobKind::Switch) => {}
                ("on", KnobKind::Switch) => pairs.push((knob.name, String::new())),
                (_, KnobKind::Switch) => problems.add(
                    spec.id,
                    format!("{} is on or off, not \"{text}\".", spec.name),
                ),
                (_, KnobKind::Repeated) => {
                    pairs.extend(text.split(',').map(|e| (knob.name, e.trim().to_string())))
                }
                _ => pairs.push((knob.name, text.to_string())),
            }
        }
        let inputs = loop {
            let request = PlanRequest::new(pairs.iter().map(|(k, v)| (*k, v.as_str())));
            match request.inputs(&mut |knob, path| {
                Err(CapacityError::Knob {
                    knob,
                    value: path.into(),
                    why: "the lab reads no files".into(),
                })
            }) {
                Ok(inputs) => break Some(inputs),
                Err(e) => {
                    let named = knobs_named(&e);
                    let field = field_of(named.last().copied().unwrap_or_default());
                    // Knobs left without the knob they shape, once that knob was set aside
                    // for a problem of its own, add nothing to its field.
                    let shaped = matches!(e, CapacityError::Knobs { .. });
                    if !(shaped && problems.of(field).is_some()) {
                        problems.add(field, said(&e));
                    }
                    let before = pairs.len();
                    pairs.retain(|(k, _)| !named.contains(k));
                    if pairs.len() == before {
                        break None;
                    }
                }
            }
        };
        if let (Some(inputs), Ok(r)) = (&inputs, requests) {
            let s = &inputs.sweep;
            let points = (s.load_scales.len()
                * s.batchings.len()
                * s.max_sequences.len()
                * s.weights.len()
                * s.fleet.fleets().len()) as u64;
            if points * r > MAX_WORK {
                let message = format!(
                    "The sweep would simulate {points} configurations of {r} requests, {} \
                     requests in all; the lab stops at {MAX_WORK} so that a plan takes a \
                     second or so. Lower the request count or sweep fewer settings \
                     (decode-lab's capacity command has no such limit).",
                    points * r
                );
                problems.add(field::REQUESTS.id, message);
            }
        }
        let problems = problems.in_order(&FIELDS.map(|f| f.id));
        problems.or(|| inputs)
    }
}

/// The knobs an error of the request names: the one it refused, or those given without the
/// knob they shape.
fn knobs_named(e: &CapacityError) -> Vec<&'static str> {
    match e {
        CapacityError::Knob { knob, .. } | CapacityError::KnobRule { knob, .. } => vec![knob],
        CapacityError::Knobs { knobs, .. } => knobs.clone(),
        _ => Vec::new(),
    }
}

/// The field that holds a knob: the field whose URL key is the knob's, or the field the
/// panel writes the knob from in its own form; else the Plan button.
fn field_of(knob: &str) -> &'static str {
    let by_url = Knob::named(knob)
        .and_then(|k| k.url)
        .and_then(|url| FIELDS.iter().find(|f| f.key == url));
    if let Some(spec) = by_url {
        return spec.id;
    }
    match knob {
        "requests" => field::REQUESTS.id,
        "policy" => field::BATCHINGS.id,
        "weights" => field::WEIGHTS.id,
        "slo-ttft-p99" => field::TTFT.id,
        "slo-tpot-p99" => field::TPOT.id,
        "quality-tolerance" => field::FLOOR.id,
        "lengths-from-policy" => field::LENGTHS.id,
        "rollout" => field::CANARY.id,
        "rollout-trace" => field::ROLLOUT_TRACE.id,
        _ => PLAN_ID,
    }
}

/// What the request refused, as a sentence at the field: a value that does not read is
/// quoted with the field's name; a rule of the plan speaks for itself.
fn said(e: &CapacityError) -> String {
    match e {
        CapacityError::Knob { knob, value, why } => {
            let name = FIELDS
                .iter()
                .find(|f| f.id == field_of(knob))
                .map_or(*knob, |f| f.name);
            sentence(format!("{name} \"{}\": {why}", policy::Excerpt(value)))
        }
        CapacityError::KnobRule { source, .. } => sentence(source.to_string()),
        e => sentence(e.to_string()),
    }
}

impl Default for CapacityForm {
    fn default() -> CapacityForm {
        CapacityForm::from_texts(FIELDS.map(|f| f.default.to_string()))
    }
}

/// What a URL asked of a select (or the batching boxes) that it does not offer.
fn not_offered(spec: &FieldSpec, asked: &str, names: &[&str]) -> String {
    let names = match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    };
    format!(
        "The URL asks for {} \"{asked}\", which is not one of {names}; using {}.",
        spec.name, spec.default
    )
}

/// `both`, the lab's name for sweeping both paths, or one of the crate's weight paths, as
/// the knob's list.
fn weight_paths(text: &str, name: &str) -> Result<String, FieldError> {
    match text.trim() {
        "both" => Ok("full,int8".into()),
        other => other
            .parse::<WeightPath>()
            .map(|w| w.to_string())
            .map_err(|_| FieldError::WeightPaths {
                label: name.to_string(),
                text: other.to_string(),
            }),
    }
}

/// The request count, within the lab's bound; its digits may be grouped with underscores
/// as Rust writes them ("20_000"), as the panel has always read them.
fn request_count(text: &str, name: &str) -> Result<u64, FieldError> {
    whole_in(&text.trim().replace('_', ""), name, 1, MAX_REQUESTS)
        // The message quotes the text as it was typed.
        .or_else(|_| whole_in(text, name, 1, MAX_REQUESTS))
}

/// A count the crate holds in a u32 (a token budget): a whole number of at least 1, since
/// with none no prompt token ever runs.
fn count(text: &str, name: &str) -> Result<u32, FieldError> {
    // Within u32's range, so the conversion is exact.
    whole_in(text, name, 1, u32::MAX.into()).map(|n| n as u32)
}

/// A p99 SLO typed in milliseconds, above zero, as the seconds the knob takes; the crate
/// holds it to its range.
fn milliseconds(text: &str, name: &str) -> Result<Option<String>, FieldError> {
    let above_zero = (Bound::Excluded(0.0), Bound::Unbounded);
    number_in(text, name, above_zero).map(|ms| Some(shortest(ms / 1e3)))
}

/// The ticked batchings, as [`BATCHINGS`]' names, each once.
fn batching_names(text: &str) -> Result<Vec<&'static str>, FieldError> {
    let mut names = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match BATCHINGS.iter().find(|(n, _)| n.eq_ignore_ascii_case(item)) {
            Some((n, _)) if !names.contains(n) => names.push(*n),
            Some(_) => {}
            None => {
                return Err(FieldError::Batching {
                    text: item.to_string(),
                })
            }
        }
    }
    if names.is_empty() {
        return Err(FieldError::NoBatching);
    }
    Ok(names)
}

/// An optional field: empty text is no knob.
fn optional(text: &str) -> Result<Option<String>, FieldError> {
    Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty()))
}

/// The hardware presets as (value, text) options.
pub fn hardware_options() -> Vec<(String, String)> {
    HardwareProfile::presets()
        .into_iter()
        .map(|h| {
            let text = format!(
                "{} ({} GiB, {} per hour)",
                h.name,
                figure_short(h.memory_bytes / (1u64 << 30) as f64),
                figure_short(h.cost_per_hour)
            );
            (h.name, text)
        })
        .collect()
}

/// The model presets as (value, text) options.
pub fn model_options() -> Vec<(String, String)> {
    ModelProfile::presets()
        .into_iter()
        .map(|m| {
            let text = format!(
                "{} ({} parameters, {} weights)",
                m.name,
                figure_short(m.parameters),
                m.full_precision
            );
            (m.name, text)
        })
        .collect()
}

/// The trace presets as (value, text) options.
pub fn trace_options() -> Vec<(String, String)> {
    TraceSpec::presets()
        .into_iter()
        .map(|t| {
            let text = match t.arrivals {
                _ if t.shared_prefixes.is_some() => {
                    "chat-prefix (steady, with shared system prompts)"
                }
                Arrivals::Poisson { .. } => "poisson (steady arrivals)",
                Arrivals::Bursty { .. } => "bursty (bursts of 8x the calm rate)",
                Arrivals::Diurnal { .. } => "diurnal (±60 % over a 10-minute day)",
            };
            (t.name, text.to_string())
        })
        .collect()
}

/// How attention's memory traffic is priced, as (value, text) options.
pub fn attention_options() -> Vec<(String, String)> {
    [
        ("fused", "Fused (FlashAttention): no score matrix in memory"),
        ("naive", "Naive: the score matrix written and read"),
    ]
    .map(|(v, t)| (v.to_string(), t.to_string()))
    .to_vec()
}

/// The prefix cache's choices as (value, text) options (the page draws a check box).
pub fn on_off_options() -> Vec<(String, String)> {
    [
        ("off", "No prefix cache"),
        ("on", "A prefix cache on each replica"),
    ]
    .map(|(v, t)| (v.to_string(), t.to_string()))
    .to_vec()
}

/// Where each request's output stops: as the trace gives it, or cut where the decoding
/// policy stopped in the tiny model's measured runs.
pub fn length_options() -> Vec<(String, String)> {
    [
        ("trace", "As the trace gives them"),
        ("policy", "Where the decoding policy stops (measured)"),
    ]
    .map(|(v, t)| (v.to_string(), t.to_string()))
    .to_vec()
}

/// The decoding policies whose speculative acceptance and output lengths the tiny model's
/// profiles measure.
pub fn decoding_options() -> Vec<(String, String)> {
    [
        ("greedy", "Greedy"),
        ("temperature-0.7", "Temperature 0.7"),
        ("temperature-1.5", "Temperature 1.5"),
    ]
    .map(|(v, t)| (v.to_string(), t.to_string()))
    .to_vec()
}

/// The canary's traffic: the plan's own trace, or a trace preset.
pub fn rollout_trace_options() -> Vec<(String, String)> {
    std::iter::once(("plan".to_string(), "The plan's own trace".to_string()))
        .chain(trace_options())
        .collect()
}

/// The weight-path choices as (value, text) options.
pub fn weight_options() -> Vec<(String, String)> {
    [
        ("both", "Both: full precision and int8"),
        (
            "full",
            "Full precision only (f16, or f32 for the tiny model)",
        ),
        ("int8", "Int8 only"),
    ]
    .map(|(v, t)| (v.to_string(), t.to_string()))
    .to_vec()
}

/// The capacity form's test helpers (the panel's and the display's tests use them too), then
/// its tests.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use capacity::{
        Attention, Batching, FleetSweep, LengthInputs, LengthProfile, RolloutInputs, Router,
        SpeculationInputs, SpeculationProfile, TraceSource, NGRAM_DRAFT_S_PER_TOKEN,
    };

    /// Each problem as (field, message), in the form's order.
    pub(crate) fn named(problems: &Problems) -> Vec<(&str, &str)> {
        problems
            .iter()
            .map(|p| (p.field, p.message.as_str()))
            .collect()
    }

    /// The default form at 300 requests: a plan in a fraction of a second.
    pub(crate) fn small() -> CapacityForm {
        CapacityForm {
            requests: "300".into(),
            ..CapacityForm::default()
        }
    }

    #[test]
    fn the_default_form_is_the_crates_tiny_lab_plan_at_2000_requests() {
        let mut expected = PlanInputs::tiny_lab("poisson").unwrap();
        if let TraceSource::Generated { spec } = &mut expected.trace {
            spec.requests = 2000;
        }
        assert_eq!(CapacityForm::default().check().unwrap(), expected);
    }

    #[test]
    fn url_values_round_trip_and_bad_ones_are_named_at_their_fields() {
        let form = CapacityForm {
            hardware: "h100-sxm".into(),
            model: "llama-3-8b".into(),
            weights: "int8".into(),
            trace: "bursty".into(),
            batchings: "continuous".into(),
            max_sequences: "8, 32".into(),
            ..small()
        };
        let written = form.to_pairs();
        assert!(written.iter().all(|(k, _)| k.starts_with("cap_")));
        let back = CapacityForm::from_pairs(written.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, (form, Problems::default()));

        let (read, url) = CapacityForm::from_pairs([
            ("panel", "capacity"),
            ("cap_hw", "tpu"),
            ("cap_n", "lots"),
            ("cap_seqs", "4,,x"),
            ("cap_batching", "dynamic"),
            ("cap_ttft", "-3"),
            ("cap_rate", "400"),
            ("cap_model", " l4 "),
        ]);
        // The selects and boxes keep their defaults and name what the URL asked for ...
        assert_eq!(
            (read.hardware.as_str(), read.model.as_str()),
            ("lab-cpu", "decode-lab-tiny-v1")
        );
        assert_eq!(read.batchings, "static,continuous,chunked");
        assert_eq!(
            named(&url),
            [
                ("cap-hw", "The URL asks for hardware \"tpu\", which is not one of a100-80gb, h100-sxm, h200, l4 or lab-cpu; using lab-cpu."),
                ("cap-model", "The URL asks for model \"l4\", which is not one of decode-lab-tiny-v1, llama-2-7b, llama-2-13b, llama-3-8b or mistral-7b; using decode-lab-tiny-v1."),
                ("cap-batchings", "The URL asks for batching \"dynamic\", which is not one of static, continuous or chunked; using static,continuous,chunked."),
            ]
        );
        // ... and the typed fields keep the URL's text, for the check to name at the field.
        assert_eq!(
            (read.requests.as_str(), read.rate.as_str()),
            ("lots", "400")
        );
        assert_eq!(
            named(&read.check().unwrap_err()),
            [
                ("cap-n", "Requests in the trace must be a whole number from 1 to 20000, but it is \"lots\"."),
                ("cap-seqs", "Batch limits \"4,,x\": an empty entry; expected a comma-separated list of whole numbers of sequences from 1 to 4294967295."),
                ("cap-ttft", "SLO: p99 time to first token (ms) must be a number greater than 0, but it is \"-3\"."),
            ]
        );
    }

    /// A URL with three bad capacity values names all three, each at its own field.
    #[test]
    fn every_bad_value_of_a_url_is_named() {
        let (form, url) = CapacityForm::from_pairs([
            ("panel", "capacity"),
            ("cap_rate", "fast"),
            ("cap_loads", "1, 0"),
            ("cap_floor", "-1"),
        ]);
        assert!(url.is_empty());
        let problems = form.check().unwrap_err();
        assert_eq!(
            named(&problems),
            [
                (
                    "cap-rate",
                    "Arrival rate (requests/s) \"fast\": expected a number."
                ),
                (
                    "cap-loads",
                    "Load scale must be a finite number above zero, got 0."
                ),
                (
                    "cap-floor",
                    "Quality floor (%) must be a number of at least 0, but it is \"-1\"."
                ),
            ]
        );
    }

    #[test]
    fn bad_fields_are_sentences_naming_the_value() {
        let form = CapacityForm {
            requests: "0".into(),
            loads: "1, fast, -2".into(),
            tpot_ms: "NaN".into(),
            batchings: String::new(),
            chunk_budget: "0".into(),
            max_sequences: "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17".into(),
            weights: "half".into(),
            ..CapacityForm::default()
        };
        assert_eq!(
            named(&form.check().unwrap_err()),
            [
                ("cap-weights", "The weight paths must be both, full or int8, but they are \"half\"."),
                ("cap-n", "Requests in the trace must be a whole number from 1 to 20000, but it is \"0\"."),
                ("cap-batchings", "Choose at least one batching to sweep."),
                ("cap-chunk", "Chunked prefill's tokens per iteration must be a whole number from 1 to 4294967295, but it is \"0\"."),
                ("cap-seqs", "Batch limits \"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\": 17 entries; a list holds at most 16."),
                ("cap-loads", "Load scales \"1, fast, -2\": \"fast\" is not valid; expected numbers from 1e-6 to 1e6."),
                ("cap-tpot", "SLO: p99 time per output token (ms) must be a number greater than 0, but it is \"NaN\"."),
            ]
        );

        // The crate's own bounds, beyond what the form reads: an SLO past its range, a
        // bursty trace too slow to burst, presets it does not know.
        let form = CapacityForm {
            ttft_ms: "1e13".into(),
            trace: "bursty".into(),
            rate: "0.000001".into(),
            hardware: "tpu".into(),
            ..CapacityForm::default()
        };
        let problems = form.check().unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["cap-hw", "cap-rate", "cap-ttft"]);
        assert!(problems
            .of("cap-hw")
            .unwrap()
            .starts_with("Unknown hardware preset \"tpu\"; known: a100-80gb"));
        assert!(problems
            .of("cap-ttft")
            .unwrap()
            .starts_with("P99 TTFT SLO (s) must lie in"));
        assert!(problems
            .of("cap-rate")
            .unwrap()
            .starts_with("Arrivals per burst cycle"));

        // Digits grouped as Rust writes them read; a bad one is quoted as typed.
        let grouped = CapacityForm {
            requests: "2_000".into(),
            ..CapacityForm::default()
        };
        assert_eq!(grouped.check(), CapacityForm::default().check());
        let e = CapacityForm {
            requests: "20_001".into(),
            ..CapacityForm::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(named(&e), [("cap-n", "Requests in the trace must be a whole number from 1 to 20000, but it is \"20_001\".")]);

        let too_much = CapacityForm {
            requests: "20000".into(),
            ..CapacityForm::default()
        };
        let e = too_much.check().unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(
            e.of("cap-n")
                .unwrap()
                .contains("120 configurations of 20000 requests"),
            "{e:?}"
        );
    }

    /// The fleet, speculation and rollout fields give the inputs `decode-lab capacity
    /// --replicas 1,4 --router round-robin,kv-aware --prefix-cache on --attention naive
    /// --disaggregate 3:1
    /// --speculative 2 --decoding greedy --lengths-from-policy --rollout canary:0.1
    /// --rollout-trace chat-prefix --detector-windows 5` builds, written out here field by
    /// field.
    #[test]
    fn the_fleet_and_rollout_fields_are_the_clis_flags() {
        let form = CapacityForm {
            replicas: "1, 4".into(),
            routers: "round-robin,kv-aware".into(),
            prefix_cache: "on".into(),
            attention: "naive".into(),
            disaggregate: "3:1".into(),
            speculative_k: "2".into(),
            decoding: "greedy".into(),
            lengths: "policy".into(),
            canary: "0.1".into(),
            rollout_trace: "chat-prefix".into(),
            detector_windows: "5".into(),
            ..one_load()
        };
        let mut expected = one_load().check().unwrap();
        expected.sweep.fleet = FleetSweep {
            replicas: vec![1, 4],
            routers: vec![Router::RoundRobin, Router::KvAware],
            prefix_cache: true,
            disaggregate: Some((3, 1)),
            speculative_k: Some(2),
            attention: Attention::Naive,
            ..FleetSweep::default()
        };
        expected.speculation = Some(SpeculationInputs {
            decoding: "greedy".into(),
            profile: SpeculationProfile::tiny().unwrap(),
            draft_s_per_token: NGRAM_DRAFT_S_PER_TOKEN,
        });
        expected.lengths = Some(LengthInputs {
            decoding: "greedy".into(),
            profile: LengthProfile::tiny().unwrap(),
        });
        expected.rollout = Some(RolloutInputs {
            windows: 5,
            ..RolloutInputs::canary(0.1)
        });
        let mut canary = TraceSpec::preset("chat-prefix").unwrap();
        canary.requests = 300;
        canary.arrivals.set_mean_rate(200.0);
        expected.rollout_trace = Some(TraceSource::Generated { spec: canary });
        assert_eq!(form.check(), Ok(expected));

        let written = form.to_pairs();
        let back = CapacityForm::from_pairs(written.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, (form, Problems::default()));

        // The windows shape a canary: with none they are not read.
        let no_canary = CapacityForm {
            detector_windows: "many".into(),
            ..CapacityForm::default()
        };
        assert_eq!(no_canary.check(), CapacityForm::default().check());
    }

    /// 24 configurations of 300 requests: room for the fleets' sweep within the lab's bound.
    fn one_load() -> CapacityForm {
        CapacityForm {
            requests: "300".into(),
            loads: "1".into(),
            ..CapacityForm::default()
        }
    }

    /// The fleet's sweep multiplies the configurations the lab's work bound counts.
    #[test]
    fn fleets_count_toward_the_labs_work_bound() {
        let form = CapacityForm {
            replicas: "1, 2, 4, 8".into(),
            routers: "round-robin, random, kv-aware".into(),
            requests: "1000".into(),
            ..CapacityForm::default()
        };
        // 120 configurations × (1 + 3 × 3 fleets) = 1,200 of 1,000 requests each.
        let e = form.check().unwrap_err();
        assert!(
            e.of("cap-n")
                .unwrap()
                .contains("1200 configurations of 1000 requests"),
            "{e:?}"
        );
    }

    #[test]
    fn bad_fleet_and_rollout_values_are_named_at_their_fields() {
        let form = CapacityForm {
            replicas: "0, 2, 2".into(),
            routers: "round-robin, fastest".into(),
            disaggregate: "3-1".into(),
            speculative_k: "0".into(),
            canary: "2".into(),
            ..CapacityForm::default()
        };
        assert_eq!(
            named(&form.check().unwrap_err()),
            [
                ("cap-replicas", "Replica counts \"0, 2, 2\": \"2\" is listed twice."),
                ("cap-router", "Routers \"round-robin, fastest\": \"fastest\" is not valid; expected round-robin, random, least-outstanding, least-kv, prefix-affinity or kv-aware."),
                ("cap-pd", "Disaggregation P:D \"3-1\": expected P:D, the prefill and decode replicas as whole numbers, e.g. 3:1."),
                ("cap-k", "Speculative decoding: k = 0 drafts nothing; k must be at least 1 (or leave speculation off)."),
                ("cap-canary", "Canary fraction must lie in [1e-6, 1], got 2."),
            ]
        );
        let twice = CapacityForm {
            replicas: "2, 2".into(),
            ..CapacityForm::default()
        };
        assert_eq!(
            named(&twice.check().unwrap_err()),
            [(
                "cap-replicas",
                "Replica counts \"2, 2\": \"2\" is listed twice."
            )]
        );
        // The crate's own rules, each at the field that broke it.
        for (edit, field) in [
            (
                CapacityForm {
                    disaggregate: "0:2".into(),
                    ..CapacityForm::default()
                },
                "cap-pd",
            ),
            (
                CapacityForm {
                    speculative_k: "0".into(),
                    ..CapacityForm::default()
                },
                "cap-k",
            ),
            (
                CapacityForm {
                    speculative_k: "17".into(),
                    ..CapacityForm::default()
                },
                "cap-k",
            ),
            (
                CapacityForm {
                    canary: "0.1".into(),
                    detector_windows: "1".into(),
                    ..CapacityForm::default()
                },
                "cap-windows",
            ),
        ] {
            let e = edit.check().unwrap_err();
            assert_eq!(named(&e).len(), 1, "{e:?}");
            assert!(e.of(field).is_some(), "{field}: {e:?}");
        }
        let k0 = CapacityForm {
            speculative_k: "0".into(),
            ..CapacityForm::default()
        };
        assert!(k0
            .check()
            .unwrap_err()
            .of("cap-k")
            .unwrap()
            .contains("k = 0 drafts nothing"));

        let (read, url) = CapacityForm::from_pairs([
            ("cap_prefix", "yes"),
            ("cap_decoding", "top-p"),
            ("cap_rollout_trace", "weekly"),
        ]);
        assert_eq!(
            (
                read.prefix_cache.as_str(),
                read.decoding.as_str(),
                read.rollout_trace.as_str()
            ),
            ("off", "temperature-0.7", "plan")
        );
        let fields: Vec<_> = named(&url).into_iter().map(|p| p.0).collect();
        assert_eq!(fields, ["cap-prefix", "cap-decoding", "cap-rollout-trace"]);
    }

    #[test]
    fn batching_ticks_keep_their_order() {
        let form = CapacityForm {
            batchings: "chunked".into(),
            ..CapacityForm::default()
        };
        assert!(form.has_batching("chunked") && !form.has_batching("static"));
        assert_eq!(form.with_batching("static", true), "static,chunked");
        assert_eq!(form.with_batching("chunked", false), "");
    }

    /// A problem the planner sent back lands at the field it names, or at the Plan button.
    #[test]
    fn a_problems_field_is_one_of_the_forms_or_the_plan_button() {
        for spec in FIELDS {
            assert_eq!(field_named(spec.id), spec.id);
        }
        assert_eq!(field_named(PLAN_ID), PLAN_ID);
        assert_eq!(field_named("cap-nothing"), PLAN_ID);
    }

    /// The ticks are the crate's batchings: `static` and `continuous` by the crate's own
    /// names, `chunked` at the form's token budget.
    #[test]
    fn the_batching_ticks_are_the_crates_batchings() {
        let form = CapacityForm {
            chunk_budget: "64".into(),
            ..small()
        };
        assert_eq!(
            form.check().unwrap().sweep.batchings,
            [
                Batching::Static,
                Batching::Continuous,
                Batching::ChunkedPrefill { token_budget: 64 }
            ]
        );
        assert_eq!(Batching::Static.to_string(), BATCHINGS[0].0);
        assert_eq!(Batching::Continuous.to_string(), BATCHINGS[1].0);
    }

    /// The knob table walked: every knob of a plan is a field of the panel (under its URL
    /// key, or read by a field in the panel's own form), but for the files a command line
    /// names, which the lab does not read; and each field of [`field::MORE`] is a knob's,
    /// under its URL key, labelled as the table labels it.
    #[test]
    fn every_knob_of_the_table_is_a_field_of_the_panel() {
        for knob in capacity::KNOBS.iter() {
            if knob.kind == KnobKind::File {
                continue;
            }
            assert_ne!(field_of(knob.name), PLAN_ID, "{} is in no field", knob.name);
        }
        for spec in field::MORE {
            let knob = Knob::at_url(spec.key).unwrap();
            assert_eq!(knob.label, spec.name, "{}", knob.name);
            assert_eq!(field_of(knob.name), spec.id);
        }
    }

    /// Each knob of [`field::MORE`] from the URL to the form, back to the URL, and into the plan's
    /// inputs as the CLI's flag puts it there; a value the crate refuses is named at its
    /// field.
    #[test]
    fn the_more_knobs_go_from_the_url_to_the_plan() {
        let with = |pairs: &[(&str, &str)]| {
            let (form, url) = CapacityForm::from_pairs(pairs.iter().copied());
            assert!(url.is_empty(), "{url:?}");
            let back: Vec<(&str, String)> = form.to_pairs();
            for (k, v) in pairs {
                assert!(
                    back.contains(&(k, v.to_string())),
                    "{k}={v} not in {back:?}"
                );
            }
            form
        };
        let inputs = |pairs: &[(&str, &str)]| with(pairs).check().unwrap();
        let default = CapacityForm::default().check().unwrap();
        assert_eq!(
            CapacityForm::default().to_pairs().len(),
            FIELDS.len() - MORE_KNOBS
        );

        let i = inputs(&[("cap_seed", "11")]);
        let TraceSource::Generated { spec } = &i.trace else {
            panic!("{:?}", i.trace)
        };
        assert_eq!(spec.seed, 11);
        assert!(default.calibration.is_some());
        assert!(inputs(&[("cap_datasheet", "on")]).calibration.is_none());
        assert!(inputs(&[("cap_datasheet", "off")]).calibration.is_some());
        assert_eq!(inputs(&[("cap_block", "32")]).sweep.block_size, 32);
        let fleet = inputs(&[("cap_staleness", "0.5"), ("cap_queue", "7")])
            .sweep
            .fleet;
        assert_eq!((fleet.router_staleness_s, fleet.queue_cap), (0.5, Some(7)));
        let fleet = inputs(&[("cap_pd", "1:2"), ("cap_kv_link", "100")])
            .sweep
            .fleet;
        assert_eq!(fleet.kv_link_gbps, 100.0);
        let floors = inputs(&[("cap_floors", "en=1.5, eu=2.5")]).quality_floors;
        let floors: Vec<(&str, f64)> = floors
            .iter()
            .map(|f| (f.slice.as_str(), f.max_bits_per_byte))
            .collect();
        assert_eq!(floors, [("en", 1.5), ("eu", 2.5)]);
        let owners = inputs(&[
            ("cap_owner_latency", "SRE"),
            ("cap_owner_quality", "ML lead"),
        ])
        .owners;
        assert_eq!(
            (owners.latency.as_str(), owners.quality.as_str()),
            ("SRE", "ML lead")
        );
        let rollout = inputs(&[("cap_canary", "0.1"), ("cap_mitigation", "0.25")])
            .rollout
            .unwrap();
        assert_eq!(rollout.mitigation_delay_s, Some(0.25));

        for (key, bad, field) in [
            ("cap_seed", "-1", "cap-seed"),
            ("cap_datasheet", "yes", "cap-datasheet"),
            ("cap_block", "0", "cap-block"),
            ("cap_queue", "many", "cap-queue"),
            ("cap_floors", "en=1.5,,eu=2", "cap-floors"),
            ("cap_kv_link", "100", "cap-kv-link"),
            ("cap_mitigation", "0.25", "cap-canary"),
        ] {
            let problems = with(&[(key, bad)]).check().unwrap_err();
            assert!(problems.of(field).is_some(), "{key}={bad}: {problems:?}");
        }
    }

    /// A field under a knob's URL key holds that knob's values as the CLI takes them, and
    /// the crate's knob is what it reads: the same list gets the same answer from both.
    #[test]
    fn a_knobs_field_is_read_by_the_crates_request() {
        for knob in capacity::KNOBS.iter().filter(|k| k.url.is_some()) {
            let spec = FIELDS.iter().find(|f| Some(f.key) == knob.url);
            assert!(spec.is_some(), "{} has no field", knob.name);
            assert_eq!(field_of(knob.name), spec.unwrap().id);
        }
        for (field, knob, bad) in [
            ("cap-seqs", "batch-limits", "4,,8"),
            ("cap-seqs", "batch-limits", "4,4"),
            ("cap-loads", "load-scales", "1,"),
            (
                "cap-replicas",
                "replicas",
                "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
            ),
            ("cap-router", "router", "random,fastest"),
            ("cap-pd", "disaggregate", "3-1"),
        ] {
            let cli = PlanRequest::new([(knob, bad)])
                .inputs(&mut |_, _| unreachable!())
                .unwrap_err();
            let CapacityError::Knob { why, .. } = &cli else {
                panic!("{cli}")
            };
            let mut form = small();
            match field {
                "cap-seqs" => form.max_sequences = bad.into(),
                "cap-loads" => form.loads = bad.into(),
                "cap-replicas" => form.replicas = bad.into(),
                "cap-router" => form.routers = bad.into(),
                _ => form.disaggregate = bad.into(),
            }
            let lab = form.check().unwrap_err();
            assert_eq!(named(&lab).len(), 1, "{lab:?}");
            let shown = lab.of(field).unwrap();
            assert!(
                shown.contains(&format!("\"{bad}\": {why}")),
                "{shown} / {cli}"
            );
        }
    }
}
