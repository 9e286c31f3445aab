"""Required terms against plain beam search, on a test set with terms taken from its references (the usual
way to measure lexically constrained decoding, Post & Vilar 2018): for each line, K words of its reference
that the plain search's translation lacks, drawn at random (letters only, at least `--min-chars`); lines
whose translation lacks none get no term. Reports BLEU and chrF over all lines, the share of terms placed,
and the search time with and without terms.

    .venv/bin/python scripts/bench_terms.py --checkpoint runs/multi30k.de-en/multi30k_cpu_fp32 \\
        --src data/multi30k/test2016.de --ref data/multi30k/test2016.en --terms 1 2 --beam 5
Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time

import mt
from mt.data.lines import read_lines
from mt.metrics import score, term_use

WORD = re.compile(r"[^\W\d_]+")


def drawn_terms(references: list[str], plain: list[str], k: int, min_chars: int, seed: int) -> list[list[str]]:
    """Per line, up to k reference words (distinct, in reference order) its plain translation lacks."""
    rng = random.Random(seed)
    terms = []
    for ref, hyp in zip(references, plain):
        have = set(WORD.findall(hyp))
        lacking = list(dict.fromkeys(w for w in WORD.findall(ref) if len(w) >= min_chars and w not in have))
        chosen = sorted(rng.sample(range(len(lacking)), min(k, len(lacking))))
        terms.append([lacking[i] for i in chosen])
    return terms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--terms", type=int, nargs="*", default=[1, 2], help="terms a line (K)")
    p.add_argument("--beam", type=int, nargs="*", default=[5])
    p.add_argument("--min-chars", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    sources, references = read_lines(args.src), read_lines(args.ref)
    rows = []
    for beam in args.beam:
        translator = mt.load_translator(args.checkpoint, device=args.device, beam=beam)
        start = time.perf_counter()
        plain = translator.translate(sources)
        seconds = time.perf_counter() - start
        scores = score(plain, references)
        rows.append({"beam": beam, "terms": 0, "bleu": scores.bleu, "chrf": scores.chrf, "seconds": round(seconds, 1)})
        print(json.dumps(rows[-1]), flush=True)
        for k in args.terms:
            terms = drawn_terms(references, plain, k, args.min_chars, args.seed)
            missed = translator.terms_missed
            start = time.perf_counter()
            hyps = translator.translate(sources, terms=terms)
            seconds = time.perf_counter() - start
            scores, use = score(hyps, references), term_use(hyps, terms, translator.languages[1])
            rows.append({
                "beam": beam, "terms": k, "lines_with_terms": sum(map(bool, terms)), "terms_asked": use.asked,
                "terms_placed": use.held, "lines_missed": translator.terms_missed - missed,
                "bleu": scores.bleu, "chrf": scores.chrf, "seconds": round(seconds, 1),
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    print("\n| beam | terms a line | lines with terms | placed | BLEU | chrF | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        share = f"{r['terms_placed']:,} of {r['terms_asked']:,}" if r["terms"] else "-"
        lines = f"{r['lines_with_terms']:,}" if r["terms"] else "-"
        print(f"| {r['beam']} | {r['terms']} | {lines} | {share} | {r['bleu']} | {r['chrf']} | {r['seconds']} |")


if __name__ == "__main__":
    main()
