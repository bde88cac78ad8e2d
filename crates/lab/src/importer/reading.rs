//! Generate's "Import a policy", read: a Hugging Face `generation_config.json`, an OpenAI or
//! vLLM request body or a llama.cpp command line, read by [`policy::formats::import`] as
//! `decode-lab generate --policy-from` reads it, into the texts of the Generate form. What
//! needs the model's vocabulary (vLLM's `allowed_token_ids` and `bad_words` as text) is
//! applied with the tokenizer, as the CLI applies it
//! ([`policy::formats::RunSettings::apply_to`]); ids outside the vocabulary elsewhere in the
//! policy are the run's to refuse, by name, as the CLI's `generate` refuses them.

use policy::formats::{ImportError, Imported};
use policy::KNOBS;
use report::{Cell, Row, Table};
use tokenizer::Tokenizer;

use crate::importer::protocol::ImportedPolicy;
use crate::widgets::markup::table_html;

/// Whether applying `imported` needs the model's tokenizer: it allows only some ids, or
/// names bad words as text.
pub fn needs_tokenizer(imported: &Imported) -> bool {
    imported.run.allowed_tokens.is_some() || !imported.run.bad_word_texts.is_empty()
}

/// The form's texts for `imported`, with every field read and what it became; `tokenizer`
/// is the model's, which [`needs_tokenizer`] says when it must be given.
pub fn form_texts(
    imported: &Imported,
    tokenizer: Option<&Tokenizer>,
) -> Result<ImportedPolicy, ImportError> {
    let mut policy = imported.policy()?;
    let encode = |text: &str| tokenizer.map(|t| t.encode(text)).unwrap_or_default();
    let vocab = tokenizer.map_or(usize::MAX, Tokenizer::vocab_size);
    let encode: Option<&policy::formats::Encode<'_>> = tokenizer.map(|_| &encode as _);
    imported.run.apply_to(&mut policy, vocab, encode)?;
    let request = imported.request(&Default::default());
    let run = &imported.run;
    let (form, engine) = (imported.format.title(), imported.format.engine());
    let rows = imported
        .readings
        .iter()
        .map(|r| {
            Row::new(
                r.field.clone(),
                vec![
                    Cell::text(r.value.clone()),
                    Cell::text(r.became.to_string()),
                ],
            )
        })
        .collect();
    let table = Table::mirror(
        "import-readings",
        format!("What the lab read from {form}, under the {engine} engine's rules: each field, its value, and what it became"),
        &["Field", "Value", "What it became"],
        rows,
    );
    Ok(ImportedPolicy {
        knobs: KNOBS.iter().map(|knob| knob.text(&policy)).collect(),
        breakers: request
            .texts("dry-sequence-breaker")
            .map(str::to_string)
            .collect(),
        max_tokens: run.max_tokens,
        seed: run.seed,
        stop: run.stop.clone(),
        stop_tokens: run.stop_tokens.clone(),
        summary: format!(
            "Read {form} under the {engine} engine's rules: {} fields, listed below. The form above now holds its policy.",
            imported.readings.len()
        ),
        html: table_html(&table),
    })
}

/// [`policy::formats::import`] and [`form_texts`] at once, for the tests.
#[cfg(test)]
fn import_policy(
    text: &str,
    lenient: bool,
    tokenizer: &Tokenizer,
) -> Result<ImportedPolicy, ImportError> {
    form_texts(&policy::formats::import(text, lenient)?, Some(tokenizer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{Knob, Policy};

    fn tokenizer() -> Tokenizer {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../models/decode-lab-tiny-v1/tokenizer.json"
        );
        Tokenizer::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
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
        assert!(imported
            .summary
            .starts_with("Read a vLLM request body under the vllm engine's rules: "));
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
        assert!(
            imported
                .html
                .contains("<tr><th scope=\"row\">top_k</th><td>20</td><td>--top-k 20</td></tr>"),
            "{}",
            imported.html
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
        assert!(imported.summary.contains("the llama.cpp engine's rules"));
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
            .html
            .contains("<th scope=\"row\">top_k</th><td>(not given)</td>"));
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
            .html
            .contains("best_of_luck</th><td>2</td><td>not understood"));
    }
}
