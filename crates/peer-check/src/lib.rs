//! Test only: peers' own readers read what the lab exports. DuckDB queries the tables of
//! `decode-lab export --parquet` with the SQL of `sql/`, the SQL the README shows, and must
//! find the per-version and per-slice p99 TTFT and outcome rates that `observe` reports
//! (`tests/parquet_sql.rs`, through `query.py`); the official OpenTelemetry protobuf
//! definitions decode the spans of `observe::otlp` (`tests/otlp_proto.rs`, through
//! `otlp_check.py`). Both are pinned Python wheels in the virtual environment that
//! `cargo xtask test` makes, named by `PEER_PYTHON`: DuckDB's C++ took 13 of CI's minutes
//! to build from source. Outside the default members, as its tests need that environment.
