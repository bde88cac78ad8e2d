//! The Generate panel's "Import a policy": a Hugging Face `generation_config.json`, an
//! OpenAI or vLLM request body or a llama.cpp command line, read by
//! [`policy::formats::import`] as `decode-lab generate --policy-from` reads it, into the
//! texts of the Generate form. What needs the model's vocabulary (vLLM's `allowed_token_ids`
//! and `bad_words` as text) is applied here with the tokenizer, as the CLI applies it
//! ([`policy::formats::RunSettings::apply_to`]); ids outside the vocabulary elsewhere in the
//! policy are the run's to refuse, by name, as the CLI's `generate` refuses them.

use policy::formats::{import, ImportError};
use policy::KNOBS;
use tokenizer::Tokenizer;

use crate::worker::protocol::ImportedPolicy;

/// Reads `text` (fields not understood are an error unless `lenient`) into the form's
/// texts, with every field read and what it became.
pub fn import_policy(
    text: &str,
    lenient: bool,
    tokenizer: &Tokenizer,
) -> Result<ImportedPolicy, ImportError> {
    let imported = import(text, lenient)?;
    let mut policy = imported.policy()?;
    let encode = |text: &str| tokenizer.encode(text);
    imported
        .run
        .apply_to(&mut policy, tokenizer.vocab_size(), Some(&encode))?;
    let request = imported.request(&Default::default());
    let run = &imported.run;
    Ok(ImportedPolicy {
        form: imported.format.title().to_string(),
        engine: imported.format.engine(),
        knobs: KNOBS.iter().map(|knob| knob.text(&policy)).collect(),
        breakers: request
            .texts("dry-sequence-breaker")
            .map(str::to_string)
            .collect(),
        max_tokens: run.max_tokens,
        seed: run.seed,
        stop: run.stop.clone(),
        stop_tokens: run.stop_tokens.clone(),
        readings: imported
            .readings
            .iter()
            .map(|r| [r.field.clone(), r.value.clone(), r.became.to_string()])
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{Engine, Knob, Policy};

    fn tokenizer() -> Tokenizer {
        crate::test_support::tokenizer()
    }

    fn text_of(imported: &ImportedPolicy, flag: &str) -> String {
        let i = KNOBS.iter().position(|k| k.flag == flag).unwrap();
        imported.knobs[i].clone()
    }

    /// The form's texts give the policy the CLI's `--policy-from` gives: the same reader
    /// and the same rule, so the knobs read back to the imported policy.
    #[test]
    fn a_vllm_body_becomes_the_forms_texts_and_its_run_settings() {
        let body = r#"{"temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0.05,
            "max_tokens": 48, "seed": 3, "stop": ["\n\n", "END"], "stop_token_ids": [7],
            "logit_bias": {"12": -100}}"#;
        let imported = import_policy(body, false, &tokenizer()).unwrap();
        assert_eq!(imported.form, "a vLLM request body");
        assert_eq!(imported.engine, Engine::Vllm);
        assert_eq!(text_of(&imported, "engine"), "vllm");
        assert_eq!(text_of(&imported, "temperature"), "0.6");
        assert_eq!(text_of(&imported, "top-k"), "20");
        assert_eq!(text_of(&imported, "top-p"), "0.9");
        assert_eq!(text_of(&imported, "min-p"), "0.05");
        assert_eq!(text_of(&imported, "bias"), "12:-100");
        assert_eq!(imported.max_tokens, Some(48));
        assert_eq!(imported.seed, Some(3));
        assert_eq!(imported.stop, ["\n\n", "END"]);
        assert_eq!(imported.stop_tokens, [7]);
        let expected = policy::formats::import(body, false)
            .unwrap()
            .policy()
            .unwrap();
        let mut read = Policy::default();
        for (knob, text) in KNOBS.iter().zip(&imported.knobs) {
            knob.apply(text, &mut read).unwrap();
        }
        assert_eq!(read, expected);
        let top_k = imported
            .readings
            .iter()
            .find(|[field, ..]| field == "top_k")
            .unwrap();
        assert_eq!(
            top_k,
            &["top_k".to_string(), "20".into(), "--top-k 20".into()]
        );
    }

    #[test]
    fn allowed_ids_forbid_the_rest_of_the_vocabulary_and_bad_words_are_found_in_it() {
        let tokenizer = tokenizer();
        let vocab = tokenizer.vocab_size() as u32;
        let body = r#"{"top_k": 5, "allowed_token_ids": [1, 2, 3], "bad_words": ["the"]}"#;
        let imported = import_policy(body, false, &tokenizer).unwrap();
        let forbid = Knob::named("forbid").unwrap();
        let mut policy = Policy::default();
        forbid
            .apply(&text_of(&imported, "forbid"), &mut policy)
            .unwrap();
        assert_eq!(policy.forbidden.len(), vocab as usize - 3);
        assert!(!policy.forbidden.contains(&2) && policy.forbidden.contains(&0));
        let bad = text_of(&imported, "bad-words");
        let expected: Vec<String> = [tokenizer.encode("the"), tokenizer.encode(" the")]
            .iter()
            .map(|ids| ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
            .collect();
        assert_eq!(bad, expected.join(";"));
    }

    #[test]
    fn llama_cpp_breakers_stay_text_and_hf_states_its_defaults() {
        let line = r#"llama-cli --dry-multiplier 0.8 --dry-sequence-breaker "::" --temp 0.7"#;
        let imported = import_policy(line, false, &tokenizer()).unwrap();
        assert_eq!(imported.engine, Engine::LlamaCpp);
        assert_eq!(imported.breakers, ["::"]);
        assert_eq!(text_of(&imported, "dry-multiplier"), "0.8");

        let config = r#"{"do_sample": true, "top_p": 0.9, "eos_token_id": [2, 5]}"#;
        let imported = import_policy(config, false, &tokenizer()).unwrap();
        assert_eq!(
            text_of(&imported, "top-k"),
            "50",
            "HF's default where the file is silent"
        );
        assert_eq!(text_of(&imported, "eos"), "2,5");
        assert!(imported
            .readings
            .iter()
            .any(|[field, value, _]| field == "top_k" && value == "(not given)"));
    }

    /// Refusals name the field, as the CLI's do: an id outside the vocabulary in
    /// `allowed_token_ids`, a word as a `logit_bias` key, a field not understood (unless
    /// lenient).
    #[test]
    fn bad_policies_are_refused_by_field() {
        let tokenizer = tokenizer();
        let too_far = format!(
            r#"{{"allowed_token_ids": [1, {}]}}"#,
            tokenizer.vocab_size()
        );
        let refusal = import_policy(&too_far, false, &tokenizer)
            .unwrap_err()
            .to_string();
        assert!(refusal.contains("allowed_token_ids"), "{refusal}");
        let refusal = import_policy(r#"{"logit_bias": {"hello": 5}}"#, false, &tokenizer)
            .unwrap_err()
            .to_string();
        assert!(refusal.contains("logit_bias"), "{refusal}");
        let unknown = r#"{"temperature": 0.5, "best_of_luck": 2}"#;
        let refusal = import_policy(unknown, false, &tokenizer)
            .unwrap_err()
            .to_string();
        assert!(refusal.contains("best_of_luck"), "{refusal}");
        let lenient = import_policy(unknown, true, &tokenizer).unwrap();
        assert!(lenient
            .readings
            .iter()
            .any(|[field, _, became]| field == "best_of_luck"
                && became.starts_with("not understood")));
    }
}
