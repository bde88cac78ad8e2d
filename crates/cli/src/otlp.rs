//! `decode-lab export --otlp DIR` and `--otlp-endpoint URL`: run records and their outcomes
//! as OpenTelemetry spans in OTLP/JSON ([`observe::otlp`] makes each span), written to
//! `DIR/traces.json` and posted, in requests of [`SPANS_PER_REQUEST`], to an OTLP/HTTP
//! collector.
//!
//! Runs are read and checked as `export --parquet` reads them: a line that is not a record
//! is named and left out (exit 1), a run given twice is exported once. The file is staged
//! and moved into place only when every run is written and every request was accepted: a
//! failed export leaves no partial file (the requests a collector already accepted stay
//! with it). The collector is plain HTTP (`http://HOST:PORT[/PATH]`, the path `/v1/traces`
//! when none is given), as a Collector's OTLP/HTTP receiver listens on a trusted network.

use std::collections::HashMap;
use std::io::{BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use observe::Outcome;

use crate::error::{CliError, OutputAction};
use crate::files::{self, StagedDir};
use crate::named::Named;
use crate::observe::{identifier, outcome_rows};
use crate::output;
use crate::ExportArgs;

/// The spans of one request to a collector (its memory is bounded by this).
pub const SPANS_PER_REQUEST: usize = 512;
/// How long a collector may take to accept a connection, and to answer.
const TIMEOUT: Duration = Duration::from_secs(10);
const FILE: &str = "traces.json";

/// Where the spans go.
struct Sinks {
    file: Option<(StagedDir, BufWriter<std::fs::File>)>,
    endpoint: Option<Endpoint>,
    batch: Vec<String>,
    spans: u64,
    requests: u64,
}

pub fn run(args: &ExportArgs) -> Result<ExitCode, CliError> {
    let endpoint = args
        .otlp_endpoint
        .as_deref()
        .map(Endpoint::parse)
        .transpose()?;
    let (langid, inputs) = crate::export::inputs(args);
    let file = match &args.otlp {
        Some(out) => {
            let out = Named::new("--otlp", out);
            let outputs = [out.clone(), Named::new("--otlp", out.path.join(FILE))];
            files::check(&outputs, &inputs)?;
            let stage = StagedDir::new(&out)?;
            let created = stage.create(FILE)?;
            Some((stage, BufWriter::new(created)))
        }
        None => {
            files::check(&[], &inputs)?;
            None
        }
    };
    let identifier = identifier(&langid)?;
    let outcomes = match &args.outcomes {
        Some(path) => read_outcomes(path)?,
        None => HashMap::new(),
    };
    let version = env!("CARGO_PKG_VERSION");
    let (head, tail) = observe::otlp::envelope(version);
    let mut sinks = Sinks {
        file,
        endpoint,
        batch: Vec::new(),
        spans: 0,
        requests: 0,
    };
    sinks.write(&head)?;
    let left = crate::export::each_run(args, &identifier, |_, record, slice| {
        let joined: Vec<&Outcome> = record
            .run_id
            .as_ref()
            .and_then(|id| outcomes.get(id))
            .map(|list| list.iter().collect())
            .unwrap_or_default();
        match observe::otlp::span(record, slice, &joined) {
            Some(span) => sinks.span(span.to_string(), &head, &tail),
            None => Ok(()),
        }
    })?;
    sinks.flush(&head, &tail)?;
    sinks.write(&tail)?;
    let mut said = format!("exported {} runs as OpenTelemetry spans", sinks.spans);
    let to_file = sinks.file.is_some();
    if let Some((stage, writer)) = sinks.file.take() {
        let out = args.otlp.as_deref().unwrap_or(Path::new(""));
        let file = writer
            .into_inner()
            .map_err(|e| write_failed(out)(e.into_error()))?;
        file.sync_all().map_err(write_failed(out))?;
        drop(file);
        stage.commit(&[FILE])?;
        said += &format!(" to {}", out.join(FILE).display());
    }
    if let Some(endpoint) = &sinks.endpoint {
        said += &format!(
            "{} {} in {} requests",
            if to_file { " and" } else { " to" },
            endpoint.url,
            sinks.requests
        );
    }
    said += &left.words();
    output::print_line(&said)?;
    Ok(left.exit_code())
}

impl Sinks {
    fn write(&mut self, text: &str) -> Result<(), CliError> {
        if let Some((stage, writer)) = &mut self.file {
            writer
                .write_all(text.as_bytes())
                .map_err(write_failed(stage.path()))?;
        }
        Ok(())
    }

    fn span(&mut self, span: String, head: &str, tail: &str) -> Result<(), CliError> {
        if self.spans > 0 {
            self.write(",")?;
        }
        self.write(&span)?;
        self.spans += 1;
        if self.endpoint.is_some() {
            self.batch.push(span);
            if self.batch.len() == SPANS_PER_REQUEST {
                self.flush(head, tail)?;
            }
        }
        Ok(())
    }

    /// Posts the spans waiting, as one request.
    fn flush(&mut self, head: &str, tail: &str) -> Result<(), CliError> {
        let Some(endpoint) = &self.endpoint else {
            return Ok(());
        };
        if self.batch.is_empty() {
            return Ok(());
        }
        let body = format!("{head}{}{tail}", self.batch.join(","));
        endpoint.post(body.as_bytes())?;
        self.batch.clear();
        self.requests += 1;
        Ok(())
    }
}

/// A write into `--otlp DIR` that failed.
fn write_failed(dir: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |source| CliError::Output {
        output: Named::new("--otlp", dir.join(FILE)),
        action: OutputAction::Write,
        source,
    }
}

/// Outcome rows by run id, each checked by `observe`'s rule.
fn read_outcomes(path: &Path) -> Result<HashMap<String, Vec<Outcome>>, CliError> {
    let mut by_run: HashMap<String, Vec<Outcome>> = HashMap::new();
    outcome_rows(path, |outcome| {
        by_run
            .entry(outcome.run_id.clone())
            .or_default()
            .push(outcome);
        Ok(())
    })?;
    Ok(by_run)
}

/// An OTLP/HTTP collector's address.
struct Endpoint {
    url: String,
    host: String,
    port: u16,
    path: String,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Endpoint, CliError> {
        let bad = |why: &str| CliError::Flag {
            flag: "--otlp-endpoint",
            value: url.to_string(),
            why: why.to_string(),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("expected http://HOST:PORT[/PATH] (plain OTLP/HTTP, as a collector's receiver serves it)"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        // An IPv6 address is bracketed: `[::1]:4318`.
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => {
                let (host, after) = bracketed
                    .split_once(']')
                    .ok_or_else(|| bad("an IPv6 host's bracket is not closed"))?;
                let port = match after {
                    "" => None,
                    _ => Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| bad("expected :PORT after the host"))?,
                    ),
                };
                (host, port)
            }
            None => match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let port = match port {
            Some(port) => port
                .parse::<u16>()
                .map_err(|_| bad("the port must be a number from 0 to 65535"))?,
            None => 4318,
        };
        if host.is_empty() {
            return Err(bad("expected a host"));
        }
        Ok(Endpoint {
            url: url.to_string(),
            host: host.to_string(),
            port,
            path: match path {
                "" | "/" => "/v1/traces".to_string(),
                p => p.to_string(),
            },
        })
    }

    /// Posts one request; anything but a 2xx answer is an error naming the address.
    fn post(&self, body: &[u8]) -> Result<(), CliError> {
        let failed = |why: String| CliError::Otlp {
            endpoint: self.url.clone(),
            why,
        };
        let addresses: Vec<_> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| failed(format!("cannot resolve {}: {e}", self.host)))?
            .collect();
        // Each address the name has, in turn (`localhost` may be ::1 and 127.0.0.1).
        let mut last = None;
        let mut connected = None;
        for address in &addresses {
            match TcpStream::connect_timeout(address, TIMEOUT) {
                Ok(stream) => {
                    connected = Some(stream);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let mut stream = connected.ok_or_else(|| match last {
            Some(e) => failed(format!("cannot connect: {e}")),
            None => failed(format!("{} has no address", self.host)),
        })?;
        stream
            .set_read_timeout(Some(TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| failed(e.to_string()))?;
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.path,
            match self.host.contains(':') {
                true => format!("[{}]", self.host),
                false => self.host.clone(),
            },
            self.port,
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body))
            .map_err(|e| failed(format!("cannot send: {e}")))?;
        let mut answer = Vec::new();
        stream
            .take(64 * 1024)
            .read_to_end(&mut answer)
            .map_err(|e| failed(format!("no answer: {e}")))?;
        let answer = String::from_utf8_lossy(&answer);
        let status = answer
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|code| code.parse::<u16>().ok())
            .ok_or_else(|| failed("the answer is not HTTP".into()))?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").trim();
            Err(failed(format!(
                "it answered {status}{}",
                if body.is_empty() {
                    String::new()
                } else {
                    format!(": {}", policy::Excerpt(body))
                }
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_read_with_its_defaults_and_an_ipv6_host() {
        let at = |url: &str| {
            let e = Endpoint::parse(url).unwrap();
            (e.host, e.port, e.path)
        };
        assert_eq!(
            at("http://collector"),
            ("collector".into(), 4318, "/v1/traces".into())
        );
        assert_eq!(
            at("http://127.0.0.1:4000/"),
            ("127.0.0.1".into(), 4000, "/v1/traces".into())
        );
        assert_eq!(
            at("http://h:1/otlp/v1/traces"),
            ("h".into(), 1, "/otlp/v1/traces".into())
        );
        assert_eq!(
            at("http://[::1]/v1/traces"),
            ("::1".into(), 4318, "/v1/traces".into())
        );
        assert_eq!(
            at("http://[::1]:4319"),
            ("::1".into(), 4319, "/v1/traces".into())
        );
        for bad in [
            "https://h",
            "http://",
            "http://[::1",
            "http://[::1]x",
            "http://h:x",
            "http://::1",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
