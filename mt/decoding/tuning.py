"""The length penalty, chosen on the validation split at the end of a run (decode.alpha_candidates).

Beam search ranks finished hypotheses by log P(Y|X) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^alpha (GNMT,
Wu et al. 2016). The best alpha depends on the model: on Multi30k the CPU recipe's models translated
too short at 0.6 and 1.0 validated better in all five runs. Rather than fix one value per preset, a
run decodes its validation sentences with each candidate, keeps the best, and writes it into its
final checkpoint's config (final.pt), so the test score, `translate` and `mt-evaluate` all decode with the choice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from mt.decoding.translator import DecodeSettings, Translator
from mt.metrics import Scores

log = logging.getLogger(__name__)


def choose_alpha(
    model,
    tokenizer,
    settings: DecodeSettings,
    candidates,
    sources: list[str],
    scored: Callable[[list[str]], Scores],
    device,
    by: str = "bleu",
) -> tuple[DecodeSettings, list[dict]]:
    """settings with the candidate alpha of the highest validation BLEU (by="chrf": chrF; the first of
    equals), and one row per candidate: alpha, valid_bleu, valid_chrf. scored(translations of sources)
    gives their scores against the references (Validator.score)."""
    rows = []
    for alpha in candidates:
        trial = dataclasses.replace(settings, alpha=float(alpha))
        results = Translator(model, tokenizer, trial, device).translate_nbest(sources, progress=True)
        scores = scored([r[0].text for r in results])
        rows.append({"alpha": trial.alpha, "valid_bleu": scores.bleu, "valid_chrf": scores.chrf})
        log.info(
            "length penalty %g (beam %d): valid BLEU %.2f | chrF %.2f", alpha, trial.beam, scores.bleu, scores.chrf
        )
    best = max(rows, key=lambda row: row[f"valid_{by}"])
    log.info("length penalty chosen on valid: %g", best["alpha"])
    return dataclasses.replace(settings, alpha=best["alpha"]), rows
