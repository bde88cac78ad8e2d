//! An OpenAI completion or chat request body, and vLLM's, which adds its own sampling
//! fields beside OpenAI's (`vllm/entrypoints/openai/protocol.py`, whose requests turn into
//! `vllm/sampling_params.py`'s `SamplingParams`): read under vLLM's rules, with OpenAI's
//! temperature 1 where the body is silent.

use serde_json::{Map, Value};

use super::strings;
use super::{
    field_error, knob_number, num_text, number, read_ids, read_number, read_whole, value_text,
    Became, Format, ImportError, Imported, Out, RunSettings,
};
use crate::engine::VLLM_CHAIN;
use crate::{Engine, Policy};

/// vLLM's fields beyond OpenAI's: one of them makes a body vLLM's.
const VLLM: [&str; 7] = [
    "top_k",
    "min_p",
    "repetition_penalty",
    "min_tokens",
    "bad_words",
    "allowed_token_ids",
    "stop_token_ids",
];

/// Fields about the request or the output, not the choice of a token.
const ELSEWHERE: [&str; 17] = [
    "model",
    "prompt",
    "messages",
    "stream",
    "stream_options",
    "user",
    "echo",
    "suffix",
    "logprobs",
    "top_logprobs",
    "prompt_logprobs",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "include_stop_str_in_output",
    "detokenize",
    "request_id",
    "metadata",
];

pub(super) fn read(object: &Map<String, Value>) -> Result<Imported, ImportError> {
    let format = match VLLM.iter().any(|k| object.contains_key(*k)) {
        true => Format::Vllm,
        false => Format::OpenAi,
    };
    let mut out = Imported::new(format);
    for (key, value) in object {
        let key = key.as_str();
        if value.is_null() {
            out.left_alone(key, "null", "the API's default");
            continue;
        }
        if ELSEWHERE.contains(&key) {
            out.left_alone(key, value_text(value), "not a decoding setting");
            continue;
        }
        match key {
            "temperature" => knob_number(&mut out, key, value, "temperature")?,
            "top_p" => knob_number(&mut out, key, value, "top-p")?,
            "min_p" => knob_number(&mut out, key, value, "min-p")?,
            "repetition_penalty" => knob_number(&mut out, key, value, "repetition-penalty")?,
            "frequency_penalty" => knob_number(&mut out, key, value, "frequency-penalty")?,
            "presence_penalty" => knob_number(&mut out, key, value, "presence-penalty")?,
            "top_k" => {
                // vLLM: 0 and -1 both mean every token.
                let k = value
                    .as_i64()
                    .filter(|k| *k >= -1)
                    .ok_or_else(|| field_error(key, value, "a whole number, or -1 for off"))?;
                out.knob(key, value, "top-k", k.max(0).to_string());
            }
            "min_tokens" => {
                let n = read_whole(key, value)?;
                out.knob(key, value, "min-new-tokens", n.to_string());
            }
            "seed" => {
                let seed = value
                    .as_u64()
                    .ok_or_else(|| field_error(key, value, "a whole number of at least 0"))?;
                out.run.seed = Some(seed);
                out.read(key, value, Became::Run(format!("--seed {seed}")));
            }
            // vLLM's chat request: the newer field wins.
            "max_tokens"
                if object
                    .get("max_completion_tokens")
                    .is_some_and(|v| !v.is_null()) =>
            {
                out.left_alone(key, value, "max_completion_tokens takes its place")
            }
            "max_tokens" | "max_completion_tokens" => {
                let n = read_whole(key, value)?;
                out.run.max_tokens = Some(n as usize);
                out.read(key, value, Became::Run(format!("--max-tokens {n}")));
            }
            "stop" => out.stops(key, value)?,
            "stop_token_ids" => {
                let ids = read_ids(key, value)?;
                let words = ids
                    .iter()
                    .map(|id| format!("--stop-token {id}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                out.run.stop_tokens.extend(ids);
                out.read(key, value, Became::Run(words));
            }
            "logit_bias" => {
                let text = logit_bias(key, value)?;
                out.knob(key, value, "bias", text);
            }
            "bad_words" => {
                let words = strings(key, value)?;
                out.run.bad_word_texts.extend(words);
                out.read(
                    key,
                    value,
                    Became::Run("bad words as text, found by the command's tokenizer".into()),
                );
            }
            "allowed_token_ids" => {
                let ids = read_ids(key, value)?;
                out.run.allowed_tokens = Some(ids);
                out.read(
                    key,
                    value,
                    Became::Run("every other token id of the vocabulary forbidden".into()),
                );
            }
            "n" | "best_of" if value.as_u64() == Some(1) => {
                out.left_alone(key, value, "one completion")
            }
            "n" => out.left_alone(key, value, "each run is one completion; run more seeds"),
            _ => out.not_understood(
                key,
                value_text(value),
                "no stage of the lab reads this setting",
            ),
        }
    }
    if object.get("temperature").is_none_or(Value::is_null) {
        out.default("temperature", "temperature", "1");
    }
    Ok(out)
}

/// `{"50256": -100}`: keys are token ids written as text.
fn logit_bias(key: &str, value: &Value) -> Result<String, ImportError> {
    let map = value
        .as_object()
        .ok_or_else(|| field_error(key, value, "an object of token id → bias"))?;
    let mut pairs = Vec::new();
    for (id, bias) in map {
        let id: u32 = id.trim().parse().map_err(|_| ImportError::Field {
            field: format!("{key} key"),
            value: format!("{id:?}"),
            expected: "a token id (the API keys the bias by token id, not by word)",
        })?;
        pairs.push(format!("{id}:{}", num_text(read_number(key, bias)?)));
    }
    Ok(pairs.join(","))
}

pub(super) fn write(policy: &Policy, run: &RunSettings, format: Format, out: &mut Out) {
    let vllm = format == Format::Vllm;
    let openai_why = "OpenAI's API has no such setting (vLLM's has: --policy-to vllm)";
    let why = match vllm {
        true => "vLLM has no such setting",
        false => openai_why,
    };
    let mut refused: Vec<&str> = vec![
        "min-keep",
        "typical",
        "epsilon-cutoff",
        "eta-cutoff",
        "top-n-sigma",
        "top-h",
        "dynatemp-range",
        "xtc-probability",
        "dry-multiplier",
        "mirostat",
        "no-repeat-ngram",
        "sequence-bias",
        "forbid",
        "bad-words",
        "eos",
    ];
    if !vllm {
        refused.extend(["top-k", "min-p", "repetition-penalty", "min-new-tokens"]);
    }
    for flag in refused {
        let why = match flag {
            "top-k" | "min-p" | "repetition-penalty" | "min-new-tokens" => openai_why,
            "forbid" => "the API bans a token only down to a bias of -100",
            "eos" => {
                "the API ends at the model's own end; extra ends are stop tokens (--stop-token)"
            }
            "bad-words" => "vLLM's bad words are text, these are token ids",
            _ => why,
        };
        out.refuse_unless_default(policy, flag, why);
    }
    out.refuse_order(policy, &VLLM_CHAIN, "vLLM");
    out.refuse_penalty_counts(policy, Engine::Vllm);
    if !vllm {
        out.leave_out_vocabulary(run);
    }
    let json = &mut out.json;
    // Greedy as the policy's own engine reads its temperature (llama.cpp: at or below 0).
    let temperature = match policy.engine.is_greedy(policy.temperature) {
        true => 0.0,
        false => policy.temperature,
    };
    json.insert("temperature".into(), number(temperature));
    if policy.top_p != 1.0 {
        json.insert("top_p".into(), number(policy.top_p));
    }
    for (key, x) in [
        ("frequency_penalty", policy.frequency_penalty),
        ("presence_penalty", policy.presence_penalty),
    ] {
        if x != 0.0 {
            json.insert(key.into(), number(x));
        }
    }
    if vllm {
        if policy.top_k > 0 {
            json.insert("top_k".into(), Value::from(policy.top_k));
        }
        if policy.min_p > 0.0 {
            json.insert("min_p".into(), number(policy.min_p));
        }
        if policy.repetition_penalty != 1.0 {
            json.insert(
                "repetition_penalty".into(),
                number(policy.repetition_penalty),
            );
        }
        if policy.min_new_tokens > 0 {
            json.insert("min_tokens".into(), Value::from(policy.min_new_tokens));
        }
        if !run.stop_tokens.is_empty() {
            json.insert(
                "stop_token_ids".into(),
                Value::from(run.stop_tokens.clone()),
            );
        }
        if let Some(allowed) = &run.allowed_tokens {
            json.insert("allowed_token_ids".into(), Value::from(allowed.clone()));
        }
        if !run.bad_word_texts.is_empty() {
            json.insert("bad_words".into(), Value::from(run.bad_word_texts.clone()));
        }
    } else if !run.stop_tokens.is_empty() {
        out.left_out.push("stop tokens".into());
    }
    if !policy.logit_bias.is_empty() {
        let map: Map<String, Value> = policy
            .logit_bias
            .iter()
            .map(|(id, bias)| (id.to_string(), number(*bias)))
            .collect();
        json.insert("logit_bias".into(), Value::Object(map));
    }
    if let Some(seed) = run.seed {
        json.insert("seed".into(), Value::from(seed));
    }
    if let Some(n) = run.max_tokens {
        json.insert("max_tokens".into(), Value::from(n));
    }
    match run.stop.as_slice() {
        [] => {}
        [one] => {
            json.insert("stop".into(), Value::from(one.clone()));
        }
        many => {
            json.insert("stop".into(), Value::from(many.to_vec()));
        }
    }
}
