"""Minimum Bayes risk decoding against beam search: BLEU and chrF of a test set, the time of the search
that draws the candidates and of MBR's choice among them, for the beam's N best and for N epsilon samples,
chosen by chrF and by BLEU.

    .venv/bin/python scripts/bench_mbr.py --checkpoint runs/multi30k.de-en/multi30k_cpu_fp32 \\
        --src data/multi30k/test2016.de --ref data/multi30k/test2016.en --beams 8 16 32 --samples 32 64
Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import time

import mt
from mt.data.lines import read_lines
from mt.decoding.mbr import bleu_words, mbr_order
from mt.metrics import score


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--beams", type=int, nargs="*", default=[8, 16, 32], help="candidates: the N best of a beam of N")
    p.add_argument("--samples", type=int, nargs="*", default=[32, 64], help="candidates: N epsilon samples")
    p.add_argument("--epsilon", type=float, default=0.02)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    sources, references = read_lines(args.src), read_lines(args.ref)
    translator = mt.load_translator(args.checkpoint, device=args.device)
    tokenize = bleu_words(translator.languages[1])
    rows = []

    def measure(label: str, texts: list[str], search_s: float, mbr_s: float = 0.0) -> None:
        scores = score(texts, references)
        row = {"setting": label, "bleu": scores.bleu, "chrf": scores.chrf, "search_s": search_s, "mbr_s": mbr_s}
        print(json.dumps(row), flush=True)
        rows.append(row)

    start = time.perf_counter()
    beam5 = translator.translate(sources, beam=5)
    measure(f"beam 5 (alpha {translator.settings.alpha:g})", beam5, time.perf_counter() - start)
    kinds = [("beam", n, dict(beam=n, nbest=n)) for n in args.beams]
    kinds += [("samples", n, dict(strategy="sample", epsilon=args.epsilon, nbest=n)) for n in args.samples]
    for kind, n, settings in kinds:
        start = time.perf_counter()
        candidates = translator.translate_nbest(sources, **settings)
        search_s = time.perf_counter() - start
        if kind == "beam":
            measure(f"beam {n}, its best", [c[0].text for c in candidates], search_s)
        for utility in ("chrf", "bleu"):
            start = time.perf_counter()
            chosen = [c[mbr_order([t.text for t in c], utility, tokenize)[0]].text for c in candidates]
            name = f"MBR {utility}, {n} {'best of a beam' if kind == 'beam' else f'samples (epsilon {args.epsilon:g})'}"
            measure(name, chosen, search_s, time.perf_counter() - start)
    print(f"\n{'setting':<44} {'BLEU':>6} {'chrF':>6} {'search s':>9} {'MBR s':>7}")
    for row in rows:
        print(
            f"{row['setting']:<44} {row['bleu']:>6.2f} {row['chrf']:>6.2f} {row['search_s']:>9.1f} {row['mbr_s']:>7.1f}"
        )


if __name__ == "__main__":
    main()
