use super::*;
use crate::{Engine, PolicyRequest, StageOrder};

fn became<'a>(imported: &'a Imported, field: &str) -> &'a Became {
    &imported
        .readings
        .iter()
        .find(|r| r.field == field)
        .unwrap_or_else(|| panic!("no reading of {field}"))
        .became
}

#[test]
fn a_sampling_generation_config_gets_hugging_faces_defaults_and_says_so() {
    let imported = import(
        r#"{"do_sample": true, "top_p": 0.9, "eos_token_id": [2, 7]}"#,
        false,
    )
    .unwrap();
    assert_eq!(imported.format, Format::Hf);
    let p = imported.policy().unwrap();
    assert_eq!(p.engine, Engine::Hf);
    // GenerationConfig's own defaults where the file is silent.
    assert_eq!((p.temperature, p.top_k, p.top_p), (1.0, 50, 0.9));
    assert_eq!(p.eos_ids().collect::<Vec<_>>(), [2, 7]);
    let top_k = imported
        .readings
        .iter()
        .find(|r| r.field == "top_k")
        .unwrap();
    assert_eq!(top_k.to_string(), "top_k (not given): --top-k 50");
}

#[test]
fn without_do_sample_hugging_face_decodes_greedily_and_runs_no_warper() {
    let imported = import(
        r#"{"temperature": 0.6, "top_p": 0.9, "repetition_penalty": 1.1, "bos_token_id": 1, "transformers_version": "4.40.0"}"#,
        false,
    )
    .unwrap();
    let p = imported.policy().unwrap();
    assert_eq!(
        (p.temperature, p.top_p, p.repetition_penalty),
        (0.0, 1.0, 1.1)
    );
    assert!(
        matches!(became(&imported, "temperature"), Became::LeftAlone(why) if why.contains("do_sample is false"))
    );
    assert_eq!(
        became(&imported, "do_sample"),
        &Became::Knob("temperature", "0".into())
    );
    assert!(matches!(
        became(&imported, "bos_token_id"),
        Became::LeftAlone(_)
    ));
}

#[test]
fn fields_not_understood_are_named_and_lenient_reads_the_rest() {
    let text = r#"{"do_sample": true, "num_beams": 4, "penalty_alpha": 0.6, "top_k": 4}"#;
    let error = import(text, false).unwrap_err();
    assert_eq!(
        error,
        ImportError::NotUnderstood {
            format: Format::Hf,
            fields: vec!["num_beams".into(), "penalty_alpha".into()]
        }
    );
    assert!(error.to_string().contains("num_beams, penalty_alpha"));
    let lenient = import(text, true).unwrap();
    assert_eq!(lenient.policy().unwrap().top_k, 4);
    assert_eq!(
        lenient.not_understood_fields(),
        ["num_beams", "penalty_alpha"]
    );
}

#[test]
fn malformed_files_and_values_are_named() {
    assert!(matches!(
        import("{\"do_sample\": tru}", false),
        Err(ImportError::Json { .. })
    ));
    let eos = import(r#"{"do_sample": true, "eos_token_id": "</s>"}"#, false).unwrap_err();
    assert_eq!(
        eos.to_string(),
        "eos_token_id must be a token id, but it is \"</s>\""
    );
    let zero = import(r#"{"do_sample": true, "temperature": 0}"#, false).unwrap_err();
    assert!(zero.to_string().starts_with("temperature must be above 0"));
    // A value the form allows but the knob refuses names the field it came from.
    let negative = import(r#"{"do_sample": true, "top_p": -0.5}"#, false)
        .unwrap()
        .policy();
    assert!(
        matches!(&negative, Ok(_) | Err(ImportError::Knob { .. })),
        "{negative:?}"
    );
    let bias = import(r#"{"logit_bias": {"hello": -100}}"#, false).unwrap_err();
    assert_eq!(
        bias.to_string(),
        "logit_bias key must be a token id (the API keys the bias by token id, not by word), but it is \"hello\""
    );
}

#[test]
fn a_request_body_reads_under_vllm_and_its_extras_make_it_vllms() {
    let openai = import(
        r#"{"model": "m", "temperature": 0.2, "top_p": 0.5, "seed": 9, "stop": "\n\n", "max_tokens": 30,
            "logit_bias": {"50256": -100, "11": 2.5}, "frequency_penalty": 0.5, "presence_penalty": -1}"#,
        false,
    )
    .unwrap();
    assert_eq!(openai.format, Format::OpenAi);
    let p = openai.policy().unwrap();
    assert_eq!(p.engine, Engine::Vllm);
    assert_eq!((p.temperature, p.top_p), (0.2, 0.5));
    assert_eq!((p.frequency_penalty, p.presence_penalty), (0.5, -1.0));
    let mut bias = p.logit_bias.clone();
    bias.sort_by_key(|(id, _)| *id);
    assert_eq!(bias, [(11, 2.5), (50256, -100.0)]);
    assert_eq!(
        openai.run,
        RunSettings {
            seed: Some(9),
            max_tokens: Some(30),
            stop: vec!["\n\n".into()],
            ..RunSettings::default()
        }
    );
    let vllm = import(
        r#"{"top_k": -1, "min_p": 0.1, "min_tokens": 3, "stop_token_ids": [5], "allowed_token_ids": [1, 2], "bad_words": ["x"]}"#,
        false,
    )
    .unwrap();
    assert_eq!(vllm.format, Format::Vllm);
    let p = vllm.policy().unwrap();
    // OpenAI's temperature 1 where the body is silent; vLLM's -1 is top-k off.
    assert_eq!(
        (p.temperature, p.top_k, p.min_p, p.min_new_tokens),
        (1.0, 0, 0.1, 3)
    );
    assert_eq!(vllm.run.stop_tokens, [5]);
    assert_eq!(vllm.run.allowed_tokens, Some(vec![1, 2]));
    assert_eq!(vllm.run.bad_word_texts, ["x"]);
}

#[test]
fn a_llama_cpp_line_gets_the_samplers_llama_cpp_switches_on_and_says_so() {
    let imported = import(
        "./llama-cli -m model.gguf -p 'Once upon a time' --temp 0.7 --repeat-penalty 1.1 \\\n  --logit-bias 15043+1.5 -l 2-inf --seed 42 -n 64 --top-nsigma -1 --dry-sequence-breaker \"\\n\"",
        false,
    )
    .unwrap();
    assert_eq!(imported.format, Format::LlamaCpp);
    let p = imported.policy_with_breakers();
    assert_eq!(p.engine, Engine::LlamaCpp);
    // common_params_sampling's defaults where the line is silent.
    assert_eq!(
        (p.temperature, p.top_k, p.top_p, p.min_p),
        (0.7, 40, 0.95, 0.05)
    );
    assert_eq!(p.repetition_penalty, 1.1);
    assert_eq!(p.logit_bias, [(15043, 1.5)]);
    assert_eq!(p.forbidden, [2]);
    assert_eq!(p.top_n_sigma, None);
    assert_eq!(
        (imported.run.seed, imported.run.max_tokens),
        (Some(42), Some(64))
    );
    assert_eq!(
        imported
            .readings
            .iter()
            .find(|r| r.field == "--min-p")
            .unwrap()
            .to_string(),
        "--min-p (not given): --min-p 0.05"
    );
    assert!(matches!(became(&imported, "-m"), Became::LeftAlone(_)));
    assert!(matches!(became(&imported, "-p"), Became::LeftAlone(_)));

    let unknown = import("llama-cli --temp 0.5 --frobnicate 3", false).unwrap_err();
    assert!(unknown.to_string().contains("--frobnicate"), "{unknown}");
    let alt = import("llama-cli --samplers 'top-k;nucleus;temp'", false).unwrap();
    assert_eq!(
        alt.policy()
            .unwrap()
            .samplers
            .unwrap()
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>(),
        ["top_k", "top_p", "temperature"]
    );
    let seq = import("llama-cli --sampling-seq kpt", false).unwrap();
    assert_eq!(
        seq.policy()
            .unwrap()
            .samplers
            .unwrap()
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>(),
        ["top_k", "top_p", "temperature"]
    );
    assert!(import("llama-cli --temp", false)
        .unwrap_err()
        .to_string()
        .contains("--temp"));
    assert!(import("llama-cli --top-k 'forty", false).is_err());
}

impl Imported {
    /// The policy with DRY's breakers left to the command (they need the vocabulary).
    fn policy_with_breakers(&self) -> Policy {
        let mut copy = self.clone();
        copy.knobs
            .retain(|(k, _, _)| k.kind != crate::KnobKind::Texts);
        copy.policy().unwrap()
    }
}

#[test]
fn what_a_command_line_types_beats_the_file() {
    let imported = import(
        r#"{"do_sample": true, "temperature": 0.6, "top_p": 0.9}"#,
        false,
    )
    .unwrap();
    let typed = PolicyRequest::new([(Knob::named("top-p").unwrap(), "0.5".to_string())]);
    let p = imported.request(&typed).policy(0.7).unwrap();
    assert_eq!((p.temperature, p.top_p, p.top_k), (0.6, 0.5, 50));
    // A typed order takes the place of the file's engine, which it conflicts with.
    let order = PolicyRequest::new([(
        Knob::named("order").unwrap(),
        "temperature-last".to_string(),
    )]);
    let p = imported.request(&order).policy(0.7).unwrap();
    assert_eq!(
        (p.engine, p.order),
        (Engine::Lab, StageOrder::TemperatureLast)
    );
}

/// Each form, written and read back, gives the same policy and run settings.
#[test]
fn each_form_round_trips() {
    let cases = [
        (
            Format::Hf,
            r#"{"do_sample": true, "temperature": 0.7, "top_k": 20, "top_p": 0.8, "min_p": 0.05, "typical_p": 0.9,
                "epsilon_cutoff": 0.0003, "eta_cutoff": 0.0004, "repetition_penalty": 1.05, "no_repeat_ngram_size": 3,
                "bad_words_ids": [[1, 2], [3]], "sequence_bias": [[[4, 5], -2.5]], "min_new_tokens": 2,
                "max_new_tokens": 100, "eos_token_id": [151645, 151643], "suppress_tokens": [9]}"#,
        ),
        (Format::Hf, r#"{"do_sample": false, "repetition_penalty": 1.2, "eos_token_id": 2}"#),
        (
            Format::OpenAi,
            r#"{"temperature": 0.3, "top_p": 0.95, "seed": 1, "stop": ["a", "b"], "max_tokens": 16,
                "logit_bias": {"7": -3}, "frequency_penalty": 0.2, "presence_penalty": 0.1}"#,
        ),
        (
            Format::Vllm,
            r#"{"temperature": 1.3, "top_k": 8, "min_p": 0.02, "repetition_penalty": 1.1, "min_tokens": 4,
                "stop_token_ids": [3], "allowed_token_ids": [1, 2, 3], "bad_words": ["no"], "stop": "."}"#,
        ),
        (
            Format::LlamaCpp,
            "llama-cli --temp 0.9 --top-k 0 --top-p 1 --min-p 0.1 --typical 0.95 --repeat-penalty 1.1 --repeat-last-n 128 \
             --presence-penalty 0.3 --frequency-penalty 0.2 --xtc-probability 0.5 --xtc-threshold 0.2 --top-nsigma 1.5 \
             --dry-multiplier 0.8 --dry-base 2 --dry-allowed-length 3 --dry-penalty-last-n 256 \
             --mirostat 2 --mirostat-lr 0.2 --mirostat-ent 4 --logit-bias 5+2 -l 6-inf --seed 3 -n 20",
        ),
        (Format::LlamaCpp, "llama-cli --samplers 'top_k;temperature' --top-k 3"),
        // The samplers of 2026: Hugging Face's top-H, llama.cpp's dynamic temperature.
        (Format::Hf, r#"{"do_sample": true, "temperature": 0.8, "top_h": 0.4}"#),
        (
            Format::LlamaCpp,
            "llama-cli --temp 0.7 --dynatemp-range 0.5 --dynatemp-exp 1.5 --top-k 40",
        ),
    ];
    for (format, text) in cases {
        let first = import(text, false).unwrap();
        assert_eq!(first.format, format, "{text}");
        let policy = first.policy().unwrap();
        let written = write(&policy, &first.run, &[], format)
            .unwrap_or_else(|e| panic!("{}: {e}", format.name()));
        let again =
            import(&written.text, false).unwrap_or_else(|e| panic!("{}: {e}", written.text));
        assert_eq!(again.policy().unwrap(), policy, "{}", written.text);
        assert_eq!(again.run, first.run, "{}", written.text);
    }
}

#[test]
fn a_form_refuses_by_name_what_it_cannot_express() {
    let p = Policy {
        frequency_penalty: 0.5,
        xtc_probability: 0.3,
        ..Policy::default()
    };
    let hf = write(&p, &RunSettings::default(), &[], Format::Hf).unwrap_err();
    assert_eq!(
        hf.to_string(),
        "a Hugging Face generation_config.json cannot express frequency-penalty 0.5 (Hugging Face has no such setting); xtc-probability 0.3 (Hugging Face has no such setting)"
    );
    let top_k = Policy {
        top_k: 40,
        ..Policy::default()
    };
    let openai = write(&top_k, &RunSettings::default(), &[], Format::OpenAi).unwrap_err();
    assert!(openai
        .to_string()
        .contains("top-k 40 (OpenAI's API has no such setting"));
    assert!(write(&top_k, &RunSettings::default(), &[], Format::Vllm).is_ok());
    let eps = Policy {
        epsilon_cutoff: 0.01,
        ..Policy::default()
    };
    let llama = write(&eps, &RunSettings::default(), &[], Format::LlamaCpp).unwrap_err();
    assert!(llama.to_string().contains("epsilon-cutoff 0.01"), "{llama}");
    // A run setting the form has no place for is named, not refused.
    let seeded = RunSettings {
        seed: Some(3),
        ..RunSettings::default()
    };
    assert_eq!(
        write(&Policy::default(), &seeded, &[], Format::Hf)
            .unwrap()
            .left_out,
        ["seed"]
    );
}

/// What a review found: each a case the first readers and writers got wrong.
#[test]
fn every_logit_bias_of_a_line_is_kept_and_round_trips() {
    let imported = import(
        "llama-cli -l 2-inf -l 3-inf -l 5+1 --logit-bias 6-2.5",
        false,
    )
    .unwrap();
    let p = imported.policy().unwrap();
    assert_eq!(p.forbidden, [2, 3]);
    assert_eq!(p.logit_bias, [(5, 1.0), (6, -2.5)]);
    let written = write(&p, &imported.run, &[], Format::LlamaCpp).unwrap();
    assert_eq!(import(&written.text, false).unwrap().policy().unwrap(), p);
}

#[test]
fn mirostat_on_a_line_switches_no_truncation_on() {
    let p = import("llama-cli --mirostat 2 --mirostat-ent 4", false)
        .unwrap()
        .policy()
        .unwrap();
    assert_eq!((p.mirostat, p.top_k, p.top_p, p.min_p), (2, 0, 1.0, 0.0));
    assert_eq!(p.temperature, 0.8);
}

#[test]
fn a_negative_llama_cpp_temperature_is_greedy_in_every_form() {
    let p = import("llama-cli --temp -1", false)
        .unwrap()
        .policy()
        .unwrap();
    let hf = write(&p, &RunSettings::default(), &[], Format::Hf).unwrap();
    assert!(hf.text.contains("\"do_sample\": false"), "{}", hf.text);
    let openai = write(&p, &RunSettings::default(), &[], Format::Vllm).unwrap();
    assert!(
        openai.text.contains("\"temperature\": 0.0"),
        "{}",
        openai.text
    );
}

#[test]
fn penalties_that_count_other_tokens_under_the_target_are_refused_or_widened() {
    // llama.cpp's 64-token window is not Hugging Face's whole text.
    let llama = import("llama-cli --temp 1 --repeat-penalty 1.1", false)
        .unwrap()
        .policy()
        .unwrap();
    let refused = write(&llama, &RunSettings::default(), &[], Format::Hf).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("llama.cpp penalises the last 64 tokens, hf the whole text"),
        "{refused}"
    );
    // With a window of all of it, it is.
    let whole = import(
        "llama-cli --temp 1 --repeat-penalty 1.1 --repeat-last-n -1",
        false,
    )
    .unwrap()
    .policy()
    .unwrap();
    assert!(write(&whole, &RunSettings::default(), &[], Format::Hf).is_ok());
    // Hugging Face's whole-text penalty becomes llama.cpp's window of -1.
    let hf = import(r#"{"do_sample": true, "repetition_penalty": 1.2}"#, false)
        .unwrap()
        .policy()
        .unwrap();
    let line = write(&hf, &RunSettings::default(), &[], Format::LlamaCpp).unwrap();
    assert!(line.text.contains("--repeat-last-n -1"), "{}", line.text);
    // vLLM's output-only frequency penalty has no llama.cpp form.
    let vllm = import(r#"{"frequency_penalty": 0.5}"#, false)
        .unwrap()
        .policy()
        .unwrap();
    let refused = write(&vllm, &RunSettings::default(), &[], Format::LlamaCpp).unwrap_err();
    assert!(
        refused.to_string().contains("llama.cpp the prompt's too"),
        "{refused}"
    );
}

#[test]
fn a_null_field_reads_as_the_engine_reads_it() {
    // vLLM: max_completion_tokens or max_tokens.
    let body = import(
        r#"{"max_tokens": 50, "max_completion_tokens": null}"#,
        false,
    )
    .unwrap();
    assert_eq!(body.run.max_tokens, Some(50));
    // GenerationConfig keeps an explicit None for top_k: no top-k.
    let hf = import(r#"{"do_sample": true, "top_k": null}"#, false)
        .unwrap()
        .policy()
        .unwrap();
    assert_eq!(hf.top_k, 0);
}

#[test]
fn a_greedy_policys_order_counts_where_a_stage_can_move_the_argmax() {
    let p = Policy {
        temperature: 0.0,
        xtc_probability: 0.5,
        ..Policy::default()
    };
    let line = write(&p, &RunSettings::default(), &[], Format::LlamaCpp).unwrap();
    assert!(line.text.contains("--samplers"), "{}", line.text);
    // Truncations that keep the top token do not.
    let plain = import("llama-cli --temp 0", false)
        .unwrap()
        .policy()
        .unwrap();
    assert!(write(&plain, &RunSettings::default(), &[], Format::Hf).is_ok());
}

#[test]
fn settings_a_form_cannot_hold_are_named() {
    let body = import(
        r#"{"allowed_token_ids": [1, 2], "bad_words": ["x"]}"#,
        false,
    )
    .unwrap();
    let p = body.policy().unwrap();
    let hf = write(&p, &body.run, &[], Format::Hf).unwrap();
    assert_eq!(hf.left_out, ["allowed token ids", "bad words as text"]);
    assert_eq!(flags(&p, &body.run, &[]).left_out, hf.left_out);
    assert!(write(&p, &body.run, &[], Format::Vllm)
        .unwrap()
        .left_out
        .is_empty());
}

/// A text beyond `MAX_BYTES` is refused before it is parsed, as the CLI refuses such a file.
#[test]
fn a_policy_longer_than_the_bound_is_refused_unread() {
    let long = format!(
        r#"{{"temperature": 0.5, "x": "{}"}}"#,
        "a".repeat(MAX_BYTES)
    );
    let refusal = import(&long, true).unwrap_err();
    assert_eq!(refusal, ImportError::TooLong { bytes: long.len() });
    assert!(refusal.to_string().contains(&MAX_BYTES.to_string()));
    let at_bound = format!("--temp 0.5 {}", " ".repeat(MAX_BYTES - 11));
    assert_eq!(at_bound.len(), MAX_BYTES);
    assert!(import(&at_bound, false).is_ok());
}

/// Top-H is read from a generation config only when it samples, as Hugging Face runs it;
/// the dynamic temperature from a llama.cpp line; each form without the sampler refuses it.
#[test]
fn the_new_samplers_are_read_and_refused_where_a_form_lacks_them() {
    let hf = import(r#"{"do_sample": true, "top_h": 0.4}"#, false).unwrap();
    assert_eq!(hf.policy().unwrap().top_h, Some(0.4));
    let greedy = import(r#"{"do_sample": false, "top_h": 0.4}"#, false).unwrap();
    assert_eq!(greedy.policy().unwrap().top_h, None);
    let line = import("llama-cli --dynatemp-range 0.5 --dynatemp-exp 2", false).unwrap();
    let p = line.policy().unwrap();
    assert_eq!((p.dynatemp_range, p.dynatemp_exponent), (0.5, 2.0));
    let refused = |policy: &Policy, format| {
        write(policy, &RunSettings::default(), &[], format)
            .unwrap_err()
            .to_string()
    };
    let top_h = Policy {
        top_h: Some(0.4),
        ..Policy::default()
    };
    assert!(refused(&top_h, Format::LlamaCpp).contains("top-h 0.4 ("));
    assert!(refused(&top_h, Format::Vllm).contains("top-h 0.4 ("));
    let dynamic = Policy {
        dynatemp_range: 0.5,
        ..Policy::default()
    };
    for format in [Format::Hf, Format::OpenAi, Format::Vllm] {
        assert!(
            refused(&dynamic, format).contains("dynatemp-range 0.5 ("),
            "{}",
            refused(&dynamic, format)
        );
    }
}
