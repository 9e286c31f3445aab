"""Reranking a beam with a reverse model against the beam's own choice: BLEU and chrF on a validation and a
test split at several weights, the weight chosen on validation, and the time the reranking adds.

    .venv/bin/python scripts/bench_rerank.py --checkpoint runs/multi30k.de-en/multi30k_cpu_fp32 \\
        --reverse runs/multi30k.en-de/reverse_half_hour --beam 5 10 --weights 0.25 0.5 1 2 \\
        --valid data/multi30k/valid.de data/multi30k/valid.en --test data/multi30k/test2016.de data/multi30k/test2016.en

Each split's candidates are searched and scored by the reverse model once per beam (rerank.reverse_scores);
every weight reranks those same scores (rerank.ranked), as translate --reverse does. Prints one JSON object
per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import time

import mt
from mt.data.lines import read_lines
from mt.decoding.rerank import ranked, reverse_scores
from mt.metrics import score


def measure(forward, reverse, src: list[str], ref: list[str], beam: int, weights: list[float]) -> list[dict]:
    """The beam's choice and each weight's, on one split."""
    start = time.perf_counter()
    found = forward.translate_nbest(src, beam=beam, nbest=beam)
    searched = time.perf_counter() - start
    start = time.perf_counter()
    back = reverse_scores(found, src, reverse)
    scored = time.perf_counter() - start
    plain = score([hyps[0].text for hyps in found], ref)
    rows = [{"beam": beam, "weight": 0, "bleu": plain.bleu, "chrf": plain.chrf, "search_s": round(searched, 1)}]
    for weight in weights:
        chosen = score([hyps[0].text for hyps in ranked(found, back, weight)], ref)
        rows.append({"beam": beam, "weight": weight, "bleu": chosen.bleu, "chrf": chosen.chrf,
                     "search_s": round(searched, 1), "reverse_s": round(scored, 1)})  # fmt: skip
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--reverse", required=True)
    p.add_argument("--valid", nargs=2, required=True, metavar=("SRC", "REF"))
    p.add_argument("--test", nargs=2, required=True, metavar=("SRC", "REF"))
    p.add_argument("--beam", type=int, nargs="+", default=[5])
    p.add_argument("--weights", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0])
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    forward = mt.load_translator(args.checkpoint, device=args.device)
    reverse = mt.load_translator(args.reverse, device=args.device)
    table = []
    for beam in args.beam:
        splits = {name: measure(forward, reverse, *map(read_lines, files), beam, args.weights)
                  for name, files in (("valid", args.valid), ("test", args.test))}  # fmt: skip
        for valid, test in zip(splits["valid"], splits["test"]):
            row = {"beam": beam, "weight": valid["weight"], "valid": valid, "test": test}
            print(json.dumps(row), flush=True)
            table.append(row)
        best = max(splits["valid"][1:], key=lambda r: r["bleu"])["weight"]
        print(f"beam {beam}: weight chosen on valid: {best}", flush=True)
    print("\n| beam | weight | valid BLEU | valid chrF | test BLEU | test chrF | test search s | test reverse s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in table:
        v, t = r["valid"], r["test"]
        print(f"| {r['beam']} | {r['weight']:g} | {v['bleu']} | {v['chrf']} | {t['bleu']} | {t['chrf']} | "
              f"{t['search_s']} | {t.get('reverse_s', '-')} |")  # fmt: skip


if __name__ == "__main__":
    main()
