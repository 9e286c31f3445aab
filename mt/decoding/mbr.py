"""Minimum Bayes risk (MBR) decoding: of several candidate translations of a line, keep the one that agrees
most with the others. The search keeps the translation the model finds most likely; MBR keeps the one whose
expected similarity to a translation drawn from the model is highest (Kumar & Byrne 2004; Eikema & Aziz
2020), estimated with the candidates themselves as the draws. Freitag et al. 2023 found candidates sampled
with an epsilon cut (tokens below probability 0.02 never drawn) the best to choose among.

The similarity ("utility") is sentence-level chrF or BLEU, as sacreBLEU computes them; for N candidates
the N x N scores come from n-gram count matrices, one numpy reduction per n-gram order. numpy only:
CTranslate2's engine runs without torch.
"""

from __future__ import annotations

import numpy as np

CHRF_ORDER, CHRF_BETA = 6, 2  # sacreBLEU's chrF: character 1- to 6-grams, recall weighted twice precision
BLEU_ORDER = 4
CELLS = 1 << 22  # min-of-counts cells computed at a time: bounds the memory of a long line's many candidates


def mbr_order(texts: list[str], utility: str, tokenize=None) -> list[int]:
    """The candidates' indices, highest expected utility first; among equals (to 1e-9), the earlier (the
    search's better) first. tokenize: a line's words for BLEU as a string of space-separated words
    (sacreBLEU's tokenizer for the target language, bleu_words); by default the text as it is."""
    unique = list(dict.fromkeys(texts))
    weights = np.array([texts.count(text) for text in unique], dtype=np.float64)
    scores = chrf_matrix(unique) if utility == "chrf" else bleu_matrix(unique, tokenize or str.strip)
    expected = np.round(scores @ weights / len(texts), 9)  # each against every draw, itself included
    rank = {unique[u]: r for r, u in enumerate(np.argsort(-expected, kind="stable"))}
    return sorted(range(len(texts)), key=lambda i: (rank[texts[i]], i))


def bleu_words(language: str):
    """How BLEU splits a line of language into words, as validation does (mt/metrics.py): a callable."""
    from sacrebleu.metrics import BLEU

    from mt.metrics import bleu_tokenize

    return BLEU(tokenize=bleu_tokenize(language)).tokenizer


def chrf_matrix(texts: list[str]) -> np.ndarray:
    """[i, j]: sacreBLEU's sentence chrF of text i against reference text j (whitespace left out)."""
    joined = ["".join(text.split()) for text in texts]
    precision, recall, counted = [], [], []
    for n in range(1, CHRF_ORDER + 1):
        counts = _counts([[line[k : k + n] for k in range(len(line) - n + 1)] for line in joined])
        matches, totals = _matches(counts), counts.sum(1)
        hyp, ref = totals[:, None], totals[None, :]
        both = (hyp > 0) & (ref > 0)
        precision.append(np.where(both, matches / np.maximum(hyp, 1), 0.0))
        recall.append(np.where(both, matches / np.maximum(ref, 1), 0.0))
        counted.append(both)
    orders = np.maximum(np.sum(counted, axis=0), 1)
    p, r = np.sum(precision, axis=0) / orders, np.sum(recall, axis=0) / orders
    factor = CHRF_BETA**2
    denominator = factor * p + r
    return np.where(denominator > 0, 100 * (1 + factor) * p * r / np.where(denominator > 0, denominator, 1), 0.0)


def bleu_matrix(texts: list[str], tokenize) -> np.ndarray:
    """[i, j]: sacreBLEU's sentence BLEU of text i against reference text j (exp smoothing, effective order)."""
    words = [tokenize(text.rstrip()).split() for text in texts]
    lengths = np.array([len(w) for w in words], dtype=np.float64)
    correct, total = [], []
    for n in range(1, BLEU_ORDER + 1):
        counts = _counts([[" ".join(w[k : k + n]) for k in range(len(w) - n + 1)] for w in words])
        correct.append(_matches(counts))
        total.append(np.broadcast_to(counts.sum(1)[:, None], correct[-1].shape))
    correct, total = np.array(correct), np.array(total, dtype=np.float64)
    # exp smoothing: the k-th order without a match counts as 1 / 2^k matches
    halvings = np.cumsum(correct == 0, axis=0)
    precision = np.where(correct > 0, correct, 1 / 2.0**halvings) / np.maximum(total, 1)
    used = total > 0  # effective order: the orders the hypothesis is long enough for
    log_mean = np.where(used, np.log(precision), 0.0).sum(0) / np.maximum(used.sum(0), 1)
    hyp, ref = lengths[:, None], lengths[None, :]
    brevity = np.where(hyp >= ref, 1.0, np.exp(1 - ref / np.maximum(hyp, 1)))
    score = 100 * brevity * np.exp(log_mean)
    return np.where((correct.sum(0) > 0) & (hyp > 0), score, 0.0)


def _counts(grams: list[list[str]]) -> np.ndarray:
    """(texts, distinct n-grams) counts."""
    ids: dict[str, int] = {}
    rows = [[ids.setdefault(g, len(ids)) for g in line] for line in grams]
    return np.stack([np.bincount(np.array(row, dtype=np.int64), minlength=max(len(ids), 1)) for row in rows])


def _matches(counts: np.ndarray) -> np.ndarray:
    """[i, j]: n-grams text i shares with text j, each counted as often as both have it."""
    texts, grams = counts.shape
    step = max(1, CELLS // (texts * grams))
    out = np.empty((texts, texts), dtype=np.float64)
    for start in range(0, texts, step):
        out[start : start + step] = np.minimum(counts[start : start + step, None, :], counts[None, :, :]).sum(-1)
    return out
