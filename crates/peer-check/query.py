"""DuckDB, from its prebuilt Python wheel, answers the check's SQL over an export.

Reads a JSON object from standard input, {"dir": DIR, "views": SQL, "queries": [SQL, ...]},
and writes a JSON list to standard output: for each query, its rows as lists. Python's JSON
writes each double as its shortest round-trip text, so the test compares them exactly.
In memory, with extensions neither loaded nor installed: the wheel links the Parquet reader
in, and nothing may be fetched at run time.
"""

import json
import sys

import duckdb


def main():
    job = json.load(sys.stdin)
    db = duckdb.connect(
        ":memory:",
        config={
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
        },
    )
    db.execute(job["views"].replace("DIR", job["dir"]))
    answers = [[list(row) for row in db.execute(sql).fetchall()] for sql in job["queries"]]
    json.dump({"version": duckdb.__version__, "answers": answers}, sys.stdout)


if __name__ == "__main__":
    main()
