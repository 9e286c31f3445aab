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


def paired_test(systems: list[tuple[str, list[str]]], references: list[str], samples: int = 0):
    """Each system's BLEU and chrF against the first's (the baseline) on the same references, by paired
    bootstrap resampling (Koehn 2004) as sacreBLEU runs it, seeded (the same figures every time): the test
    set resampled with replacement `samples` times (0: sacreBLEU's 1,000), each score's 95% confidence
    interval from the resamples. Not approximate randomization: sacreBLEU counts only its trials strictly
    beyond the observed difference, so two systems a line apart come out "significant".

    Returns a row per system (hyp, bleu, chrf, bleu_ci and chrf_ci, the intervals' half-widths; but for
    the baseline bleu_p and chrf_p, how often systems that do not differ would differ as much), the
    signatures, and the resamples taken. Translations the same as the baseline's line for line get p = 1
    (sacreBLEU, after MultEval, gives them its smallest p on purpose; read as "significant" it would
    mislead)."""
    from sacrebleu.significance import PairedTest  # here: only a comparison needs it

    paired = PairedTest(systems, {"bleu": BLEU(), "chrf": CHRF()}, [references], test_type="bs", n_samples=samples)
    signatures, results = paired()
    bleu, chrf = (results[name] for name in results if name != "System")  # in the order the metrics were given
    rows = []
    for (name, hypotheses), b, c in zip(systems, bleu, chrf):
        row = {"hyp": name, "bleu": round(b.score, 2), "chrf": round(c.score, 2)}
        row |= {"bleu_ci": round(float(b.ci), 2), "chrf_ci": round(float(c.ci), 2)}
        if b.p_value is not None:
            same = hypotheses == systems[0][1]
            row |= {"bleu_p": 1.0 if same else round(b.p_value, 4), "chrf_p": 1.0 if same else round(c.p_value, 4)}
        rows.append(row)
    return rows, [str(s) for s in signatures.values()], paired.n_samples
