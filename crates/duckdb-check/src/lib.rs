//! Test only: DuckDB queries the tables of `decode-lab export --parquet` with the SQL of
//! `sql/`, the SQL the README shows, and must find the per-version and per-slice p99 TTFT and
//! outcome rates that `observe` reports. DuckDB is its prebuilt Python wheel, pinned, in the
//! virtual environment `cargo xtask test` makes (`query.py` asks it); building DuckDB's C++
//! from source took 13 of CI's minutes. Outside the default members: its test needs that
//! environment, named by `DUCKDB_PYTHON`.
