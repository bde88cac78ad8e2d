//! Test only: peers' own readers read what the lab exports. DuckDB queries the tables of
//! `decode-lab export --parquet` with the SQL of `sql/`, the SQL the README shows, and must
//! find the per-version and per-slice p99 TTFT and outcome rates that `observe` reports
//! (`tests/parquet_sql.rs`, through `query.py`); the official OpenTelemetry protobuf
//! definitions decode the spans of `observe::otlp` (`tests/otlp_proto.rs`, through
//! `otlp_check.py`). Both are pinned Python wheels in the virtual environment that
//! `cargo xtask test` makes, named by `PEER_PYTHON`: DuckDB's C++ took 13 of CI's minutes
//! to build from source. Outside the default members, as its tests need that environment.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs the script `name` of this crate with the Python of `PEER_PYTHON`, `input` on its
/// standard input; its output, whatever its exit status.
pub fn python(name: &str, input: &str) -> Output {
    let python = std::env::var_os("PEER_PYTHON").expect(
        "PEER_PYTHON names no Python: run `cargo xtask test`, which makes target/python with the pinned wheels",
    );
    let mut child = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(name))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.to_string_lossy()));
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input.as_bytes())
        .expect("the script reads its input");
    child.wait_with_output().expect("the script ends")
}
