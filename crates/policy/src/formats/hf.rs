//! Hugging Face's `generation_config.json`, as `transformers`' `GenerationConfig` reads it
//! (`src/transformers/generation/configuration_utils.py`): greedy unless `do_sample` is
//! true, in which case the warpers run with `temperature` 1.0, `top_k` 50 and `top_p` 1.0
//! where the file is silent; the logits processors (penalties, n-gram bans, bad words,
//! sequence bias, suppressed tokens, minimum length) run either way.

use serde_json::{Map, Value};

use super::{
    field_error, ids_text, knob_number, num_text, number, read_id, read_ids, read_number,
    read_whole, value_text, Became, Format, ImportError, Imported, Out, RunSettings,
};
use crate::chain::HF_CHAIN;
use crate::{Engine, Policy};

/// Fields only a generation config has: one of them makes a JSON object one.
const OWN: [&str; 15] = [
    "do_sample",
    "top_h",
    "transformers_version",
    "_from_model_config",
    "max_new_tokens",
    "min_new_tokens",
    "num_beams",
    "typical_p",
    "epsilon_cutoff",
    "eta_cutoff",
    "no_repeat_ngram_size",
    "bad_words_ids",
    "sequence_bias",
    "eos_token_id",
    "suppress_tokens",
];

/// Fields that describe the model or the output, not the choice of a token.
const METADATA: [&str; 12] = [
    "transformers_version",
    "_from_model_config",
    "bos_token_id",
    "pad_token_id",
    "decoder_start_token_id",
    "use_cache",
    "output_scores",
    "output_attentions",
    "output_hidden_states",
    "output_logits",
    "return_dict_in_generate",
    "cache_implementation",
];

/// The warpers, which run only when sampling.
const WARPERS: [&str; 8] = [
    "temperature",
    "top_h",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "epsilon_cutoff",
    "eta_cutoff",
];

pub(super) fn is_hf(object: &Map<String, Value>) -> bool {
    OWN.iter().any(|k| object.contains_key(*k))
}

pub(super) fn read(object: &Map<String, Value>) -> Result<Imported, ImportError> {
    let mut out = Imported::new(Format::Hf);
    let get = |key: &str| object.get(key).filter(|v| !v.is_null());
    let sampling = match get("do_sample") {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| field_error("do_sample", v, "true or false"))?,
    };
    let beams = match get("num_beams") {
        None => 1,
        Some(v) => read_whole("num_beams", v)?,
    };
    for (key, value) in object {
        let key = key.as_str();
        if value.is_null() && key == "top_k" && sampling {
            // GenerationConfig keeps an explicit None: no top-k warper, not its default 50.
            out.knob(key, "null", "top-k", "0".to_string());
            continue;
        }
        if value.is_null() {
            out.left_alone(key, "null", "Hugging Face's default");
            continue;
        }
        if METADATA.contains(&key) {
            out.left_alone(key, value_text(value), "not a decoding setting");
            continue;
        }
        if WARPERS.contains(&key) && !sampling {
            out.left_alone(
                key,
                value_text(value),
                "do_sample is false: Hugging Face runs no warper when it decodes greedily",
            );
            continue;
        }
        match key {
            // Greedy decoding is the temperature knob's, read below.
            "do_sample" if !sampling => {}
            "do_sample" => out.read(key, value, Became::Run("sampling: the warpers run".into())),
            "num_beams" if beams <= 1 => out.left_alone(key, value, "one beam is no search"),
            "num_beams" => out.not_understood(key, value, "beam search is not in the lab"),
            "length_penalty" | "early_stopping" | "num_beam_groups" | "diversity_penalty"
                if beams <= 1 =>
            {
                out.left_alone(key, value_text(value), "only beam search reads it")
            }
            "num_return_sequences" => {
                out.left_alone(key, value, "each run is one sequence; run more seeds")
            }
            "max_length" => out.left_alone(
                key,
                value,
                "it counts the prompt too; max_new_tokens, or the command's --max-tokens, sets the length",
            ),
            "temperature" => {
                let t = read_number(key, value)?;
                if t <= 0.0 {
                    return Err(field_error(
                        key,
                        value,
                        "above 0 when do_sample is true (Hugging Face refuses 0)",
                    ));
                }
                out.knob(key, value, "temperature", num_text(t));
            }
            "top_k" => {
                let k = read_whole(key, value)?;
                out.knob(key, value, "top-k", k.to_string());
            }
            "top_p" => knob_number(&mut out, key, value, "top-p")?,
            "min_p" => knob_number(&mut out, key, value, "min-p")?,
            "typical_p" => knob_number(&mut out, key, value, "typical")?,
            "top_h" => knob_number(&mut out, key, value, "top-h")?,
            "epsilon_cutoff" => knob_number(&mut out, key, value, "epsilon-cutoff")?,
            "eta_cutoff" => knob_number(&mut out, key, value, "eta-cutoff")?,
            "repetition_penalty" => knob_number(&mut out, key, value, "repetition-penalty")?,
            "no_repeat_ngram_size" => {
                let n = read_whole(key, value)?;
                out.knob(key, value, "no-repeat-ngram", n.to_string());
            }
            "min_new_tokens" => {
                let n = read_whole(key, value)?;
                out.knob(key, value, "min-new-tokens", n.to_string());
            }
            "max_new_tokens" => {
                let n = read_whole(key, value)?;
                out.run.max_tokens = Some(n as usize);
                out.read(key, value, Became::Run(format!("--max-tokens {n}")));
            }
            "eos_token_id" => {
                let ids = read_ids(key, value)?;
                out.knob(key, value, "eos", ids_text(&ids));
            }
            "suppress_tokens" => {
                let ids = read_ids(key, value)?;
                out.knob(key, value, "forbid", ids_text(&ids));
            }
            "bad_words_ids" => {
                let words = sequences(key, value)?;
                let text = words
                    .iter()
                    .map(|w| ids_text(w))
                    .collect::<Vec<_>>()
                    .join(";");
                out.knob(key, value, "bad-words", text);
            }
            "sequence_bias" => {
                let text = sequence_bias(key, value)?;
                out.knob(key, value, "sequence-bias", text);
            }
            "stop_strings" => out.stops(key, value)?,
            _ => out.not_understood(
                key,
                value_text(value),
                "no stage of the lab reads this setting",
            ),
        }
    }
    if sampling {
        if get("temperature").is_none() {
            out.default("temperature", "temperature", "1");
        }
        if !object.contains_key("top_k") {
            out.default("top_k", "top-k", "50");
        }
    } else {
        // Greedy, as Hugging Face decodes without do_sample (its default).
        let given = get("do_sample").map_or("(not given)".to_string(), value_text);
        out.knob("do_sample", given, "temperature", "0".to_string());
    }
    Ok(out)
}

/// A list of token-id lists.
fn sequences(key: &str, value: &Value) -> Result<Vec<Vec<u32>>, ImportError> {
    let expected = "a list of token-id lists";
    let items = value
        .as_array()
        .ok_or_else(|| field_error(key, value, expected))?;
    items
        .iter()
        .map(|item| match item {
            Value::Array(ids) if !ids.is_empty() => ids.iter().map(|v| read_id(key, v)).collect(),
            other => Err(field_error(key, other, expected)),
        })
        .collect()
}

/// `sequence_bias` as `GenerationConfig.to_json_string` writes it: a list of
/// `[[ids...], bias]` pairs.
fn sequence_bias(key: &str, value: &Value) -> Result<String, ImportError> {
    let expected = "a list of [[token ids], bias] pairs";
    let items = value
        .as_array()
        .ok_or_else(|| field_error(key, value, expected))?;
    let mut parts = Vec::new();
    for item in items {
        match item.as_array().map(Vec::as_slice) {
            Some([Value::Array(ids), bias]) if !ids.is_empty() => {
                let ids: Vec<u32> = ids
                    .iter()
                    .map(|v| read_id(key, v))
                    .collect::<Result<_, _>>()?;
                parts.push(format!(
                    "{}:{}",
                    ids_text(&ids),
                    num_text(read_number(key, bias)?)
                ));
            }
            _ => return Err(field_error(key, item, expected)),
        }
    }
    Ok(parts.join(";"))
}

pub(super) fn write(policy: &Policy, run: &RunSettings, out: &mut Out) {
    let why = "Hugging Face has no such setting";
    for flag in [
        "frequency-penalty",
        "presence-penalty",
        "top-n-sigma",
        "xtc-probability",
        "dry-multiplier",
        "mirostat",
        "min-keep",
        "dynatemp-range",
    ] {
        out.refuse_unless_default(policy, flag, why);
    }
    out.refuse_unless_default(
        policy,
        "bias",
        "Hugging Face biases sequences: write each as a one-token --sequence-bias",
    );
    out.refuse_order(policy, &HF_CHAIN, "Hugging Face");
    out.refuse_penalty_counts(policy, Engine::Hf);
    out.leave_out_vocabulary(run);
    let json = &mut out.json;
    // Greedy as the policy's own engine reads its temperature (llama.cpp: at or below 0).
    let sampling = !policy.engine.is_greedy(policy.temperature);
    json.insert("do_sample".into(), Value::Bool(sampling));
    if sampling {
        json.insert("temperature".into(), number(policy.temperature));
        // Written even when off: Hugging Face's default is 50.
        json.insert("top_k".into(), Value::from(policy.top_k));
        if let Some(h) = policy.top_h {
            json.insert("top_h".into(), number(h));
        }
        for (key, x, off) in [
            ("top_p", policy.top_p, 1.0),
            ("min_p", policy.min_p, 0.0),
            ("typical_p", policy.typical_p, 1.0),
            ("epsilon_cutoff", policy.epsilon_cutoff, 0.0),
            ("eta_cutoff", policy.eta_cutoff, 0.0),
        ] {
            if x != off {
                json.insert(key.into(), number(x));
            }
        }
    }
    if policy.repetition_penalty != 1.0 {
        json.insert(
            "repetition_penalty".into(),
            number(policy.repetition_penalty),
        );
    }
    if policy.no_repeat_ngram > 0 {
        json.insert(
            "no_repeat_ngram_size".into(),
            Value::from(policy.no_repeat_ngram),
        );
    }
    if policy.min_new_tokens > 0 {
        json.insert("min_new_tokens".into(), Value::from(policy.min_new_tokens));
    }
    if let Some(n) = run.max_tokens {
        json.insert("max_new_tokens".into(), Value::from(n));
    }
    let eos: Vec<u32> = policy.eos_ids().collect();
    match eos.as_slice() {
        [] => {}
        [one] => {
            json.insert("eos_token_id".into(), Value::from(*one));
        }
        many => {
            json.insert("eos_token_id".into(), Value::from(many.to_vec()));
        }
    }
    if !policy.forbidden.is_empty() {
        json.insert(
            "suppress_tokens".into(),
            Value::from(policy.forbidden.clone()),
        );
    }
    if !policy.bad_words.is_empty() {
        json.insert(
            "bad_words_ids".into(),
            Value::from(policy.bad_words.clone()),
        );
    }
    if !policy.sequence_bias.is_empty() {
        let pairs: Vec<Value> = policy
            .sequence_bias
            .iter()
            .map(|(ids, bias)| Value::Array(vec![Value::from(ids.clone()), number(*bias)]))
            .collect();
        json.insert("sequence_bias".into(), Value::Array(pairs));
    }
    if !run.stop.is_empty() {
        json.insert("stop_strings".into(), Value::from(run.stop.clone()));
    }
    for (given, name) in [
        (run.seed.is_some(), "seed"),
        (!run.stop_tokens.is_empty(), "stop tokens"),
    ] {
        if given {
            out.left_out.push(name.to_string());
        }
    }
}
