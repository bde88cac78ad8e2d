//! The observation worker's formatting: an [`observe::Report`] becomes the
//! [`ObserveDisplay`] the page draws — the versions × slices table, p99 TTFT and the outcome
//! rate per version and slice as charts with their tables, the drift against the baseline
//! with its detectors and the rollback target, input quality and predictions, the rejected
//! lines (the `observe` crate's parts, [`observe::parts`], which the CLI writes as
//! Markdown), and the alternatives' table. Built only with the `observer` feature.

use observe::{Report, RunLineError};
use report::{Block, Part, Row, Table};
use serde::Deserialize;

use crate::observer::error::ObserverError;
use crate::observer::protocol::ObserveDisplay;
use crate::widgets::markup::html;

/// The alternatives' table as `decode-lab eval --alternatives --lab-table` writes it: the
/// CLI's own rows and conclusions, in words.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct AlternativesTable {
    pub caption: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub conclusions: Vec<String>,
}

/// Splits a stream of bytes into lines, numbered from 1, as the chunks arrive: a line may
/// span chunks. Blank lines are counted and skipped; a line that is not UTF-8 is handed on
/// as the reason it cannot be read ([`RunLineError::NotUtf8`]).
#[derive(Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    read: u64,
}

impl LineSplitter {
    pub fn feed(&mut self, chunk: &[u8], line: &mut dyn FnMut(u64, Result<&str, RunLineError>)) {
        let mut start = 0;
        for (i, _) in chunk.iter().enumerate().filter(|(_, b)| **b == b'\n') {
            if self.pending.is_empty() {
                self.emit(&chunk[start..i], line);
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(&chunk[start..i]);
                self.emit(&whole, line);
            }
            start = i + 1;
        }
        self.pending.extend_from_slice(&chunk[start..]);
    }

    /// The last line, when the stream does not end with a newline.
    pub fn finish(&mut self, line: &mut dyn FnMut(u64, Result<&str, RunLineError>)) {
        if !self.pending.is_empty() {
            let last = std::mem::take(&mut self.pending);
            self.emit(&last, line);
        }
    }

    /// Lines read so far, blank ones included.
    pub fn read(&self) -> u64 {
        self.read
    }

    fn emit(&mut self, bytes: &[u8], line: &mut dyn FnMut(u64, Result<&str, RunLineError>)) {
        self.read += 1;
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        match std::str::from_utf8(bytes) {
            Ok(text) if text.trim().is_empty() => {}
            Ok(text) => line(self.read, Ok(text)),
            Err(e) => line(self.read, Err(RunLineError::NotUtf8(e))),
        }
    }
}

/// The report, formatted; `alternatives` is the shipped table, or why it could not be read.
pub fn observe_display(
    report: &Report,
    alternatives: Result<AlternativesTable, ObserverError>,
) -> ObserveDisplay {
    let candidates = report.drift.as_ref().map_or(&[][..], |d| &d.candidates[..]);
    let decision = ["stop", "insufficient-data", "continue"]
        .into_iter()
        .find(|d| candidates.iter().any(|c| c.verdict.decision == *d))
        .unwrap_or_default()
        .to_string();
    let mut parts = observe::parts::parts(report);
    parts.push(alternatives_part(alternatives));
    ObserveDisplay {
        summary: observe::parts::summary(report),
        versions: report
            .versions
            .iter()
            .map(|v| {
                let key = &v.key;
                let precision = key.precision.map_or("unrecorded", |p| p.name());
                let label = format!(
                    "{} · temperature {}, {precision} weights, {} runs",
                    v.version_id, key.policy.temperature, v.summary.runs
                );
                (v.version_id.clone(), label)
            })
            .collect(),
        baseline: report.drift.as_ref().map(|d| d.baseline.clone()),
        verdicts: candidates
            .iter()
            .map(|c| format!("{}: {}", c.version_id, c.verdict.words))
            .collect(),
        decision,
        parts_html: html(&parts),
    }
}

fn alternatives_part(alternatives: Result<AlternativesTable, ObserverError>) -> Part {
    let blocks = match alternatives {
        Ok(a) => {
            let headers: Vec<&str> = a.columns.iter().map(String::as_str).collect();
            let rows = a
                .rows
                .iter()
                .filter(|r| !r.is_empty())
                .map(|r| Row::texts(r))
                .collect();
            vec![
                Block::Table(Table::mirror(
                    "obs-alternatives-table",
                    &a.caption,
                    &headers,
                    rows,
                )),
                Block::List {
                    class: "obs-conclusions".into(),
                    items: a.conclusions,
                },
            ]
        }
        Err(why) => vec![Block::Text(why.to_string())],
    };
    Part {
        id: "obs-part-alternatives".into(),
        title: "The alternatives: a rule, an n-gram and retrieval".into(),
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<(u64, Result<String, String>)> {
        let mut out = Vec::new();
        let mut splitter = LineSplitter::default();
        let mut take = |n: u64, l: Result<&str, RunLineError>| {
            out.push((n, l.map(str::to_string).map_err(|e| e.to_string())))
        };
        for chunk in chunks {
            splitter.feed(chunk, &mut take);
        }
        splitter.finish(&mut take);
        out
    }

    /// Against `str::lines` on the whole text, however the bytes are cut.
    #[test]
    fn lines_are_the_same_however_the_stream_is_cut() {
        let text = "{\"a\":1}\r\n\n  \n{\"b\":2}\nlast é";
        let whole: Vec<(u64, Result<String, String>)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i as u64 + 1, Ok(l.to_string())))
            .collect();
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            for second in cut..bytes.len() {
                let got = lines(&[&bytes[..cut], &bytes[cut..second], &bytes[second..]]);
                assert_eq!(got, whole, "cut at {cut} and {second}");
            }
        }
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named_by_its_number() {
        let got = lines(&[b"ok\n\xff\xfe\nfine\n"]);
        assert_eq!(got[0], (1, Ok("ok".into())));
        assert_eq!(got[1].0, 2);
        assert!(got[1].1.as_ref().unwrap_err().contains("not UTF-8"));
        assert_eq!(got[2], (3, Ok("fine".into())));
    }
}
