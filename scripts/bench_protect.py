"""What protected spans (translate --protect) do to lines holding a web address, an e-mail address, a
placeholder or a tag pair: how often the span comes out exactly as it went in, and how the rest of the
translation scores, with the spans taken out and written back (the default) or left to the model (none).

Each test line gets one span of each kind in turn, at a word boundary drawn at random (--seed); a tag
pair wraps one word. BLEU is of the translation with every span left out (those the model mangled stay in
and cost), against the reference; "plain" is the line without a span, translated as it is.

    .venv/bin/python scripts/bench_protect.py --checkpoint runs/multi30k.de-en/smoke \\
        --src data/multi30k/test2016.de --ref data/multi30k/test2016.en
Prints one JSON object per kind and setting, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import sacrebleu

import mt
from mt.data.lines import read_lines
from mt.decoding.protected_spans import DEFAULT, pattern_of

SPANS = {
    "url": lambda i: f"https://www.example.com/hilfe/seite-{i}.html",
    "email": lambda i: f"kontakt.{i}@beispiel.de",
    "placeholder": lambda i: "{name}",
    "tag": lambda i: ("<b>", "</b>"),
}


def with_span(line: str, kind: str, i: int, rng: random.Random) -> tuple[str, list[str]]:
    """The line with a span of kind at a random word boundary (a tag pair around a random word), and the
    spans it holds."""
    words, span = line.split(), SPANS[kind](i)
    if kind == "tag":
        k = rng.randrange(len(words))
        words[k] = f"{span[0]}{words[k]}{span[1]}"
        return " ".join(words), list(span)
    k = rng.randint(0, len(words))
    return " ".join(words[:k] + [span] + words[k:]), [span]


def kept(output: str, spans: list[str]) -> bool:
    """Every span in the output once, in order."""
    at = 0
    for span in spans:
        found = output.find(span, at)
        if found < 0 or output.count(span) != 1:
            return False
        at = found + len(span)
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--kinds", nargs="+", default=list(SPANS), choices=list(SPANS))
    p.add_argument("--beam", type=int, help="default: the checkpoint's")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    translator = mt.load_translator(args.checkpoint, device="cpu", beam=args.beam)
    lines, refs = read_lines(args.src), read_lines(args.ref)
    pattern = pattern_of(DEFAULT)
    start = time.perf_counter()
    plain = translator.translate(lines)
    plain_s = time.perf_counter() - start
    rows = [("plain", "-", 100.0, sacrebleu.corpus_bleu(plain, [refs]).score, plain_s)]
    for kind in args.kinds:
        rng = random.Random(args.seed)
        spanned = [with_span(line, kind, i, rng) for i, line in enumerate(lines)]
        for protect in (DEFAULT, "none"):
            start = time.perf_counter()
            out = translator.translate([line for line, _ in spanned], protect=protect)
            seconds = time.perf_counter() - start
            exact = 100 * sum(kept(o, spans) for o, (_, spans) in zip(out, spanned)) / len(lines)
            rest = [" ".join(pattern.sub("", o).split()) for o in out]
            bleu = sacrebleu.corpus_bleu(rest, [refs]).score
            name = "protected" if protect == DEFAULT else "none"
            print(json.dumps({"kind": kind, "protect": name, "span_kept_pct": round(exact, 1), "bleu": round(bleu, 2),
                              "seconds": round(seconds, 2), "lines": len(lines)}))  # fmt: skip
            rows.append((kind, name, exact, bleu, seconds))
    print(f"\n{translator!r}, {len(lines)} lines of {args.src}")
    print("| span | --protect | span kept exactly | BLEU without the spans | seconds |")
    print("| --- | --- | --- | --- | --- |")
    for kind, name, exact, bleu, seconds in rows:
        print(f"| {kind} | {name} | {exact:.1f}% | {bleu:.2f} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
