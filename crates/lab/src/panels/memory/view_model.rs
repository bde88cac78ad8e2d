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

/// URL key, name in messages, default.
const KEYS: [(&str, &str, &str); 6] = [
    ("mem_w", "Weights, gradients and optimizer (GB)", "3.2"),
    ("mem_a", "Activations per sample (GB)", "0.34"),
    ("mem_dev", "Device memory (GB)", "24"),
    ("mem_res", "Reserve (%)", "10"),
    ("mem_mb", "Microbatch (samples)", "16"),
    ("mem_n", "Blocks", "5"),
];

impl Default for LedgerForm {
    /// The chapter's assumptions, at the microbatch and block count of its table.
    fn default() -> LedgerForm {
        LedgerForm::from_texts(KEYS.map(|(_, _, d)| d.to_string()))
    }
}

impl LedgerForm {
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

    fn texts(&self) -> [&String; 6] {
        [
            &self.fixed_gb,
            &self.activations_gb,
            &self.device_gb,
            &self.reserve_percent,
            &self.microbatch,
            &self.blocks,
        ]
    }

    /// The parsed budget, or one sentence per bad field.
    pub fn budget(&self) -> Result<Budget, Vec<String>> {
        let t = self.texts();
        let names = KEYS.map(|(_, n, _)| n);
        let mut errors = Vec::new();
        let mut take = |r: Result<f64, String>| r.map_err(|e| errors.push(e)).unwrap_or(0.0);
        let fixed_gb = take(quantity(t[0], names[0], Bound::AtLeastZero));
        let activations_per_sample_gb = take(quantity(t[1], names[1], Bound::AtLeastZero));
        let device_gb = take(quantity(t[2], names[2], Bound::AboveZero));
        let reserve_percent = take(quantity(t[3], names[3], Bound::Percent));
        let microbatch = take(count(t[4], names[4], MAX_MICROBATCH).map(|v| v as f64)) as u64;
        let blocks = take(count(t[5], names[5], MAX_BLOCKS).map(|v| v as f64)) as u64;
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Budget {
            fixed_gb,
            activations_per_sample_gb,
            device_gb,
            reserve_percent,
            microbatch,
            blocks,
        })
    }

    /// The form from the URL's pairs: valid values are taken; a malformed one keeps the
    /// default and gives a sentence.
    pub fn from_pairs(pairs: &[(String, String)]) -> (LedgerForm, Vec<String>) {
        let mut form = LedgerForm::default();
        let mut messages = Vec::new();
        for (i, (key, _, default)) in KEYS.iter().enumerate() {
            let Some((_, text)) = pairs.iter().find(|(k, _)| k == key) else {
                continue;
            };
            let mut trial = LedgerForm::default();
            *trial.field_mut(i) = text.clone();
            match trial.budget() {
                Ok(_) => *form.field_mut(i) = text.trim().to_string(),
                Err(e) => messages.push(format!(
                    "The link's {key}: {} Using the default, {default}.",
                    e.join(" ")
                )),
            }
        }
        (form, messages)
    }

    fn field_mut(&mut self, i: usize) -> &mut String {
        match i {
            0 => &mut self.fixed_gb,
            1 => &mut self.activations_gb,
            2 => &mut self.device_gb,
            3 => &mut self.reserve_percent,
            4 => &mut self.microbatch,
            _ => &mut self.blocks,
        }
    }

    /// The pairs to write to the URL.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        KEYS.iter()
            .zip(self.texts())
            .map(|((key, _, _), text)| (*key, text.trim().to_string()))
            .collect()
    }
}

enum Bound {
    AtLeastZero,
    AboveZero,
    Percent,
}

/// A finite decimal within `bound`, or a sentence naming the value.
fn quantity(text: &str, name: &str, bound: Bound) -> Result<f64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!("{name} is empty: type a number."));
    }
    let v = match t.parse::<f64>() {
        Ok(v) if v.is_finite() => v,
        _ => {
            return Err(format!(
                "{name} must be a finite number, but it is \"{t}\"."
            ))
        }
    };
    let (ok, want) = match bound {
        Bound::AtLeastZero => (v >= 0.0, "at least 0"),
        Bound::AboveZero => (v > 0.0, "greater than 0"),
        Bound::Percent => ((0.0..100.0).contains(&v), "at least 0 and below 100"),
    };
    if ok {
        Ok(v)
    } else {
        Err(format!("{name} is {t}, but it must be {want}."))
    }
}

/// A whole number from 1 to `max`, or a sentence naming the value.
fn count(text: &str, name: &str, max: u64) -> Result<u64, String> {
    let t = text.trim();
    match t.parse::<u64>() {
        Ok(v) if (1..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "{name} must be a whole number from 1 to {max}, but it is \"{t}\"."
        )),
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
    /// The budget written out: usable, total, verdict, largest microbatch.
    pub lines: Vec<String>,
}

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

/// The ledger for the form, or sentences saying what is wrong.
pub fn compute(form: &LedgerForm) -> Result<LedgerView, Vec<String>> {
    let b = form.budget()?;
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
                            .budget()
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
        let b = form(["3.2", "0.4", "24", "10", "46", "5"])
            .budget()
            .unwrap();
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

    #[test]
    fn bad_input_names_the_value() {
        let errors = compute(&form(["", "abc", "0", "100", "0", "2.5"])).unwrap_err();
        assert_eq!(
            errors,
            [
                "Weights, gradients and optimizer (GB) is empty: type a number.",
                "Activations per sample (GB) must be a finite number, but it is \"abc\".",
                "Device memory (GB) is 0, but it must be greater than 0.",
                "Reserve (%) is 100, but it must be at least 0 and below 100.",
                "Microbatch (samples) must be a whole number from 1 to 1000000, but it is \"0\".",
                "Blocks must be a whole number from 1 to 200, but it is \"2.5\".",
            ]
        );
        let errors = compute(&form(["inf", "-1", "NaN", "5", "16", "5"])).unwrap_err();
        assert_eq!(errors.len(), 3);
    }

    #[test]
    fn url_pairs_round_trip_and_bad_values_fall_back() {
        let f = form(["7", "0.5", "80", "5", "32", "12"]);
        let pairs: Vec<(String, String)> =
            f.pairs().into_iter().map(|(k, v)| (k.into(), v)).collect();
        assert_eq!(LedgerForm::from_pairs(&pairs), (f, vec![]));
        let (f, messages) = LedgerForm::from_pairs(&[
            ("mem_mb".into(), "many".into()),
            ("mem_dev".into(), "40".into()),
        ]);
        assert_eq!((f.microbatch.as_str(), f.device_gb.as_str()), ("16", "40"));
        assert_eq!(
            messages,
            ["The link's mem_mb: Microbatch (samples) must be a whole number from 1 to 1000000, but it is \"many\". Using the default, 16."]
        );
    }
}
