//! `decode-lab export --otlp DIR` and `--otlp-endpoint URL`: runs the CLI generated, as
//! OTLP/JSON spans written to a file and posted to a local OTLP/HTTP receiver, which reads
//! them back; an unreachable or refusing collector is named and leaves no partial file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::thread;

mod common;

use common::{decode_lab, ok};
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-otlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Three runs, one with an outcome: the JSONL files.
fn runs() -> (PathBuf, PathBuf, Vec<String>) {
    let mut lines = Vec::new();
    for seed in 1..=3 {
        let seed = seed.to_string();
        lines.push(
            ok(&[
                "generate",
                "--prompt",
                "Insert a table ",
                "--max-tokens",
                "4",
                "--seed",
                &seed,
                "--json",
            ])
            .trim()
            .to_string(),
        );
    }
    let ids: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["run_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let runs = scratch("runs.jsonl");
    std::fs::write(&runs, lines.join("\n") + "\n").unwrap();
    let outcomes = scratch("outcomes.jsonl");
    std::fs::write(
        &outcomes,
        format!(
            "{{\"run_id\":\"{}\",\"outcome\":\"accepted\",\"at_s\":5}}\n",
            ids[0]
        ),
    )
    .unwrap();
    (runs, outcomes, ids)
}

fn spans(request: &Value) -> Vec<Value> {
    request["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
        .clone()
}

/// A request as the receiver saw it: its first line, its content type and its body.
type Received = (String, String, String);

/// A receiver that answers `status` to each of `requests` requests and hands back each
/// request's first line, its content type and its body.
fn receiver(status: &'static str, requests: usize) -> (String, thread::JoinHandle<Vec<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = thread::spawn(move || {
        let mut got = Vec::new();
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            let (mut length, mut kind) = (0usize, String::new());
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                let (name, value) = line.split_once(": ").unwrap();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.parse().unwrap(),
                    "content-type" => kind = value.to_string(),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let answer = "{}";
            write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            )
            .unwrap();
            got.push((
                first.trim_end().to_string(),
                kind,
                String::from_utf8(body).unwrap(),
            ));
        }
        got
    });
    (url, handle)
}

#[test]
fn the_spans_written_are_the_spans_a_collector_receives() {
    let (runs, outcomes, ids) = runs();
    let dir = scratch("traces");
    let (url, receiver) = receiver("200 OK", 1);
    let said = ok(&[
        "export",
        "--otlp",
        dir.to_str().unwrap(),
        "--otlp-endpoint",
        &url,
        runs.to_str().unwrap(),
        "--outcomes",
        outcomes.to_str().unwrap(),
    ]);
    assert!(
        said.contains("exported 3 runs as OpenTelemetry spans"),
        "{said}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("traces.json")).unwrap()).unwrap();
    let written = spans(&written);
    let got = receiver.join().unwrap();
    assert_eq!(got.len(), 1);
    let (first, kind, body) = &got[0];
    assert_eq!(first, "POST /v1/traces HTTP/1.1");
    assert_eq!(kind, "application/json");
    let received = spans(&serde_json::from_str(body).unwrap());
    assert_eq!(received, written);
    let span_ids: Vec<&str> = written
        .iter()
        .map(|s| s["spanId"].as_str().unwrap())
        .collect();
    assert_eq!(span_ids, ids);
    assert_eq!(written[0]["events"].as_array().unwrap().len(), 1);
    assert!(written[1].get("events").is_none());
}

#[test]
fn a_collector_that_cannot_be_reached_or_refuses_is_named_and_no_file_is_left() {
    let (runs, _, _) = runs();
    let dir = scratch("never");
    // A port nobody listens on: bound, then closed.
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let out = decode_lab(&[
        "export",
        "--otlp",
        dir.to_str().unwrap(),
        "--otlp-endpoint",
        &closed,
        runs.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--otlp-endpoint {closed}: cannot connect")),
        "{stderr}"
    );
    assert!(!dir.join("traces.json").exists());

    let (url, receiver) = receiver("400 Bad Request", 1);
    let out = decode_lab(&["export", "--otlp-endpoint", &url, runs.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("it answered 400"), "{stderr}");
    receiver.join().unwrap();
}
