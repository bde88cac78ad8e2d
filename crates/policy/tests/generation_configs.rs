//! Seven models' published `generation_config.json` (`fixtures/generation_configs/`, with
//! their sources), each imported under Hugging Face's rules and checked against the policy
//! those rules give, worked out by hand from `transformers`' `GenerationConfig`: greedy
//! without `do_sample`, whatever temperature and top-p the file also holds; with it,
//! temperature 1 and top-k 50 where the file is silent. Each is then written back as a
//! generation config and as the other forms that can hold it, and read again unchanged.

use policy::formats::{import, write, Became, Format};
use policy::{Engine, Policy, Sampler};

/// The stages a policy switches on, in the order it runs them.
fn on(p: &Policy) -> Vec<Sampler> {
    p.chain().iter().copied().filter(|s| s.is_on(p)).collect()
}

struct Expected {
    file: &'static str,
    text: &'static str,
    temperature: f64,
    top_k: usize,
    top_p: f64,
    repetition_penalty: f64,
    eos: &'static [u32],
    /// The readings that are Hugging Face's defaults, which the file did not give.
    defaults: &'static [&'static str],
}

macro_rules! fixture {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("fixtures/generation_configs/", $name)),
        )
    };
}

fn cases() -> Vec<Expected> {
    let case = |(file, text): (&'static str, &'static str),
                temperature,
                top_k,
                top_p,
                repetition_penalty,
                eos,
                defaults| Expected {
        file,
        text,
        temperature,
        top_k,
        top_p,
        repetition_penalty,
        eos,
        defaults,
    };
    vec![
        // No do_sample: greedy, and Hugging Face runs none of the warpers the file sets.
        case(fixture!("llama-2-7b-hf.json"), 0.0, 0, 1.0, 1.0, &[2], &[]),
        case(
            fixture!("falcon-180b-chat.json"),
            0.0,
            0,
            1.0,
            1.0,
            &[11],
            &[],
        ),
        case(fixture!("gpt2.json"), 0.0, 0, 1.0, 1.0, &[50256], &[]),
        case(fixture!("gemma-2-9b-it.json"), 0.0, 0, 1.0, 1.0, &[1], &[]),
        // Sampling without top_k: Hugging Face's 50.
        case(
            fixture!("llama-3.1-8b-instruct.json"),
            0.6,
            50,
            0.9,
            1.0,
            &[128001, 128008, 128009],
            &["top_k"],
        ),
        case(
            fixture!("qwen2.5-7b-instruct.json"),
            0.7,
            20,
            0.8,
            1.05,
            &[151645, 151643],
            &[],
        ),
        case(
            fixture!("qwen3-8b.json"),
            0.6,
            20,
            0.95,
            1.0,
            &[151645, 151643],
            &[],
        ),
    ]
}

#[test]
fn each_published_generation_config_reads_as_hugging_face_decodes_it() {
    for case in cases() {
        let imported = import(case.text, false).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        assert_eq!(imported.format, Format::Hf, "{}", case.file);
        let p = imported.policy().unwrap();
        let expected = Policy {
            engine: Engine::Hf,
            temperature: case.temperature,
            top_k: case.top_k,
            top_p: case.top_p,
            repetition_penalty: case.repetition_penalty,
            eos_token: Some(case.eos[0]),
            extra_eos_tokens: case.eos[1..].to_vec(),
            ..Policy::default()
        };
        assert_eq!(p, expected, "{}", case.file);
        let defaults: Vec<&str> = imported
            .readings
            .iter()
            .filter(|r| r.value == "(not given)" && r.field != "do_sample")
            .map(|r| r.field.as_str())
            .collect();
        assert_eq!(defaults, case.defaults, "{}", case.file);
        // Every key of the file is accounted for, and none is beyond the lab.
        let keys = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(case.text)
            .unwrap()
            .len();
        let read = imported
            .readings
            .iter()
            .filter(|r| r.value != "(not given)")
            .count();
        assert_eq!(read, keys, "{}", case.file);
        assert!(imported
            .readings
            .iter()
            .all(|r| !matches!(r.became, Became::NotUnderstood(_))));
    }
}

#[test]
fn each_published_generation_config_round_trips() {
    for case in cases() {
        let imported = import(case.text, false).unwrap();
        let p = imported.policy().unwrap();
        let written = write(&p, &imported.run, &[], Format::Hf).unwrap();
        let again = import(&written.text, false).unwrap();
        assert_eq!(
            again.policy().unwrap(),
            p,
            "{}:\n{}",
            case.file,
            written.text
        );
        // llama.cpp and vLLM take the end of sequence from the model itself (vLLM merges
        // the generation config's into its stop ids): the rest goes across.
        let rest = Policy {
            eos_token: None,
            extra_eos_tokens: Vec::new(),
            ..p.clone()
        };
        for format in [Format::LlamaCpp, Format::Vllm] {
            let written = write(&rest, &imported.run, &[], format)
                .unwrap_or_else(|e| panic!("{} as {}: {e}", case.file, format.name()));
            let back = import(&written.text, false).unwrap().policy().unwrap();
            // The stages on run in the same order (llama.cpp's line names Hugging Face's
            // with --samplers)...
            assert_eq!(on(&back), on(&rest), "{}", written.text);
            // ...llama.cpp penalises the whole text as Hugging Face does (a window of -1)...
            if format == Format::LlamaCpp && rest.repetition_penalty != 1.0 {
                assert_eq!(back.penalty_last_n, Some(-1), "{}", written.text);
            }
            // ...and, each form's engine its own, the knobs are the same.
            assert_eq!(
                Policy {
                    engine: Engine::Hf,
                    samplers: None,
                    penalty_last_n: None,
                    ..back
                },
                rest,
                "{} as {}:\n{}",
                case.file,
                format.name(),
                written.text
            );
        }
    }
}
