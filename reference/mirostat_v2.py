#!/usr/bin/env python3
"""Mirostat 2.0, line by line after llama.cpp's llama_sampler_mirostat_v2_apply
(src/llama-sampling.cpp at c392e509; docs/modern-samplers.md quotes it), in plain Python
floats (f64), writing the fixture crates/policy/tests/fixtures/mirostat_v2.json.

Two things differ from llama.cpp on purpose, as the lab does:
- the draw: llama.cpp samples the truncated, renormalised candidates with its own
  std::mt19937 in sorted order; the lab uses the run's NumPy stream and looks the draw up
  in ascending token id, as NumPy's Generator.choice does. The fixture lists the draws.
- ties in probability are sorted by token id, lower first (std::sort leaves them open).

Usage: python3 reference/mirostat_v2.py > crates/policy/tests/fixtures/mirostat_v2.json
"""
import json
import math


def lcg(seed):
    """A small deterministic stream of floats in [0, 1), so the fixture needs no library."""
    state = seed
    while True:
        state = (6364136223846793005 * state + 1442695040888963407) % 2**64
        yield (state >> 11) / 2**53


def softmax(logits, t):
    m = max(logits)
    w = [math.exp((l - m) / t) for l in logits]
    s = sum(w)
    return [x / s for x in w]


def run(case_seed, vocab, steps, tau, eta, temperature):
    stream = lcg(case_seed)
    mu = 2.0 * tau  # llama_sampler_mirostat_v2: mu = 2.0f * tau
    out = []
    for _ in range(steps):
        logits = [round(6.0 * next(stream) - 3.0, 6) for _ in range(vocab)]
        draw = next(stream)
        # llama_sampler_temp then llama_sampler_softmax_impl: sorted by logit, descending.
        probs = softmax(logits, temperature)
        order = sorted(range(vocab), key=lambda i: (-probs[i], i))
        # "Truncate the words with surprise values greater than mu"
        size = next((k for k, i in enumerate(order) if -math.log2(probs[i]) > mu), vocab)
        size = max(size, 1)
        kept = sorted(order[:size])
        # "Normalize the probabilities of the remaining words"
        total = sum(probs[i] for i in kept)
        renorm = {i: probs[i] / total for i in kept}
        # The draw, looked up in ascending id as Generator.choice does.
        cum, chosen = 0.0, kept[-1]
        for i in kept:
            cum += renorm[i]
            if cum > draw:
                chosen = i
                break
        observed_surprise = -math.log2(renorm[chosen])
        e = observed_surprise - tau
        next_mu = mu - eta * e
        out.append({"logits": logits, "draw": draw, "mu": mu, "kept": kept,
                    "token": chosen, "next_mu": next_mu})
        mu = next_mu
    return {"seed": case_seed, "tau": tau, "eta": eta, "temperature": temperature,
            "steps": out}


cases = [
    run(1, 12, 8, 5.0, 0.1, 1.0),
    run(2, 40, 10, 3.0, 0.2, 0.8),
    run(3, 64, 12, 1.5, 0.5, 1.3),
]
print(json.dumps({
    "source": "reference/mirostat_v2.py after llama.cpp src/llama-sampling.cpp "
              "llama_sampler_mirostat_v2_apply (c392e509)",
    "cases": cases,
}, indent=1))
