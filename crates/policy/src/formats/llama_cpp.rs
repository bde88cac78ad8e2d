//! A llama.cpp command line (`llama-cli`, `llama-server`, `llama-simple`), its sampling
//! flags as `common/arg.cpp` defines them and their defaults as `common_params_sampling`
//! (`common/common.h`) holds them. llama.cpp switches temperature 0.8, top-k 40, top-p 0.95
//! and min-p 0.05 on by itself; where the line is silent the import sets them, and says so.
//! Its other defaults (the penalty window of 64, XTC's threshold 0.1, DRY's base 1.75 and
//! allowed length 2, mirostat's τ 5 and η 0.1, the sampler order) are the llama.cpp
//! engine's own already.

use super::{num_text, Became, Format, ImportError, Imported, Out, RunSettings};
use crate::chain::{samplers_label, TEMPERATURE_LAST_CHAIN};
use crate::{Engine, Policy, Sampler};

/// llama.cpp's flags that set a knob (`common/arg.cpp`, whose sampling block has no
/// `--min-keep`: only the server's JSON takes `min_keep`), with the knob each sets.
const KNOB_FLAGS: [(&str, &str); 23] = [
    ("--temp", "temperature"),
    ("--dynatemp-range", "dynatemp-range"),
    ("--dynatemp-exp", "dynatemp-exp"),
    ("--top-k", "top-k"),
    ("--top-p", "top-p"),
    ("--min-p", "min-p"),
    ("--typical", "typical"),
    ("--top-nsigma", "top-n-sigma"),
    ("--xtc-probability", "xtc-probability"),
    ("--xtc-threshold", "xtc-threshold"),
    ("--repeat-penalty", "repetition-penalty"),
    ("--repeat-last-n", "penalty-last-n"),
    ("--presence-penalty", "presence-penalty"),
    ("--frequency-penalty", "frequency-penalty"),
    ("--dry-multiplier", "dry-multiplier"),
    ("--dry-base", "dry-base"),
    ("--dry-allowed-length", "dry-allowed-length"),
    ("--dry-penalty-last-n", "dry-penalty-last-n"),
    ("--dry-sequence-breaker", "dry-sequence-breaker"),
    ("--mirostat", "mirostat"),
    ("--mirostat-lr", "mirostat-eta"),
    ("--mirostat-ent", "mirostat-tau"),
    ("--samplers", "samplers"),
];

/// Flags that take a value and do not choose tokens (the model, the prompt, the context,
/// the hardware, the server).
const ELSEWHERE_WITH_VALUE: [&str; 30] = [
    "-m",
    "--model",
    "-p",
    "--prompt",
    "-f",
    "--file",
    "-c",
    "--ctx-size",
    "-ngl",
    "--gpu-layers",
    "--n-gpu-layers",
    "-t",
    "--threads",
    "-b",
    "--batch-size",
    "-ub",
    "--ubatch-size",
    "-hf",
    "--hf-repo",
    "--host",
    "--port",
    "-sys",
    "--system-prompt",
    "--chat-template",
    "-fa",
    "--flash-attn",
    "-np",
    "--parallel",
    "-a",
    "--alias",
];

/// Flags without a value that do not choose tokens.
const ELSEWHERE_ALONE: [&str; 12] = [
    "--color",
    "-cnv",
    "--conversation",
    "-no-cnv",
    "--no-conversation",
    "-i",
    "--interactive",
    "--jinja",
    "-e",
    "--escape",
    "--verbose",
    "--no-warmup",
];

/// Splits a command line as a POSIX shell does for plain words, single and double quotes
/// and backslashes, and joins lines continued with a backslash.
fn words(line: &str) -> Result<Vec<String>, ImportError> {
    let syntax = |message: &str| ImportError::Syntax {
        format: Format::LlamaCpp,
        message: message.to_string(),
    };
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(next) => word.get_or_insert_with(String::new).push(next),
                None => return Err(syntax("it ends with a lone backslash")),
            },
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => w.push(ch),
                        None => return Err(syntax("a single quote is not closed")),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch @ ('"' | '\\' | '$' | '`')) => w.push(ch),
                            Some('\n') => {}
                            Some(ch) => {
                                w.push('\\');
                                w.push(ch);
                            }
                            None => return Err(syntax("a double quote is not closed")),
                        },
                        Some(ch) => w.push(ch),
                        None => return Err(syntax("a double quote is not closed")),
                    }
                }
            }
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

pub(super) fn read(line: &str) -> Result<Imported, ImportError> {
    let mut out = Imported::new(Format::LlamaCpp);
    let words = words(line)?;
    let mut at = 0;
    // The program: a first word that is not a flag.
    if words.first().is_some_and(|w| !w.starts_with('-')) {
        out.left_alone(&words[0], "", "the program");
        at = 1;
    }
    if words.len() == at {
        return Err(ImportError::Syntax {
            format: Format::LlamaCpp,
            message: "it has no flags".into(),
        });
    }
    let (mut temperature, mut top_k, mut top_p, mut min_p) = (false, false, false, false);
    let mut mirostat = false;
    // Every `-l` adds to the biases and the forbidden ids: one knob each, after the line.
    let (mut biases, mut forbidden): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    while at < words.len() {
        // `--flag=value` is `--flag value`.
        let (flag, inline) = match words[at].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (words[at].clone(), None),
        };
        at += 1;
        let value = |at: &mut usize| -> Result<String, ImportError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = words.get(*at).cloned().ok_or_else(|| ImportError::Field {
                field: flag.clone(),
                value: "nothing".into(),
                expected: "followed by a value",
            })?;
            *at += 1;
            Ok(v)
        };
        if !flag.starts_with('-') {
            out.not_understood(&flag, "", "a word where a flag was expected");
            continue;
        }
        if let Some((_, knob)) = KNOB_FLAGS.iter().find(|(name, _)| *name == flag) {
            let v = value(&mut at)?;
            let text = match *knob {
                // llama.cpp turns top-nσ off with -1, and top-k with 0 or less.
                "top-n-sigma" => match v.trim().parse::<f64>() {
                    Ok(n) if n <= 0.0 => String::new(),
                    _ => v.clone(),
                },
                "top-k" => match v.trim().parse::<i64>() {
                    Ok(k) if k < 0 => "0".to_string(),
                    _ => v.clone(),
                },
                "samplers" => canonical_samplers(&v),
                _ => v.clone(),
            };
            match *knob {
                "temperature" => temperature = true,
                "mirostat" => mirostat = v.trim() != "0",
                "top-k" => top_k = true,
                "top-p" => top_p = true,
                "min-p" => min_p = true,
                _ => {}
            }
            let knob = super::knob(knob).flag;
            out.knob(&flag, &v, knob, text);
            continue;
        }
        match flag.as_str() {
            "-s" | "--seed" => {
                let v = value(&mut at)?;
                match v.trim().parse::<i64>() {
                    // LLAMA_DEFAULT_SEED: a fresh seed each run.
                    Ok(-1) => out.left_alone(&flag, v, "a random seed: the command's seed stays"),
                    Ok(seed) if seed >= 0 => {
                        out.run.seed = Some(seed as u64);
                        out.read(&flag, &v, Became::Run(format!("--seed {seed}")));
                    }
                    _ => {
                        return Err(ImportError::Field {
                            field: flag,
                            value: format!("{v:?}"),
                            expected: "a whole number, or -1 for a random seed",
                        })
                    }
                }
            }
            "-n" | "--n-predict" | "--predict" => {
                let v = value(&mut at)?;
                match v.trim().parse::<i64>() {
                    Ok(n) if n < 0 => {
                        out.left_alone(&flag, v, "no limit: the command's --max-tokens stays")
                    }
                    Ok(n) => {
                        out.run.max_tokens = Some(n as usize);
                        out.read(&flag, &v, Became::Run(format!("--max-tokens {n}")));
                    }
                    Err(_) => {
                        return Err(ImportError::Field {
                            field: flag,
                            value: format!("{v:?}"),
                            expected: "a whole number",
                        })
                    }
                }
            }
            "-l" | "--logit-bias" => {
                let v = value(&mut at)?;
                let (flag_name, text) = logit_bias(&flag, &v)?;
                match flag_name {
                    "forbid" => forbidden.push(text.clone()),
                    _ => biases.push(text.clone()),
                }
                out.read(&flag, &v, Became::Knob(flag_name, text));
            }
            "--sampling-seq" | "--sampler-seq" => {
                let v = value(&mut at)?;
                let names = sequence(&flag, &v)?;
                out.knob(&flag, &v, "samplers", names);
            }
            f if ELSEWHERE_WITH_VALUE.contains(&f) => {
                let v = value(&mut at)?;
                out.left_alone(&flag, v, "not a decoding setting");
            }
            f if ELSEWHERE_ALONE.contains(&f) => {
                out.left_alone(&flag, "", "not a decoding setting")
            }
            // llama.cpp: "implies --logit-bias EOS-inf", the model's own end id.
            "--ignore-eos" => out.not_understood(
                &flag,
                "",
                "the end-of-sequence id is the model's: forbid it with --forbid ID",
            ),
            _ => {
                // Its value, if the next word is one, goes with it.
                let v = match words.get(at) {
                    Some(w) if inline.is_none() && !w.starts_with('-') => {
                        at += 1;
                        w.clone()
                    }
                    _ => inline.clone().unwrap_or_default(),
                };
                out.not_understood(
                    &flag,
                    v,
                    "not one of llama.cpp's sampling flags this lab reads",
                )
            }
        }
    }
    for (flag, texts) in [("bias", biases), ("forbid", forbidden)] {
        if !texts.is_empty() {
            out.knobs
                .push((super::knob(flag), texts.join(","), "--logit-bias".into()));
        }
    }
    // A chain given runs only its samplers: llama.cpp's defaults act through it; mirostat
    // replaces the chain, and so the truncations it would switch on.
    let chain = out.policy().ok().and_then(|p| p.samplers);
    for (given, sampler, field, flag, text) in [
        (
            temperature,
            Sampler::Temperature,
            "--temp",
            "temperature",
            "0.8",
        ),
        (top_k, Sampler::TopK, "--top-k", "top-k", "40"),
        (top_p, Sampler::TopP, "--top-p", "top-p", "0.95"),
        (min_p, Sampler::MinP, "--min-p", "min-p", "0.05"),
    ] {
        let runs = chain.as_ref().is_none_or(|c| c.contains(&sampler));
        if !given && runs && (!mirostat || sampler == Sampler::Temperature) {
            out.default(field, flag, text);
        }
    }
    Ok(out)
}

/// `--samplers` with llama.cpp's other names for its samplers
/// (`common_sampler_types_from_names` with `allow_alt_names`) written as their own.
fn canonical_samplers(list: &str) -> String {
    list.split(';')
        .map(|name| match name.trim() {
            "top-k" => "top_k",
            "top-p" | "nucleus" => "top_p",
            "top-n-sigma" => "top_n_sigma",
            "typical-p" | "typical" | "typ-p" | "typ" => "typ_p",
            "min-p" => "min_p",
            "temp" => "temperature",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// `--logit-bias TOKEN(+|-)BIAS`: a bias of `-inf` forbids the token.
fn logit_bias(flag: &str, v: &str) -> Result<(&'static str, String), ImportError> {
    let bad = || ImportError::Field {
        field: flag.to_string(),
        value: format!("{v:?}"),
        expected: "a token id, then + or - and a bias (15043+1, 15043-inf)",
    };
    let at = v
        .char_indices()
        .skip(1)
        .find(|(_, c)| matches!(c, '+' | '-'))
        .map(|(i, _)| i)
        .ok_or_else(bad)?;
    let id: u32 = v[..at].trim().parse().map_err(|_| bad())?;
    let bias = &v[at..];
    if bias == "-inf" {
        return Ok(("forbid", id.to_string()));
    }
    let bias: f64 = bias.parse().map_err(|_| bad())?;
    if !bias.is_finite() {
        return Err(bad());
    }
    Ok(("bias", format!("{id}:{}", num_text(bias))))
}

/// `--sampling-seq`: one letter per sampler, as `common/sampling.cpp` reads them.
fn sequence(flag: &str, v: &str) -> Result<String, ImportError> {
    let names: Vec<&str> = v
        .chars()
        .map(|c| {
            Ok(match c {
                'e' => "penalties",
                'd' => "dry",
                's' => "top_n_sigma",
                'k' => "top_k",
                'y' => "typ_p",
                'p' => "top_p",
                'm' => "min_p",
                'x' => "xtc",
                't' => "temperature",
                _ => {
                    return Err(ImportError::Field {
                        field: flag.to_string(),
                        value: format!("{c:?} in {v:?}"),
                        expected: "one of llama.cpp's sampler letters (e d s k y p m x t)",
                    })
                }
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(names.join(";"))
}

pub(super) fn write(policy: &Policy, run: &RunSettings, breakers: &[String], out: &mut Out) {
    let why = "llama.cpp has no such sampler";
    for flag in [
        "epsilon-cutoff",
        "eta-cutoff",
        "top-h",
        "no-repeat-ngram",
        "bad-words",
        "sequence-bias",
        "min-new-tokens",
    ] {
        out.refuse_unless_default(policy, flag, why);
    }
    out.refuse_penalty_counts(policy, Engine::LlamaCpp);
    out.leave_out_vocabulary(run);
    out.refuse_unless_default(
        policy,
        "min-keep",
        "llama.cpp's command line has no min-keep (its server's JSON has)",
    );
    out.refuse_unless_default(
        policy,
        "eos",
        "llama.cpp ends at the model's own end of generation",
    );
    let line = &mut out.line;
    line.push("llama-cli".into());
    let mut flag = |name: &str, value: String| {
        line.push(name.into());
        line.push(quoted(&value));
    };
    // Written even when off, where the chain runs them: llama.cpp switches them on by
    // itself.
    let runs = |s: Sampler| policy.chain().contains(&s);
    if runs(Sampler::Temperature) {
        flag("--temp", num_text(policy.temperature));
    }
    if policy.dynatemp_range != 0.0 {
        flag("--dynatemp-range", num_text(policy.dynatemp_range));
    }
    if policy.dynatemp_exponent != 1.0 {
        flag("--dynatemp-exp", num_text(policy.dynatemp_exponent));
    }
    if runs(Sampler::TopK) {
        flag("--top-k", policy.top_k.to_string());
    }
    if runs(Sampler::TopP) {
        flag("--top-p", num_text(policy.top_p));
    }
    if runs(Sampler::MinP) {
        flag("--min-p", num_text(policy.min_p));
    }
    // A chain of the policy's own, or llama.cpp's order unless the policy's differs among
    // the stages it has on.
    if policy.samplers.is_some() || super::order_against(policy, &TEMPERATURE_LAST_CHAIN).is_some()
    {
        let chain: Vec<Sampler> = policy
            .chain()
            .iter()
            .copied()
            .filter(|s| !matches!(s, Sampler::Epsilon | Sampler::Eta | Sampler::TopH))
            .collect();
        flag("--samplers", samplers_label(&chain));
    }
    for (name, x, off) in [
        ("--typical", policy.typical_p, 1.0),
        ("--repeat-penalty", policy.repetition_penalty, 1.0),
        ("--presence-penalty", policy.presence_penalty, 0.0),
        ("--frequency-penalty", policy.frequency_penalty, 0.0),
        ("--xtc-probability", policy.xtc_probability, 0.0),
    ] {
        if x != off {
            flag(name, num_text(x));
        }
    }
    if policy.xtc_probability > 0.0 {
        flag("--xtc-threshold", num_text(policy.xtc_threshold));
    }
    match policy.penalty_last_n {
        Some(n) => flag("--repeat-last-n", n.to_string()),
        // Hugging Face and vLLM penalise the whole text: llama.cpp's -1.
        None if policy.engine != Engine::LlamaCpp && policy.repetition_penalty != 1.0 => {
            flag("--repeat-last-n", "-1".to_string())
        }
        None => {}
    }
    if let Some(n) = policy.top_n_sigma {
        flag("--top-nsigma", num_text(n));
    }
    if policy.dry_multiplier != 0.0 {
        flag("--dry-multiplier", num_text(policy.dry_multiplier));
        flag("--dry-base", num_text(policy.dry_base));
        flag(
            "--dry-allowed-length",
            policy.dry_allowed_length.to_string(),
        );
        flag(
            "--dry-penalty-last-n",
            policy.dry_penalty_last_n.to_string(),
        );
        for b in breakers {
            flag("--dry-sequence-breaker", b.clone());
        }
    }
    if policy.mirostat != 0 {
        flag("--mirostat", policy.mirostat.to_string());
        flag("--mirostat-lr", num_text(policy.mirostat_eta));
        flag("--mirostat-ent", num_text(policy.mirostat_tau));
    }
    for &(id, bias) in &policy.logit_bias {
        let sign = if bias < 0.0 { "" } else { "+" };
        flag("--logit-bias", format!("{id}{sign}{}", num_text(bias)));
    }
    for &id in &policy.forbidden {
        flag("--logit-bias", format!("{id}-inf"));
    }
    if let Some(seed) = run.seed {
        flag("--seed", seed.to_string());
    }
    if let Some(n) = run.max_tokens {
        flag("-n", n.to_string());
    }
    for (given, name) in [
        (!run.stop.is_empty(), "stop strings"),
        (!run.stop_tokens.is_empty(), "stop tokens"),
    ] {
        if given {
            out.left_out.push(name.to_string());
        }
    }
}

/// A word as a shell reads it back: quoted when it holds anything but plain characters.
pub(super) fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,:+/=@%".contains(c));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}
