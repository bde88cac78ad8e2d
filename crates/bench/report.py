#!/usr/bin/env python3
"""Tabulate the policy_step benchmark medians as Markdown.

Reads criterion's target/criterion/policy_step_V<V>/<contender>/<setting>/new/estimates.json
(median.point_estimate, in ns) and prints one row per vocabulary size V: medians in µs
for every contender, then candle/ours and ours/floor for both settings.

Usage: python3 crates/bench/report.py [CRITERION_DIR]   (default: target/criterion
relative to the workspace root, i.e. two levels above this file)
"""

import json
import re
import sys
from pathlib import Path

SETTINGS = ["topk50_topp0.9", "topp0.9"]
COLUMNS = [
    ("ours", "topk50_topp0.9"),
    ("candle", "topk50_topp0.9"),
    ("ours", "topp0.9"),
    ("candle", "topp0.9"),
    ("floor", "read"),
]


def median_us(criterion_dir, group, contender, setting):
    path = criterion_dir / group / contender / setting / "new" / "estimates.json"
    try:
        with open(path) as f:
            return json.load(f)["median"]["point_estimate"] / 1000.0
    except (OSError, KeyError, ValueError):
        return None


def fmt_us(value):
    if value is None:
        return "n/a"
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def fmt_ratio(num, den):
    if num is None or den is None or den == 0:
        return "n/a"
    return f"{num / den:.1f}x"


def main():
    default = Path(__file__).resolve().parents[2] / "target" / "criterion"
    criterion_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    groups = []
    for entry in criterion_dir.glob("policy_step_V*"):
        m = re.fullmatch(r"policy_step_V(\d+)", entry.name)
        if m and entry.is_dir():
            groups.append((int(m.group(1)), entry.name))
    if not groups:
        sys.exit(f"no policy_step_V* results under {criterion_dir}; run "
                 "`cargo bench -p policy-bench --bench policy_step` first")
    groups.sort()

    header = ["V"]
    header += [f"{c}/{s} (µs)" for c, s in COLUMNS]
    header += [f"candle/ours {s}" for s in SETTINGS]
    header += [f"ours/floor {s}" for s in SETTINGS]
    header += ["ours ns/elem topk50_topp0.9", "ours ns/elem topp0.9"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" for _ in header) + "|")
    for vocab, group in groups:
        m = {(c, s): median_us(criterion_dir, group, c, s) for c, s in COLUMNS}
        floor = m[("floor", "read")]
        row = [str(vocab)]
        row += [fmt_us(m[key]) for key in COLUMNS]
        row += [fmt_ratio(m[("candle", s)], m[("ours", s)]) for s in SETTINGS]
        row += [fmt_ratio(m[("ours", s)], floor) for s in SETTINGS]
        for s in SETTINGS:
            ours = m[("ours", s)]
            row.append("n/a" if ours is None else f"{ours * 1000.0 / vocab:.2f}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
