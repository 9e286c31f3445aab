"""Reranking a beam's candidates with a reverse model, one that translates the other way (target -> source).

The forward model asks how likely a translation is given the source; it does not ask whether the
translation says all the source says, and beam search is known to favour fluent translations that drop a
clause or add one. The reverse model asks how well the source can be recovered from the translation,
log P(source | candidate), which such a candidate loses. Rescoring n-best lists with it is what strong
WMT systems did (Sennrich et al. 2016, "Edinburgh Neural Machine Translation Systems for WMT 16"), and the
noisy channel of Yee et al. 2019 is the same rescoring with a language model added.

    score(candidate) = its beam score + weight * log P(source | candidate) / (source pieces + 1)

The beam score is the forward model's, length-penalized as the beam ranked it; the reverse term is per
piece of the source (EOS included), the same length for every candidate of a line, so the weight means the
same on short and long lines.
"""

from __future__ import annotations

from dataclasses import replace

from mt.decoding.settings import Translation
from mt.errors import MTError

# on Multi30k valid, 0.25 gave the best BLEU (0.25-0.5 raised BLEU and chrF; 1-2 chrF alone):
# docs/benchmarks.md#reranking-with-a-reverse-model
DEFAULT_REVERSE_WEIGHT = 0.25


def reranked(found: list[list[Translation]], lines: list[str], reverse, weight: float) -> list[list[Translation]]:
    """Each line's candidates, best first by the combined score (their score now), the reverse model scoring
    all of them in one call; equal scores keep the beam's order."""
    return ranked(found, reverse_scores(found, lines, reverse), weight)


def reverse_scores(found: list[list[Translation]], lines: list[str], reverse) -> list[list[float]]:
    """log P(line | candidate) per piece of the line, for each line's candidates: the reverse model scoring
    all of them in one call. Kept apart from ranked, so that several weights cost one scoring."""
    flat = [(hyp.text, line) for hyps, line in zip(found, lines) for hyp in hyps]
    back = iter(reverse.score([text for text, _ in flat], [line for _, line in flat]))
    return [[next(back).mean_log_prob for _ in hyps] for hyps in found]


def ranked(found: list[list[Translation]], back: list[list[float]], weight: float) -> list[list[Translation]]:
    """Each line's candidates by their score + weight x their reverse score (back, as reverse_scores gives),
    best first, that sum their score now; equal sums keep the beam's order."""
    out = []
    for hyps, line_back in zip(found, back):
        scored = [(hyp.score + weight * r, i, hyp) for i, (hyp, r) in enumerate(zip(hyps, line_back))]
        out.append([replace(hyp, score=score) for score, _, hyp in sorted(scored, key=lambda k: (-k[0], k[1]))])
    return out


def check_reverse(languages: tuple, reverse) -> None:
    """reverse must translate into the forward model's source language from its target language, where both
    models name their languages (a one-line error otherwise)."""
    theirs = tuple(reverse.languages)
    if not all(isinstance(code, str) and code for code in (*languages, *theirs)):
        return
    if theirs != (languages[1], languages[0]):
        raise MTError(
            f"the reverse model translates {theirs[0]}-{theirs[1]}: it must translate the other way, "
            f"{languages[1]}-{languages[0]}"
        )
