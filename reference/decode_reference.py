"""Reference fixtures for the policy crate, computed with NumPy.

Runs the chapter's decode.py `choose()` verbatim on at least 300 cases and writes one
fixture file per argpartition path. NumPy dispatches np.argpartition on float64 to
x86-simd-sort on x86-64 CPUs with AVX2 (and to another variant with AVX-512); elsewhere it
runs its portable introselect. The paths leave the kept indices in different orders, so
the same seed can pick a different token. make_fixtures.sh runs this script twice, once
per pinned path:

  portable  NPY_DISABLE_CPU_FEATURES = every dispatch target (ARM, old x86, ...)
  x86-avx2  NPY_DISABLE_CPU_FEATURES = the AVX-512 family only (any AVX2 x86-64 CPU;
            the chapter's printed output `2 [0.116 0.238 0.646]` comes from this path)
"""

import json
import os
import sys

import numpy as np
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__


def choose(logits, temperature=0.7, top_k=3, seed=7):
    # The chapter's decode.py, unchanged.
    scaled = np.asarray(logits) / temperature
    keep = np.argpartition(scaled, -top_k)[-top_k:]
    kept = scaled[keep]
    probs = np.exp(kept - kept.max())
    probs /= probs.sum()
    rng = np.random.default_rng(seed)
    return int(rng.choice(keep, p=probs)), probs, keep


def case(name, logits, temperature, top_k, seed):
    logits = [float(x) for x in logits]
    token, probs, keep = choose(logits, temperature, top_k, seed)
    return {
        "name": name,
        "logits": logits,
        "temperature": float(temperature),
        "top_k": int(top_k),
        "seed": int(seed),
        "token": token,
        "kept": [int(i) for i in keep],
        "probs": [float(p) for p in probs],
        "printed": f"{token} {probs.round(3)}",
    }


def check_path(path):
    active = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    expected = {"portable": [], "x86-avx2": ["X86_V3"]}[path]
    if active != expected:
        sys.exit(f"path {path} needs dispatch targets {expected}, found {active}; run make_fixtures.sh")


def main(path, out_path):
    check_path(path)
    gen = np.random.default_rng(20261202)
    temperature = lambda: float(np.round(np.exp(gen.uniform(np.log(0.05), np.log(3.0))), 4))
    seed = lambda: int(gen.integers(0, 2**32)) if gen.random() < 0.9 else int(gen.integers(2**32, 2**63))
    logits = lambda n, scale=3.0: np.round(gen.normal(0.0, scale, size=n), 4)
    cases = [case("chapter example", [1.2, 0.1, 2.4, 1.7], 0.7, 3, 7)]

    # Every top-k of small vocabularies.
    for n in [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17]:
        for k in range(1, n + 1):
            cases.append(case(f"vocab {n} top-k {k}", logits(n), temperature(), k, seed()))
    # Ties: logits on a coarse grid, so argpartition must break them as NumPy does.
    for i in range(100):
        n = int(gen.integers(4, 300))
        k = int(gen.integers(1, n + 1))
        tied = np.round(gen.normal(0.0, 1.0, size=n), 1)
        cases.append(case(f"ties {i} vocab {n} top-k {k}", tied, temperature(), k, seed()))
    # Medium and large vocabularies, edge and middle top-k.
    for n in [33, 64, 100, 129, 257, 1000, 5000]:
        for k in sorted({1, 2, 3, 4, 5, 40, n // 2, n - 3, n - 2, n - 1, n}):
            if 1 <= k <= n:
                cases.append(case(f"vocab {n} top-k {k}", logits(n), temperature(), k, seed()))
    # Adversarial orders that push introselect into its median-of-medians fallback.
    for n in [64, 500, 1001, 4096, 5000]:
        for shape, values in [
            ("ascending", np.arange(n, dtype=float)),
            ("descending", np.arange(n, dtype=float)[::-1].copy()),
            ("rolled", np.roll(np.arange(n, dtype=float), n // 2)),
            ("organ pipe", np.concatenate([np.arange(n // 2), np.arange(n - n // 2)[::-1]]).astype(float)),
        ]:
            k = int(gen.integers(1, n + 1))
            cases.append(case(f"{shape} {n} top-k {k}", values / 100.0, temperature(), k, seed()))

    your_turn = []
    for t in [0.2, 1.5]:
        for s in range(20):
            token, probs, keep = choose([1.2, 0.1, 2.4, 1.7], t, 3, s)
            your_turn.append({"temperature": t, "seed": s, "token": token})

    fixture = {
        "generator": "reference/decode_reference.py (run reference/make_fixtures.sh)",
        "argpartition_path": path,
        "numpy_version": np.__version__,
        "disabled_cpu_features": os.environ.get("NPY_DISABLE_CPU_FEATURES", ""),
        "cases": cases,
        "your_turn": {"logits": [1.2, 0.1, 2.4, 1.7], "top_k": 3, "draws": your_turn},
    }
    with open(out_path, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases and {len(your_turn)} your-turn draws to {out_path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
