//! KV-cache memory, the chapter's course-level estimate: `2 · L · B · S · H_kv · d_head · q`
//! bytes (keys and values, for L layers, B sequences of S cached tokens, H_kv KV heads of
//! d_head values of q bytes each), written out with every substitution and checked against
//! an independent second computation.
//!
//! Presets: the lab's own model (shapes read from its `config.json` at build time, and the
//! bytes `model::KvCache` really allocates for it, both by `build.rs`, so the page links no
//! model code) and published MHA, GQA and MQA shapes.
//!
//! URL keys (the panel's own, read once and written back as the fields change): `kv_l`
//! (layers), `kv_b` (batch), `kv_s` (sequence length), `kv_hkv` (KV heads), `kv_dh` (head
//! dimension), `kv_q` (bytes per value).

use std::fmt;

use policy::figure_short;

use crate::widgets::form::{pairs_from_texts, texts_from_pairs, Form, Problems};
use crate::widgets::number::{whole_in, FieldError};

/// The lab's model as `build.rs` read it: its shapes and the bytes a `model::KvCache` built
/// from its `config.json` allocates.
struct TinyModel {
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    context_len: usize,
    allocated: usize,
}

/// What `build.rs` found: the model, or why its configuration could not be read.
const TINY_MODEL: Result<TinyModel, &str> = include!(concat!(env!("OUT_DIR"), "/tiny_model.rs"));

/// The agreement required between the exact integer product and the f64 reference, as a
/// relative difference. f64 carries 53 bits, so a handful of roundings stays far below it.
pub const TOLERANCE: f64 = 1e-12;

const GIB: f64 = (1u64 << 30) as f64;

/// The formula's six dimensions, in the order of [`FIELDS`]: as typed ([`KvForm`]) or as
/// read ([`KvShape`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dims<T> {
    pub layers: T,
    pub batch: T,
    pub seq_len: T,
    pub kv_heads: T,
    pub head_dim: T,
    pub bytes_per_value: T,
}

impl<T> Dims<T> {
    /// The dimensions in the order of [`FIELDS`].
    fn from_array(dims: [T; 6]) -> Dims<T> {
        let [layers, batch, seq_len, kv_heads, head_dim, bytes_per_value] = dims;
        Dims {
            layers,
            batch,
            seq_len,
            kv_heads,
            head_dim,
            bytes_per_value,
        }
    }
}

/// The form as the learner typed it.
pub type KvForm = Dims<String>;

/// The six inputs of the formula.
pub type KvShape = Dims<u64>;

/// One field of the form: its URL key, its input's id, its name in messages and its default
/// (Llama-3-8B at 4096 tokens in fp16).
struct FieldSpec {
    key: &'static str,
    id: &'static str,
    name: &'static str,
    default: u64,
}

const FIELDS: [FieldSpec; 6] = [
    FieldSpec {
        key: "kv_l",
        id: "kv-cache-l",
        name: "L (layers)",
        default: 32,
    },
    FieldSpec {
        key: "kv_b",
        id: "kv-cache-b",
        name: "B (batch, sequences)",
        default: 1,
    },
    FieldSpec {
        key: "kv_s",
        id: "kv-cache-s",
        name: "S (sequence length, tokens)",
        default: 4096,
    },
    FieldSpec {
        key: "kv_hkv",
        id: "kv-cache-hkv",
        name: "H_kv (KV heads)",
        default: 8,
    },
    FieldSpec {
        key: "kv_dh",
        id: "kv-cache-dh",
        name: "d_head (values per head)",
        default: 128,
    },
    FieldSpec {
        key: "kv_q",
        id: "kv-cache-q",
        name: "q (bytes per value)",
        default: 2,
    },
];

/// Every dimension is a whole number of at least 1: a cache with no layers, tokens or bytes
/// holds nothing to estimate.
fn dimension(text: &str, spec: &FieldSpec) -> Result<u64, FieldError> {
    whole_in(text, spec.name, 1, u64::MAX)
}

impl Dims<String> {
    fn from_values(v: [u64; 6]) -> KvForm {
        Dims::from_array(v.map(|x| x.to_string()))
    }

    fn texts(&self) -> [&str; 6] {
        [
            &self.layers,
            &self.batch,
            &self.seq_len,
            &self.kv_heads,
            &self.head_dim,
            &self.bytes_per_value,
        ]
    }

    /// The form filled in from a preset at its own B, S and q.
    pub fn from_preset(p: &Preset) -> KvForm {
        KvForm::from_values([
            p.layers,
            1,
            p.seq_len,
            p.kv_heads,
            p.head_dim,
            p.bytes_per_value,
        ])
    }
}

impl Form for KvForm {
    type Checked = KvShape;

    /// The form a URL's pairs ask for: each key's text goes into its field as it is, for the
    /// check to report at the field if it does not read. Every field is a number, so the
    /// URL itself has no problems.
    fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> (KvForm, Problems) {
        let defaults = FIELDS.map(|f| f.default.to_string());
        let texts = texts_from_pairs(FIELDS.map(|f| f.key), defaults, pairs);
        (Dims::from_array(texts), Problems::default())
    }

    /// The pairs to write to the URL, every field trimmed.
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        pairs_from_texts(FIELDS.map(|f| f.key), self.texts())
    }

    /// The six dimensions, or every field's problem.
    fn check(&self) -> Result<KvShape, Problems> {
        let mut problems = Problems::default();
        let mut values = [0u64; 6];
        for ((value, spec), text) in values.iter_mut().zip(&FIELDS).zip(self.texts()) {
            if let Some(v) = problems.field(spec.id, dimension(text, spec)) {
                *value = v;
            }
        }
        problems.or(|| Some(Dims::from_array(values)))
    }
}

impl Default for KvForm {
    fn default() -> KvForm {
        KvForm::from_values(FIELDS.map(|f| f.default))
    }
}

impl Dims<u64> {
    fn factors(&self) -> [u64; 7] {
        [
            2,
            self.layers,
            self.batch,
            self.seq_len,
            self.kv_heads,
            self.head_dim,
            self.bytes_per_value,
        ]
    }

    /// The formula in the chapter's order, exactly, or `None` past u64.
    pub fn bytes(&self) -> Option<u64> {
        self.factors()
            .iter()
            .try_fold(1u64, |acc, &f| acc.checked_mul(f))
    }

    /// The independent reference: bytes per token (`2 · L · H_kv · d_head · q`), then times
    /// the tokens held (`B · S`), in f64.
    pub fn reference_bytes(&self) -> f64 {
        let per_token = 2.0
            * self.layers as f64
            * self.kv_heads as f64
            * self.head_dim as f64
            * self.bytes_per_value as f64;
        per_token * (self.batch as f64 * self.seq_len as f64)
    }

    /// Bytes per cached token, exactly when it fits in a u128.
    pub fn bytes_per_token(&self) -> Option<u128> {
        [
            2,
            self.layers,
            self.kv_heads,
            self.head_dim,
            self.bytes_per_value,
        ]
        .iter()
        .try_fold(1u128, |acc, &f| acc.checked_mul(u128::from(f)))
    }
}

/// The result: the derivation line by line and the second computation.
#[derive(Clone, Debug, PartialEq)]
pub struct KvView {
    pub shape: KvShape,
    pub bytes: u64,
    /// `2 · L · B · S · H_kv · d_head · q`, then its substitution, then the results.
    pub derivation: Vec<String>,
    pub reference: f64,
    pub relative_difference: f64,
    pub agrees: bool,
    /// The check written out in words.
    pub check: String,
}

/// The input id of the field holding the largest factor: the one to make smaller when the
/// product does not fit in a u64 (the first of equals).
fn largest_field(shape: &KvShape) -> &'static str {
    let [_, factors @ ..] = shape.factors();
    let mut largest = 0;
    for (i, f) in factors.iter().enumerate() {
        if *f > factors[largest] {
            largest = i;
        }
    }
    FIELDS[largest].id
}

/// The formula for the form, or every field's problem. A product past u64 is the problem of
/// the field holding the largest factor.
pub fn compute(form: &KvForm) -> Result<KvView, Problems> {
    let shape = form.check()?;
    let substitution = shape.factors().map(|f| f.to_string()).join(" · ");
    let Some(bytes) = shape.bytes() else {
        return Err(Problems::one(largest_field(&shape), format!(
            "2 · L · B · S · H_kv · d_head · q = {substitution} is about {:.3e} bytes, more than the {} bytes a u64 holds; use smaller values.",
            shape.reference_bytes(),
            grouped(u128::from(u64::MAX))
        )));
    };
    let reference = shape.reference_bytes();
    let relative_difference = if bytes == 0 {
        0.0
    } else {
        (reference - bytes as f64).abs() / bytes as f64
    };
    let agrees = relative_difference <= TOLERANCE;
    let mut derivation = vec![
        "2 · L · B · S · H_kv · d_head · q".to_string(),
        format!("= {substitution}"),
        format!("= {} bytes", grouped(u128::from(bytes))),
        format!("= {} GiB", figure_short(bytes as f64 / GIB)),
    ];
    if (bytes as f64) < GIB {
        derivation.push(format!("= {}", binary_units(bytes)));
    }
    let per_token = shape
        .bytes_per_token()
        .map_or_else(|| "?".to_string(), grouped);
    let check = format!(
        "Check: bytes per token 2 · L · H_kv · d_head · q = 2 · {} · {} · {} · {} = {per_token}; times B · S = {} · {} tokens gives {} bytes in f64 arithmetic, {} the exact product within the declared relative tolerance {TOLERANCE:e} (relative difference {}).",
        shape.layers,
        shape.kv_heads,
        shape.head_dim,
        shape.bytes_per_value,
        shape.batch,
        shape.seq_len,
        grouped(reference.round() as u128),
        if agrees { "which agrees with" } else { "which does NOT agree with" },
        if relative_difference == 0.0 { "0".to_string() } else { format!("{relative_difference:.1e}") },
    );
    Ok(KvView {
        shape,
        bytes,
        derivation,
        reference,
        relative_difference,
        agrees,
        check,
    })
}

/// Multi-head, grouped-query or multi-query attention, from the head counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attention {
    Mha,
    Gqa,
    Mqa,
}

impl Attention {
    pub fn of(heads: u64, kv_heads: u64) -> Attention {
        if kv_heads == heads {
            Attention::Mha
        } else if kv_heads == 1 {
            Attention::Mqa
        } else {
            Attention::Gqa
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Attention::Mha => "MHA",
            Attention::Gqa => "GQA",
            Attention::Mqa => "MQA",
        }
    }
}

/// A model's KV shapes with the B, S and q it is shown at.
#[derive(Clone, Debug, PartialEq)]
pub struct Preset {
    pub slug: &'static str,
    pub name: &'static str,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub seq_len: u64,
    pub bytes_per_value: u64,
    /// Bytes `model::KvCache` allocates (the lab's own model only).
    pub allocated: Option<u64>,
}

impl Preset {
    pub fn attention(&self) -> Attention {
        Attention::of(self.heads, self.kv_heads)
    }

    /// The preset's shape at batch `batch`, `seq_len` tokens and `q` bytes per value.
    pub fn shape_at(&self, batch: u64, seq_len: u64, bytes_per_value: u64) -> KvShape {
        KvShape {
            layers: self.layers,
            batch,
            seq_len,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            bytes_per_value,
        }
    }
}

/// Published shapes, in fp16 at 4096 tokens.
const PUBLISHED: [(&str, &str, u64, u64, u64, u64); 5] = [
    ("llama-2-7b", "Llama-2-7B", 32, 32, 32, 128),
    ("llama-2-70b", "Llama-2-70B", 80, 64, 8, 128),
    ("llama-3-8b", "Llama-3-8B", 32, 32, 8, 128),
    ("mistral-7b", "Mistral-7B", 32, 32, 8, 128),
    ("falcon-7b", "Falcon-7B", 32, 71, 1, 64),
];

/// The lab's own model: its shapes from `config.json`, at its whole context, in f32 (q = 4,
/// what `model::KvCache` stores), with the bytes a cache built from that configuration
/// really allocates. No weights are needed to build the cache.
pub fn tiny_model() -> Result<Preset, NoTinyModel> {
    let model = TINY_MODEL.map_err(NoTinyModel)?;
    Ok(Preset {
        slug: "tiny",
        name: "decode-lab-tiny-v1 (this lab)",
        layers: model.layers as u64,
        heads: model.heads as u64,
        kv_heads: model.kv_heads as u64,
        head_dim: model.head_dim as u64,
        seq_len: model.context_len as u64,
        bytes_per_value: std::mem::size_of::<f32>() as u64,
        allocated: Some(model.allocated as u64),
    })
}

/// The lab's model configuration could not be read when the lab was built (`build.rs`'s
/// reason).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoTinyModel(&'static str);

impl fmt::Display for NoTinyModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "The lab's model configuration could not be read: {}.",
            self.0
        )
    }
}

impl std::error::Error for NoTinyModel {}

/// For a preset whose cache the lab really allocates: the allocated bytes beside the
/// formula's at the preset's own B, S and q.
pub fn allocation_note(p: &Preset) -> Option<String> {
    let allocated = p.allocated?;
    let formula = KvForm::from_preset(p).check().ok()?.bytes()?;
    Some(format!(
        "{}: model::KvCache, built from its config.json (no weights needed), allocates {} bytes; the formula at B = 1, S = {}, q = {} gives {} bytes{}.",
        p.name,
        grouped(u128::from(allocated)),
        p.seq_len,
        p.bytes_per_value,
        grouped(u128::from(formula)),
        if allocated == formula { ", the same" } else { ", which differs" }
    ))
}

/// Every preset: the lab's model first when its configuration reads, then the published
/// shapes.
pub fn presets() -> (Vec<Preset>, Option<String>) {
    let mut all = Vec::new();
    let message = match tiny_model() {
        Ok(p) => {
            all.push(p);
            None
        }
        Err(e) => Some(e.to_string()),
    };
    all.extend(
        PUBLISHED
            .iter()
            .map(|&(slug, name, layers, heads, kv_heads, head_dim)| Preset {
                slug,
                name,
                layers,
                heads,
                kv_heads,
                head_dim,
                seq_len: 4096,
                bytes_per_value: 2,
                allocated: None,
            }),
    );
    (all, message)
}

/// One bar of the comparison chart and one row of its table.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartRow {
    pub name: &'static str,
    pub attention: Attention,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub bytes_per_token: Option<u128>,
    /// `None` past u64.
    pub bytes: Option<u64>,
}

/// The comparison at one B, S and q: the batch, sequence length and bytes per value of the
/// form when they are valid, else B = 1, S = 4096, q = 2. Returns the rows and the (B, S, q)
/// used.
pub fn chart_rows(form: &KvForm, presets: &[Preset]) -> (Vec<ChartRow>, (u64, u64, u64)) {
    let pick =
        |text: &str, spec: &FieldSpec, default: u64| dimension(text, spec).unwrap_or(default);
    let at = (
        pick(&form.batch, &FIELDS[1], 1),
        pick(&form.seq_len, &FIELDS[2], 4096),
        pick(&form.bytes_per_value, &FIELDS[5], 2),
    );
    let rows = presets
        .iter()
        .map(|p| {
            let shape = p.shape_at(at.0, at.1, at.2);
            ChartRow {
                name: p.name,
                attention: p.attention(),
                layers: p.layers,
                heads: p.heads,
                kv_heads: p.kv_heads,
                head_dim: p.head_dim,
                bytes_per_token: shape.bytes_per_token(),
                bytes: shape.bytes(),
            }
        })
        .collect();
    (rows, at)
}

/// `n` with thousands separated by commas: 2,147,483,648.
pub fn grouped(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in the largest binary unit that keeps the number at least 1: 512 KiB.
pub fn binary_units(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < units.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", figure_short(v), units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(slug: &str) -> Preset {
        presets().0.into_iter().find(|p| p.slug == slug).unwrap()
    }

    /// The published figures: Llama-2-7B (MHA) holds 0.5 MiB per token in fp16, so 4096
    /// tokens are exactly 2 GiB; Llama-2-70B's GQA (8 KV heads, 80 layers) needs 1.25 GiB.
    #[test]
    fn published_figures() {
        for (slug, bytes) in [
            ("llama-2-7b", 2 * (1u64 << 30)),
            ("llama-2-70b", 5 * (1u64 << 28)),
            ("llama-3-8b", 1u64 << 29),
            ("mistral-7b", 1u64 << 29),
            ("falcon-7b", 32 * 64 * 4096 * 4),
        ] {
            let view = compute(&KvForm::from_preset(&preset(slug))).unwrap();
            assert_eq!(view.bytes, bytes, "{slug}");
            assert!(view.agrees);
        }
        let view = compute(&KvForm::from_preset(&preset("llama-2-7b"))).unwrap();
        assert_eq!(view.bytes, 2_147_483_648);
        assert_eq!(
            view.derivation,
            [
                "2 · L · B · S · H_kv · d_head · q",
                "= 2 · 32 · 1 · 4096 · 32 · 128 · 2",
                "= 2,147,483,648 bytes",
                "= 2 GiB",
            ]
        );
        assert_eq!(
            view.check,
            "Check: bytes per token 2 · L · H_kv · d_head · q = 2 · 32 · 32 · 128 · 2 = 524,288; times B · S = 1 · 4096 tokens gives 2,147,483,648 bytes in f64 arithmetic, which agrees with the exact product within the declared relative tolerance 1e-12 (relative difference 0)."
        );
        let view = compute(&KvForm::from_preset(&preset("llama-2-70b"))).unwrap();
        assert_eq!(view.derivation[3], "= 1.25 GiB");
    }

    #[test]
    fn attention_kinds_follow_the_head_counts() {
        let kinds: Vec<_> = presets()
            .0
            .iter()
            .map(|p| (p.slug, p.attention().label()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("tiny", "GQA"),
                ("llama-2-7b", "MHA"),
                ("llama-2-70b", "GQA"),
                ("llama-3-8b", "GQA"),
                ("mistral-7b", "GQA"),
                ("falcon-7b", "MQA"),
            ]
        );
    }

    /// The bytes `model::KvCache` allocates for the lab's model equal the formula at B = 1,
    /// S = its context and q = 4 (f32).
    #[test]
    fn the_tiny_models_allocated_cache_equals_the_formula() {
        let tiny = tiny_model().unwrap();
        assert_eq!(
            (tiny.layers, tiny.kv_heads, tiny.head_dim, tiny.seq_len),
            (4, 2, 32, 256)
        );
        let view = compute(&KvForm::from_preset(&tiny)).unwrap();
        assert_eq!(Some(view.bytes), tiny.allocated);
        assert_eq!(view.bytes, 524_288);
        assert_eq!(view.derivation.last().unwrap(), "= 512 KiB");
        assert_eq!(
            allocation_note(&tiny).unwrap(),
            "decode-lab-tiny-v1 (this lab): model::KvCache, built from its config.json (no weights needed), allocates 524,288 bytes; the formula at B = 1, S = 256, q = 4 gives 524,288 bytes, the same."
        );
        assert_eq!(allocation_note(&preset("llama-2-7b")), None);
    }

    /// Shapes far from 2^53 and past it: the f64 reference stays within the tolerance.
    #[test]
    fn the_reference_agrees_on_large_and_odd_shapes() {
        for v in [
            [1, 1, 1, 1, 1, 1],
            [3, 7, 11, 13, 17, 19],
            [80, 512, 131_072, 8, 128, 2],
            [999_983, 1_000_003, 7919, 1, 1, 1],
            [999_983, 1_000_003, 7919, 13, 3, 1],
        ] {
            let view = compute(&KvForm::from_values(v)).unwrap();
            assert!(view.agrees, "{v:?}: {}", view.relative_difference);
            let exact: u128 = v.iter().map(|&x| u128::from(x)).product::<u128>() * 2;
            assert_eq!(u128::from(view.bytes), exact);
        }
    }

    /// Each bad field alone: one problem, at that field, naming the value.
    #[test]
    fn bad_input_becomes_a_sentence_at_its_field() {
        let problem = |field: &str, text: &str| {
            let i = FIELDS.iter().position(|f| f.id == field).unwrap();
            let mut texts = KvForm::default().texts().map(String::from);
            texts[i] = text.to_string();
            let problems = compute(&Dims::from_array(texts)).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            problems
                .of(field)
                .unwrap_or_else(|| panic!("{field}: {problems:?}"))
        };
        for (field, text, message) in [
            ("kv-cache-l", " ", "L (layers) must be a whole number of at least 1, but it is \"\"."),
            ("kv-cache-b", "-2", "B (batch, sequences) must be a whole number of at least 1, but it is \"-2\"."),
            ("kv-cache-s", "40.5", "S (sequence length, tokens) must be a whole number of at least 1, but it is \"40.5\"."),
            ("kv-cache-hkv", "eight", "H_kv (KV heads) must be a whole number of at least 1, but it is \"eight\"."),
            ("kv-cache-dh", "18446744073709551616", "d_head (values per head) must be a whole number of at least 1, but it is \"18446744073709551616\"."),
            ("kv-cache-q", "0", "q (bytes per value) must be a whole number of at least 1, but it is \"0\"."),
        ] {
            assert_eq!(problem(field, text), message);
        }
        // A product past u64 is the problem of the largest factor's field.
        let overflow = problem("kv-cache-s", "18446744073709551615");
        assert!(overflow
            .starts_with("2 · L · B · S · H_kv · d_head · q = 2 · 32 · 1 · 18446744073709551615"));
        assert!(overflow.contains("more than the 18,446,744,073,709,551,615 bytes a u64 holds"));
    }

    /// A URL with three bad values names all three, each at its field, in the form's order.
    #[test]
    fn every_bad_field_is_named() {
        let (form, url) = KvForm::from_pairs([
            ("panel", "kv-cache"),
            ("kv_q", "0"),
            ("kv_l", "x"),
            ("kv_b", ""),
            ("kv_s", "2048"),
        ]);
        assert!(url.is_empty());
        let problems = compute(&form).unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["kv-cache-l", "kv-cache-b", "kv-cache-q"]);
        assert_eq!(
            problems.of("kv-cache-l").unwrap(),
            "L (layers) must be a whole number of at least 1, but it is \"x\"."
        );
    }

    #[test]
    fn the_product_past_u64_is_the_largest_factors_problem() {
        let shape = |v: [u64; 6]| KvForm::from_values(v).check().unwrap();
        assert_eq!(
            largest_field(&shape([1 << 40, 1, 1 << 30, 1, 1, 1])),
            "kv-cache-l"
        );
        assert_eq!(
            largest_field(&shape([8, 1 << 20, 1 << 30, 1 << 20, 1, 1])),
            "kv-cache-s"
        );
        assert_eq!(
            largest_field(&shape([1, 1, 1, 1, 1, u64::MAX])),
            "kv-cache-q"
        );
        assert_eq!(
            largest_field(&shape([9, 9, 9, 9, 9, 9])),
            "kv-cache-l",
            "first of equals"
        );
    }

    /// Old permalinks keep working: every key is read, and a bad value stays in its field
    /// for the check to report there.
    #[test]
    fn url_pairs_round_trip_and_bad_values_stay_in_their_fields() {
        let form = KvForm::from_values([80, 4, 8192, 8, 128, 1]);
        let pairs = form.to_pairs();
        assert_eq!(
            KvForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))),
            (form, Problems::default())
        );
        let (form, _) =
            KvForm::from_pairs([("kv_l", "-1"), ("kv_s", "2048"), ("panel", "kv-cache")]);
        assert_eq!(form.layers, "-1");
        assert_eq!(form.seq_len, "2048");
        assert_eq!(form.batch, "1", "a missing key keeps its default");
        assert_eq!(
            compute(&form).unwrap_err().of("kv-cache-l").unwrap(),
            "L (layers) must be a whole number of at least 1, but it is \"-1\"."
        );
    }

    #[test]
    fn the_chart_compares_presets_at_the_forms_batch_length_and_width() {
        let (all, _) = presets();
        let mut form = KvForm {
            batch: "2".into(),
            ..KvForm::default()
        };
        let (rows, at) = chart_rows(&form, &all);
        assert_eq!(at, (2, 4096, 2));
        assert_eq!(rows[1].bytes, Some(4 * (1u64 << 30)));
        assert_eq!(rows[1].bytes_per_token, Some(524_288));
        form.seq_len = "long".into();
        assert_eq!(chart_rows(&form, &all).1, (2, 4096, 2));
    }

    #[test]
    fn numbers_are_written_for_people() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(2_147_483_648), "2,147,483,648");
        assert_eq!(figure_short(0.00048828125), "0.0004883");
        assert_eq!(figure_short(1.25), "1.25");
        assert_eq!(figure_short(12345.6), "12346");
        assert_eq!(binary_units(1023), "1023 bytes");
        assert_eq!(binary_units(536_870_912), "512 MiB");
    }
}
