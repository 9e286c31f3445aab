"""Corpus BLEU and chrF with sacreBLEU on detokenized text, with their signatures."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_detail: str  # e.g. "BLEU = 35.2 66.1/41.7/28.3/19.7 (BP = 1.000 ...)"

    def as_dict(self) -> dict:
        return asdict(self)


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """sacreBLEU defaults: 13a tokenization, cased, exponential smoothing; chrF with n=6, beta=2."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    bleu_result = bleu.corpus_score(hypotheses, [references])
    chrf_result = chrf.corpus_score(hypotheses, [references])
    return Scores(
        bleu=round(bleu_result.score, 2),
        chrf=round(chrf_result.score, 2),
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_detail=str(bleu_result),
    )


def mean_over(scores: dict[str, dict]) -> dict:
    """Several directions' scores (Scores.as_dict() each) as one figure: the mean of their BLEU and chrF,
    and the directions it is over."""
    mean = {key: round(sum(s[key] for s in scores.values()) / len(scores), 2) for key in ("bleu", "chrf")}
    return {**mean, "mean_of": list(scores)}
