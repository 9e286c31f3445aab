"""mt-evaluate: translate a split (or any source/reference files) and print BLEU and chrF.

    mt-evaluate --checkpoint runs/smoke/checkpoints/best.pt --split test2016
    mt-evaluate --checkpoint CKPT --src test.de --ref test.en --beam 5
    mt-evaluate --hyp output.en --ref test.en          # score a file, no model
    mt-evaluate --checkpoint CKPT --split valid --beam 4 5 --alpha 0.6 1.0 1.4   # tune decoding

It prints the scores with their sacreBLEU signatures (--json writes them to a file too). Several
--beam or --alpha values decode every combination with the model loaded once, a line each, then
name the best: tune them on a validation split, then score the test split once with the choice.
"""

from __future__ import annotations

import json
import sys

import torch

from mt.checkpoint import load_for_inference
from mt.data import load_split, read_lines
from mt.decoding import DecodeSettings, Translator
from mt.errors import MTError
from mt.metrics import score


def references_and_hypotheses(args) -> tuple[list[str], list[tuple[str, dict, list[str]]]]:
    """The references, and per decoding setting (one, or the --beam x --alpha grid) its label,
    its settings and its translations."""
    if args.hyp:
        if not args.ref:
            raise MTError("--hyp needs --ref")
        return read_lines(args.ref), [(args.hyp, {}, read_lines(args.hyp))]
    if not args.checkpoint:
        raise MTError("give --checkpoint (with --split, or --src and --ref), or --hyp and --ref")
    if any(beam < 1 for beam in args.beam or []):
        raise MTError("--beam must be at least 1")
    grid = [(beam, alpha) for beam in args.beam or [None] for alpha in args.alpha or [None]]
    if len(grid) > 1 and args.output:
        raise MTError("--output takes the translations of one setting: give one --beam and one --alpha")
    model, tokenizer, cfg = load_for_inference(args.checkpoint, ensemble=args.ensemble)
    if args.split:
        corpus = load_split(cfg.data, args.split)
        sources, references, name = corpus.src, corpus.tgt, corpus.origin
    elif args.src and args.ref:
        sources, references, name = read_lines(args.src), read_lines(args.ref), args.src
    else:
        raise MTError("give --split, or both --src and --ref")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    outputs = []
    for beam, alpha in grid:
        settings = DecodeSettings.from_config(cfg.decode, beam=beam, alpha=alpha, precision=args.dtype)
        results = Translator(model, tokenizer, settings, device).translate(sources, progress=sys.stderr.isatty())
        hypotheses = [r[0].text for r in results]
        chosen = {"beam": settings.beam, "alpha": settings.alpha}
        outputs.append((f"{name} (beam {settings.beam}, alpha {settings.alpha:g})", chosen, hypotheses))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in outputs[0][2]))
    return references, outputs


def run(args) -> None:
    """mt-evaluate with the arguments of mt.cli's parser."""
    references, outputs = references_and_hypotheses(args)
    rows = []
    for label, chosen, hypotheses in outputs:
        if len(hypotheses) != len(references):
            raise MTError(f"{len(hypotheses)} translations but {len(references)} references")
        scores = score(hypotheses, references)
        print(f"{label}: BLEU {scores.bleu:.2f} | chrF {scores.chrf:.2f}")
        print(scores.bleu_detail)
        rows.append({**chosen, **scores.as_dict()})
    print(f"BLEU signature: {scores.bleu_signature}")
    print(f"chrF signature: {scores.chrf_signature}")
    if len(rows) > 1:
        best = max(rows, key=lambda row: row["bleu"])
        print(f"best BLEU: {best['bleu']:.2f} with beam {best['beam']}, alpha {best['alpha']:g}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows[0] if len(rows) == 1 else rows, f, indent=2)
