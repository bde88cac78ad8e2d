"""Reference probabilities for tests/reference.rs, from NLTK's KneserNeyInterpolated.

Run once, by hand (NLTK 3.10.4, Python 3): `python3 crates/ngram/tests/nltk_reference.py`,
and paste its output into tests/reference.rs. Nothing runs it at build or test time.

NLTK's unigram level is the continuation estimate alone, which gives a token never seen
probability 0. Our model discounts that level too and spreads the discounted mass uniformly
over the vocabulary (kenlm's form), so the script replaces `unigram_score` with exactly that
and nothing else: every higher order is NLTK's own `alpha_gamma` and recursion.
"""

from nltk.lm import KneserNeyInterpolated
from nltk.util import everygrams

ORDER = 3
DISCOUNT = 0.75
VOCAB = 6  # ids 0..5; id 5 never occurs in the text
TEXT = [int(c) for c in "01201301221030124012301420341023"]
CONTEXTS = [(), (2,), (5,), (0, 1), (1, 2), (2, 2), (3, 0), (4, 4), (5, 0), (1, 5)]

words = [str(t) for t in TEXT]

# NLTK's lower orders count followers by raw counts but their total by continuation counts;
# the two agree (and the distributions sum to 1) only when every n-gram below the top order
# that opens the text also occurs later, after some token. Checked, not assumed.
for n in range(1, ORDER):
    opening = tuple(words[:n])
    later = [tuple(words[i : i + n]) for i in range(1, len(words) - n + 1)]
    assert opening in later, f"the opening {n}-gram {opening} occurs only at the start"

lm = KneserNeyInterpolated(ORDER, discount=DISCOUNT)
lm.fit([list(everygrams(words, max_len=ORDER))], vocabulary_text=words)


def unigram_with_uniform(word):
    continuation, total = lm.estimator._continuation_counts(word)
    types = sum(1 for w in set(words) if lm.estimator._continuation_counts(w)[0] > 0)
    return max(continuation - DISCOUNT, 0.0) / total + DISCOUNT * types / total / VOCAB


lm.estimator.unigram_score = unigram_with_uniform

print("// context, then p(w | context) for w = 0..6")
for context in CONTEXTS:
    probs = [lm.score(str(w), [str(c) for c in context]) for w in range(VOCAB)]
    assert abs(sum(probs) - 1) < 1e-12, (context, sum(probs))
    print(f"(&{list(context)}, [{', '.join(repr(p) for p in probs)}]),")
