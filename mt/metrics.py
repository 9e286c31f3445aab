"""Corpus BLEU and chrF with sacreBLEU on detokenized text, with their signatures.

BLEU counts words, so it splits text into words first; sacreBLEU's default splitting (13a) finds words at
spaces and punctuation. Chinese and Japanese are written without spaces between words, and split that way
a sentence is one or two "words": BLEU is about 0 whatever the translation. Korean puts spaces between
phrases, each a word with its particles attached, which a translation seldom matches whole. So the
splitting follows the target language, as sacreBLEU's own command does for these three (bleu_tokenize).
Thai, Lao, Khmer and Burmese have no spaces between words either, and sacreBLEU no splitting of its own for
them short of a downloaded sentencepiece model (flores200): each character is a word there (char).
chrF compares characters and needs none.

Required terms (a glossary's, or a terms file's) are counted apart: how many of them the translations hold
(term_use), the exact-match term accuracy of terminology evaluations.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF

from mt.errors import MTError
from mt.languages import UNSPACED_CODES, base_code, cjk_language, phrase_pattern

log = logging.getLogger(__name__)

DEFAULT_TOKENIZE = "13a"
# sacreBLEU's choice for Chinese, Japanese and Korean; the MeCab ones need
# `pip install "sacrebleu[ja]"` or `"sacrebleu[ko]"`, and char (every character a word) stands in without it
BY_LANGUAGE = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}
STAND_IN = "char"


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_detail: str  # e.g. "BLEU = 35.2 66.1/41.7/28.3/19.7 (BP = 1.000 ...)"

    def as_dict(self) -> dict:
        return asdict(self)


def bleu_tokenize(language: str | None, setting: str | None = None) -> str:
    """How BLEU splits text in `language` into words: the setting where one is given (decode.bleu_tokenize,
    mt-evaluate --bleu-tokenize); else zh for Chinese, ja-mecab / ko-mecab for Japanese / Korean (char where
    MeCab is not installed), char for Thai, Lao, Khmer and Burmese, 13a for every other language. A code may
    carry a script or region (zh-Hant, zh_TW, th-TH)."""
    if setting:
        return setting
    if base_code(language) in UNSPACED_CODES:  # Thai, Lao, Khmer, Burmese
        return STAND_IN
    chosen = BY_LANGUAGE.get(cjk_language(language), DEFAULT_TOKENIZE)
    return chosen if chosen == DEFAULT_TOKENIZE or _installed(chosen) else STAND_IN


@functools.cache
def _installed(tokenize: str) -> bool:
    """Whether sacreBLEU can split with `tokenize` here; said once where it cannot."""
    try:
        BLEU(tokenize=tokenize)
        return True
    except (ImportError, RuntimeError):
        extra = "ja" if tokenize.startswith("ja") else "ko"
        log.warning(
            "BLEU splits %s text into characters (tok:%s): sacreBLEU's standard, %s, needs MeCab "
            '(pip install "sacrebleu[%s]")',
            {"ja": "Japanese", "ko": "Korean"}[extra],
            STAND_IN,
            tokenize,
            extra,
        )
        return False


def check_bleu_tokenize(setting: str | None, name: str = "decode.bleu_tokenize") -> None:
    """A tokenization asked for by name, tried now: one line if sacreBLEU does not know it or cannot use it
    here (MeCab not installed; spm and flores models download on first use), rather than at the first validation."""
    if not setting:
        return
    given = f"{name} {setting}" if name.startswith("-") else f"{name}={setting}"  # a flag, or a config key
    if setting not in BLEU.TOKENIZERS:
        raise MTError(f"{given}: not one of sacreBLEU's tokenizations ({', '.join(BLEU.TOKENIZERS)})")
    try:
        BLEU(tokenize=setting)
    except Exception as err:  # noqa: BLE001 - sacreBLEU raises RuntimeError, ImportError or a download's error
        said = " ".join(str(err).split()) or type(err).__name__
        raise MTError(f"{given}: sacreBLEU cannot use it here ({said})") from None


def score(hypotheses: list[str], references: list[str], tokenize: str = DEFAULT_TOKENIZE) -> Scores:
    """sacreBLEU's defaults but for `tokenize` (bleu_tokenize chooses it): cased, exponential smoothing;
    chrF with n=6, beta=2."""
    return score_references(hypotheses, [references], tokenize)


def score_references(hypotheses: list[str], streams: list[list[str]], tokenize: str = DEFAULT_TOKENIZE) -> Scores:
    """As score, against one or several references per line (streams: a list of references each, in the
    order of the lines): n-grams match any reference, and the closest reference length counts."""
    if any(len(hypotheses) != len(stream) for stream in streams):
        raise ValueError(f"{len(hypotheses)} hypotheses for {', '.join(str(len(s)) for s in streams)} references")
    return _scores(BLEU(tokenize=tokenize), hypotheses, streams)


def pooled_score(hypotheses: list[str], references: list[str], parts: list[tuple[int, int, str]]) -> Scores:
    """One corpus score over lines in several languages, the lines of each part (start, stop, tokenize)
    split into words their own way: what scoring all of a multilingual model's validation lines at once needs.
    Its signature names every tokenization (tok:13a+zh)."""
    kinds = sorted({tokenize for _, _, tokenize in parts})
    if len(kinds) == 1:
        return score(hypotheses, references, kinds[0])
    split_hyps, split_refs = list(hypotheses), list(references)
    for start, stop, tokenize in parts:
        split = BLEU(tokenize=tokenize).tokenizer
        split_hyps[start:stop] = [split(h.rstrip()) for h in hypotheses[start:stop]]
        split_refs[start:stop] = [split(r.rstrip()) for r in references[start:stop]]
    found = _scores(BLEU(tokenize="none"), split_hyps, [split_refs], chrf_on=(hypotheses, [references]))
    found.bleu_signature = found.bleu_signature.replace("tok:none", f"tok:{'+'.join(kinds)}")
    return found


def _scores(bleu: BLEU, hypotheses: list[str], streams: list[list[str]], chrf_on=None) -> Scores:
    """BLEU by `bleu` and chrF of the same lines (or of chrf_on's: the text before it was split)."""
    chrf = CHRF()
    bleu_result = bleu.corpus_score(hypotheses, streams)
    chrf_hyps, chrf_streams = chrf_on or (hypotheses, streams)
    chrf_result = chrf.corpus_score(chrf_hyps, chrf_streams)
    return Scores(
        bleu=round(bleu_result.score, 2),
        chrf=round(chrf_result.score, 2),
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_detail=str(bleu_result),
    )


@dataclass(frozen=True)
class TermUse:
    held: int  # terms the translations hold
    asked: int  # terms asked for, over all lines
    lines: int  # lines with one term or more
    lines_lacking: int  # of those, lines whose translation lacks one or more

    def as_dict(self) -> dict:
        accuracy = round(100 * self.held / self.asked, 2) if self.asked else None
        return {"terms_held": self.held, "terms_asked": self.asked, "term_accuracy": accuracy}

    def __str__(self) -> str:
        if not self.asked:
            return "terms: none asked for"
        share = f"{100 * self.held / self.asked:.1f}%"
        return (
            f"terms: {self.held:,} of {self.asked:,} held ({share}); "
            f"{self.lines_lacking:,} of {self.lines:,} lines with terms lack one or more"
        )


def term_use(hypotheses: list[str], terms: list[list[str]], tgt_lang) -> TermUse:
    """How many of each line's terms its translation holds as written: as whole words, or anywhere in a
    language written without spaces (Chinese, Thai); a term is held once however often it occurs."""
    if len(hypotheses) != len(terms):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(terms)} lines of terms")
    held = lacking = 0
    for hypothesis, line_terms in zip(hypotheses, terms):
        found = sum(bool(phrase_pattern([term], tgt_lang).search(hypothesis)) for term in line_terms)
        held, lacking = held + found, lacking + (found < len(line_terms))
    return TermUse(held, sum(map(len, terms)), sum(map(bool, terms)), lacking)


def mean_over(scores: dict[str, dict]) -> dict:
    """Several directions' scores (Scores.as_dict() each) as one figure: the mean of their BLEU and chrF,
    and the directions it is over."""
    mean = {key: round(sum(s[key] for s in scores.values()) / len(scores), 2) for key in ("bleu", "chrf")}
    return {**mean, "mean_of": list(scores)}


def paired_test(
    systems: list[tuple[str, list[str]]], streams: list[list[str]], samples: int = 0, tokenize: str = DEFAULT_TOKENIZE
):
    """Each system's BLEU and chrF against the first's (the baseline) on the same references (streams: one
    list or several, as score_references takes them), by paired
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

    paired = PairedTest(
        systems, {"bleu": BLEU(tokenize=tokenize), "chrf": CHRF()}, streams, test_type="bs", n_samples=samples
    )
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
