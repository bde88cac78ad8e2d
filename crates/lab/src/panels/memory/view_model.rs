//! The chapter's GPU memory ledger: a simplified training-memory budget in which the
//! microbatch size moves the activations. The chapter's assumptions are the defaults: 3.2
//! GB of weights, gradients and optimizer state, 0.34 GB of activations per sample, a 24 GB
//! device and a 10 % reserve, with the activations split evenly across the transformer
//! blocks; at microbatch 16 over 5 blocks that gives the chapter's table (1.09, 2.18, 3.26,
//! 4.35, 5.44 GB, all resident). GB here is the chapter's unit, 10^9 bytes.
//!
//! URL keys: `mem_w` (weights + gradients + optimizer, GB), `mem_a` (activations per sample,
//! GB), `mem_dev` (device memory, GB), `mem_res` (reserve, %), `mem_mb` (microbatch) and
//! `mem_n` (blocks).

use std::ops::Bound;

use crate::widgets::form::{pairs_from_texts, texts_from_pairs, Form, Problems};
use crate::widgets::number::{number_in, whole_in};

/// Slack in every comparison with the budget, in GB (one byte): decimal inputs such as 0.34
/// are not exact in binary, and a microbatch that fills the budget exactly must fit.
pub const SLACK_GB: f64 = 1e-9;

/// The most blocks the ledger lists.
pub const MAX_BLOCKS: u64 = 200;
/// The largest microbatch the form takes.
pub const MAX_MICROBATCH: u64 = 1_000_000;

/// The form as the learner typed it.
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerForm {
    pub fixed_gb: String,
    pub activations_gb: String,
    pub device_gb: String,
    pub reserve_percent: String,
    pub microbatch: String,
    pub blocks: String,
}

/// One field of the form: its URL key, its input's id, its name in messages and its default.
struct FieldSpec {
    key: &'static str,
    id: &'static str,
    name: &'static str,
    default: &'static str,
}

/// In the order of [`LedgerForm::texts`].
const FIELDS: [FieldSpec; 6] = [
    FieldSpec {
        key: "mem_w",
        id: "memory-w",
        name: "Weights, gradients and optimizer (GB)",
        default: "3.2",
    },
    FieldSpec {
        key: "mem_a",
        id: "memory-a",
        name: "Activations per sample (GB)",
        default: "0.34",
    },
    FieldSpec {
        key: "mem_dev",
        id: "memory-dev",
        name: "Device memory (GB)",
        default: "24",
    },
    FieldSpec {
        key: "mem_res",
        id: "memory-res",
        name: "Reserve (%)",
        default: "10",
    },
    FieldSpec {
        key: "mem_mb",
        id: "memory-mb",
        name: "Microbatch (samples)",
        default: "16",
    },
    FieldSpec {
        key: "mem_n",
        id: "memory-n",
        name: "Blocks",
        default: "5",
    },
];

impl Default for LedgerForm {
    /// The chapter's assumptions, at the microbatch and block count of its table.
    fn default() -> LedgerForm {
        LedgerForm::from_texts(FIELDS.map(|f| f.default.to_string()))
    }
}

impl LedgerForm {
    /// The form from its texts, in the order of [`FIELDS`].
    fn from_texts(t: [String; 6]) -> LedgerForm {
        let [fixed_gb, activations_gb, device_gb, reserve_percent, microbatch, blocks] = t;
        LedgerForm {
            fixed_gb,
            activations_gb,
            device_gb,
            reserve_percent,
            microbatch,
            blocks,
        }
    }

    fn texts(&self) -> [&str; 6] {
        [
            &self.fixed_gb,
            &self.activations_gb,
            &self.device_gb,
            &self.reserve_percent,
            &self.microbatch,
            &self.blocks,
        ]
    }
}

impl Form for LedgerForm {
    type Checked = Budget;

    /// The form a URL's pairs ask for: each key's text goes into its field as it is, for the
    /// check to report at the field if it does not read. Every field is a number, so the
    /// URL itself has no problems.
    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (LedgerForm, Problems) {
        let defaults = FIELDS.map(|f| f.default.to_string());
        let texts = texts_from_pairs(FIELDS.map(|f| f.key), defaults, pairs);
        (LedgerForm::from_texts(texts), Problems::default())
    }

    /// The pairs to write to the URL, every field trimmed.
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        pairs_from_texts(FIELDS.map(|f| f.key), self.texts())
    }

    /// The budget, or every field's problem. The bounds are the ledger's own: memory is not
    /// negative, a device holds something, a reserve leaves something, and the microbatch
    /// and block count stay within what the ledger lists.
    fn check(&self) -> Result<Budget, Problems> {
        let [fixed, activations, device, reserve, microbatch, blocks] = &FIELDS;
        let mut problems = Problems::default();
        let fixed_gb = problems.field(fixed.id, number_in(&self.fixed_gb, fixed.name, 0.0..));
        let activations_per_sample_gb = problems.field(
            activations.id,
            number_in(&self.activations_gb, activations.name, 0.0..),
        );
        let above_zero = (Bound::Excluded(0.0), Bound::Unbounded);
        let device_gb = problems.field(
            device.id,
            number_in(&self.device_gb, device.name, above_zero),
        );
        let reserve_percent = problems.field(
            reserve.id,
            number_in(&self.reserve_percent, reserve.name, 0.0..100.0),
        );
        let microbatch = problems.field(
            microbatch.id,
            whole_in(&self.microbatch, microbatch.name, 1, MAX_MICROBATCH),
        );
        let blocks = problems.field(
            blocks.id,
            whole_in(&self.blocks, blocks.name, 1, MAX_BLOCKS),
        );
        problems.or(|| {
            Some(Budget {
                fixed_gb: fixed_gb?,
                activations_per_sample_gb: activations_per_sample_gb?,
                device_gb: device_gb?,
                reserve_percent: reserve_percent?,
                microbatch: microbatch?,
                blocks: blocks?,
            })
        })
    }
}

/// The budget's inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub fixed_gb: f64,
    pub activations_per_sample_gb: f64,
    pub device_gb: f64,
    pub reserve_percent: f64,
    pub microbatch: u64,
    pub blocks: u64,
}

/// One transformer block's line of the ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockRow {
    /// From 1.
    pub block: u64,
    pub activations_gb: f64,
    pub cumulative_activations_gb: f64,
    /// Weights, gradients and optimizer plus the activations so far.
    pub cumulative_gb: f64,
    /// Whether everything up to this block fits under the usable budget.
    pub resident: bool,
}

/// The largest microbatch that fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Largest {
    /// This many samples; 0 when not even one fits.
    Samples(u64),
    /// Activations cost nothing, so any microbatch fits (while the rest does).
    Unbounded,
}

impl Budget {
    /// The device less its reserve.
    pub fn usable_gb(&self) -> f64 {
        self.device_gb * (1.0 - self.reserve_percent / 100.0)
    }

    /// Whether `microbatch` samples fit under the usable budget.
    pub fn fits(&self, microbatch: u64) -> bool {
        self.fixed_gb + self.activations_per_sample_gb * microbatch as f64
            <= self.usable_gb() + SLACK_GB
    }

    /// The ledger, one row per block, activations split evenly.
    pub fn rows(&self) -> Vec<BlockRow> {
        let total = self.activations_per_sample_gb * self.microbatch as f64;
        let n = self.blocks as f64;
        let usable = self.usable_gb();
        (1..=self.blocks)
            .map(|i| {
                let cumulative_activations_gb = total * i as f64 / n;
                let cumulative_gb = self.fixed_gb + cumulative_activations_gb;
                BlockRow {
                    block: i,
                    activations_gb: total / n,
                    cumulative_activations_gb,
                    cumulative_gb,
                    resident: cumulative_gb <= usable + SLACK_GB,
                }
            })
            .collect()
    }

    /// The total at the form's microbatch.
    pub fn total_gb(&self) -> f64 {
        self.fixed_gb + self.activations_per_sample_gb * self.microbatch as f64
    }

    /// In closed form: `floor((usable − fixed) / activations per sample)`, with the same
    /// slack as [`Budget::fits`].
    pub fn largest_microbatch(&self) -> Largest {
        let room = self.usable_gb() + SLACK_GB - self.fixed_gb;
        if room < 0.0 {
            Largest::Samples(0)
        } else if self.activations_per_sample_gb == 0.0 {
            Largest::Unbounded
        } else {
            // `as` saturates, so an enormous quotient stays a number.
            Largest::Samples((room / self.activations_per_sample_gb).floor() as u64)
        }
    }
}

/// Everything the panel shows, in words and numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerView {
    pub budget: Budget,
    pub usable_gb: f64,
    pub rows: Vec<BlockRow>,
    pub total_gb: f64,
    pub fits: bool,
    pub largest: Largest,
    /// The budget written out: usable, total, verdict ([`VERDICT`]), largest microbatch.
    pub lines: Vec<String>,
}

/// Where the verdict ("Microbatch 16 fits, with 7.16 GB to spare.") is among the lines.
pub const VERDICT: usize = 2;

/// GB as the chapter writes them, two decimals, trailing zeros dropped.
pub fn gb(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// The ledger for the form, or every field's problem.
pub fn compute(form: &LedgerForm) -> Result<LedgerView, Problems> {
    let b = form.check()?;
    let usable_gb = b.usable_gb();
    let total_gb = b.total_gb();
    let fits = b.fits(b.microbatch);
    let largest = b.largest_microbatch();
    let activations = b.activations_per_sample_gb * b.microbatch as f64;
    let mut lines = vec![
        format!(
            "Usable budget: {} GB × (1 − {} %) = {} GB.",
            gb(b.device_gb),
            gb(b.reserve_percent),
            gb(usable_gb)
        ),
        format!(
            "Needed: {} GB + {} GB × {} samples = {} GB + {} GB = {} GB.",
            gb(b.fixed_gb),
            gb(b.activations_per_sample_gb),
            b.microbatch,
            gb(b.fixed_gb),
            gb(activations),
            gb(total_gb)
        ),
        if fits {
            format!(
                "Microbatch {} fits, with {} GB to spare.",
                b.microbatch,
                gb(usable_gb - total_gb)
            )
        } else {
            format!(
                "Microbatch {} does not fit: it needs {} GB more than the usable budget.",
                b.microbatch,
                gb(total_gb - usable_gb)
            )
        },
    ];
    lines.push(match largest {
        Largest::Unbounded => {
            "With no activations per sample, every microbatch fits.".to_string()
        }
        Largest::Samples(0) if b.fixed_gb > usable_gb + SLACK_GB => format!(
            "No microbatch fits: weights, gradients and optimizer alone ({} GB) exceed the usable {} GB.",
            gb(b.fixed_gb),
            gb(usable_gb)
        ),
        Largest::Samples(m) => format!(
            "Largest microbatch that fits: floor(({} − {}) / {}) = floor({}) = {m}{}.",
            gb(usable_gb),
            gb(b.fixed_gb),
            gb(b.activations_per_sample_gb),
            (((usable_gb - b.fixed_gb) / b.activations_per_sample_gb) * 100.0).floor() / 100.0,
            if m == 0 {
                String::from(": not even one sample")
            } else {
                format!(
                    ", which needs {} GB",
                    gb(b.fixed_gb + b.activations_per_sample_gb * m as f64)
                )
            }
        ),
    });
    Ok(LedgerView {
        rows: b.rows(),
        budget: b,
        usable_gb,
        total_gb,
        fits,
        largest,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(t: [&str; 6]) -> LedgerForm {
        LedgerForm::from_texts(t.map(String::from))
    }

    /// The chapter's nonvisual table: block 1 to 5 at 1.09, 2.18, 3.26, 4.35 and 5.44 GB of
    /// activations, all resident.
    #[test]
    fn the_chapters_table() {
        let view = compute(&LedgerForm::default()).unwrap();
        let shown: Vec<(u64, String, bool)> = view
            .rows
            .iter()
            .map(|r| (r.block, gb(r.cumulative_activations_gb), r.resident))
            .collect();
        assert_eq!(
            shown,
            [
                (1, "1.09".to_string(), true),
                (2, "2.18".to_string(), true),
                (3, "3.26".to_string(), true),
                (4, "4.35".to_string(), true),
                (5, "5.44".to_string(), true),
            ]
        );
        assert!((view.usable_gb - 21.6).abs() < 1e-12);
        assert!(view.fits);
        // (21.6 − 3.2) / 0.34 = 54.1…: 54 samples need 21.56 GB, 55 would need 21.9 GB.
        assert_eq!(view.largest, Largest::Samples(54));
        assert_eq!(
            view.lines[3],
            "Largest microbatch that fits: floor((21.6 − 3.2) / 0.34) = floor(54.11) = 54, which needs 21.56 GB."
        );
    }

    /// The brute-force reference: the largest m from 1 up that fits, 0 when none does.
    fn search(b: &Budget, limit: u64) -> u64 {
        (1..=limit).filter(|&m| b.fits(m)).max().unwrap_or(0)
    }

    #[test]
    fn the_closed_form_matches_a_search() {
        let mut checked = 0;
        for fixed in ["0", "3.2", "7.5", "21.6", "21.7", "30"] {
            for per_sample in ["0.01", "0.1", "0.34", "0.4", "1", "1.7", "6"] {
                for device in ["16", "24", "40", "80"] {
                    for reserve in ["0", "10", "12.5", "50"] {
                        let b = form([fixed, per_sample, device, reserve, "1", "4"])
                            .check()
                            .unwrap();
                        let Largest::Samples(m) = b.largest_microbatch() else {
                            panic!("bounded");
                        };
                        assert_eq!(m, search(&b, 10_000), "{b:?}");
                        // Every row of the last block agrees with `fits`.
                        let mut at = b;
                        at.microbatch = m.max(1);
                        assert_eq!(at.rows().last().unwrap().resident, b.fits(m.max(1)));
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 6 * 7 * 4 * 4);
    }

    /// A microbatch that fills the budget exactly fits: 3.2 + 0.4 · 46 = 21.6.
    #[test]
    fn an_exact_fill_fits() {
        let b = form(["3.2", "0.4", "24", "10", "46", "5"]).check().unwrap();
        assert!(b.fits(46) && !b.fits(47));
        assert_eq!(b.largest_microbatch(), Largest::Samples(46));
    }

    #[test]
    fn blocks_past_the_budget_are_not_resident() {
        let view = compute(&form(["3.2", "0.34", "24", "10", "64", "4"])).unwrap();
        // 0.34 · 64 = 21.76 GB of activations, 5.44 per block.
        let resident: Vec<bool> = view.rows.iter().map(|r| r.resident).collect();
        assert_eq!(resident, [true, true, true, false]);
        assert!(!view.fits);
        assert_eq!(
            view.lines[2],
            "Microbatch 64 does not fit: it needs 3.36 GB more than the usable budget."
        );
    }

    #[test]
    fn no_room_and_no_activations() {
        let view = compute(&form(["22", "0.34", "24", "10", "1", "1"])).unwrap();
        assert_eq!(view.largest, Largest::Samples(0));
        assert!(view.lines[3].starts_with("No microbatch fits"));
        let view = compute(&form(["3", "0", "24", "10", "100", "2"])).unwrap();
        assert_eq!(view.largest, Largest::Unbounded);
    }

    /// Every bad field is named, each at its own field, in the form's order.
    #[test]
    fn bad_input_names_the_value_at_its_field() {
        let problems = compute(&form(["", "abc", "0", "100", "0", "2.5"])).unwrap_err();
        let named: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.field, p.message.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("memory-w", "Weights, gradients and optimizer (GB) must be a number of at least 0, but it is \"\"."),
                ("memory-a", "Activations per sample (GB) must be a number of at least 0, but it is \"abc\"."),
                ("memory-dev", "Device memory (GB) must be a number greater than 0, but it is \"0\"."),
                ("memory-res", "Reserve (%) must be a number of at least 0 and below 100, but it is \"100\"."),
                ("memory-mb", "Microbatch (samples) must be a whole number from 1 to 1000000, but it is \"0\"."),
                ("memory-n", "Blocks must be a whole number from 1 to 200, but it is \"2.5\"."),
            ]
        );
        let problems = compute(&form(["inf", "-1", "NaN", "5", "16", "5"])).unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["memory-w", "memory-a", "memory-dev"]);
    }

    /// A URL with three bad values names all three.
    #[test]
    fn every_bad_field_of_a_url_is_named() {
        let (f, url) = LedgerForm::from_pairs([
            ("panel", "memory"),
            ("mem_n", "0"),
            ("mem_dev", "big"),
            ("mem_mb", "many"),
        ]);
        assert!(url.is_empty());
        let problems = compute(&f).unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["memory-dev", "memory-mb", "memory-n"]);
        assert_eq!(
            problems.of("memory-mb").unwrap(),
            "Microbatch (samples) must be a whole number from 1 to 1000000, but it is \"many\"."
        );
    }

    /// Old permalinks keep working: every key is read, and a bad value stays in its field
    /// for the check to report there.
    #[test]
    fn url_pairs_round_trip_and_bad_values_stay_in_their_fields() {
        let f = form(["7", "0.5", "80", "5", "32", "12"]);
        let pairs = f.to_pairs();
        assert_eq!(
            LedgerForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))),
            (f, Problems::default())
        );
        let (f, _) = LedgerForm::from_pairs([("mem_mb", "many"), ("mem_dev", "40")]);
        assert_eq!(
            (
                f.microbatch.as_str(),
                f.device_gb.as_str(),
                f.blocks.as_str()
            ),
            ("many", "40", "5")
        );
    }
}
