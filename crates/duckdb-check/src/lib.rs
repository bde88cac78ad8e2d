//! Test only: DuckDB (built from its bundled sources, with its Parquet reader linked in)
//! queries the tables of `decode-lab export --parquet` with the SQL of `sql/`, the SQL the
//! README shows, and must find the per-version and per-slice p99 TTFT and outcome rates that
//! `observe` reports. Outside the default members: DuckDB's C++ takes long to build.
