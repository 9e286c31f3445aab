"""mt-evaluate: translate a split (or any source/reference files) and print BLEU and chrF.

    mt-evaluate --checkpoint runs/smoke/checkpoints/best.pt --split test2016
    mt-evaluate --checkpoint CKPT --src test.de --ref test.en --beam 5
    mt-evaluate --hyp output.en --ref test.en          # score a file, no model

It prints the scores with their sacreBLEU signatures (--json writes them to a file too).
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


def hypotheses_and_references(args) -> tuple[list[str], list[str], str]:
    if args.hyp:
        if not args.ref:
            raise MTError("--hyp needs --ref")
        return read_lines(args.hyp), read_lines(args.ref), args.hyp
    if not args.checkpoint:
        raise MTError("give --checkpoint (with --split, or --src and --ref), or --hyp and --ref")
    model, tokenizer, cfg = load_for_inference(args.checkpoint, ensemble=args.ensemble)
    if args.split:
        corpus = load_split(cfg.data, args.split)
        sources, references, name = corpus.src, corpus.tgt, corpus.origin
    elif args.src and args.ref:
        sources, references, name = read_lines(args.src), read_lines(args.ref), args.src
    else:
        raise MTError("give --split, or both --src and --ref")
    settings = DecodeSettings.from_config(cfg.decode, beam=args.beam, alpha=args.alpha, precision=args.dtype)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    translator = Translator(model, tokenizer, settings, device)
    results = translator.translate(sources, progress=sys.stderr.isatty())
    hypotheses = [r[0].text for r in results]
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hypotheses))
    return hypotheses, references, f"{name} (beam {settings.beam})"


def run(args) -> None:
    """mt-evaluate with the arguments of mt.cli's parser."""
    hypotheses, references, name = hypotheses_and_references(args)
    if len(hypotheses) != len(references):
        raise MTError(f"{len(hypotheses)} translations but {len(references)} references")
    scores = score(hypotheses, references)
    print(f"{name}: BLEU {scores.bleu:.2f} | chrF {scores.chrf:.2f}")
    print(scores.bleu_detail)
    print(f"BLEU signature: {scores.bleu_signature}")
    print(f"chrF signature: {scores.chrf_signature}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(scores.as_dict(), f, indent=2)
