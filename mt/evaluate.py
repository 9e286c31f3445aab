"""mt-evaluate: translate a split (or any source/reference files) and print BLEU and chrF.

    mt-evaluate --checkpoint runs/smoke/checkpoints/best.pt --split test2016
    mt-evaluate --checkpoint CKPT --src test.de --ref test.en --beam 5
    mt-evaluate --hyp output.en --ref test.en          # score a file, no model
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from mt.checkpoint import load_for_inference
from mt.data import load_split, read_lines
from mt.errors import MTError, report_errors
from mt.metrics import score
from mt.translator import Translator


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mt-evaluate", description="Score translations with sacreBLEU.")
    p.add_argument("--checkpoint", "-c", nargs="+", help="checkpoint(s) to translate with")
    p.add_argument("--split", help="a split of the checkpoint's training data config (e.g. test2016)")
    p.add_argument("--src", help="source file to translate")
    p.add_argument("--ref", help="reference file")
    p.add_argument("--hyp", help="score this file of translations instead of translating")
    p.add_argument("--output", "-o", help="write the translations here")
    p.add_argument("--json", help="write the scores here as JSON")
    p.add_argument("--beam", type=int, help="beam size (default: the checkpoint's decode.beam)")
    p.add_argument("--alpha", type=float)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    return p.parse_args(argv)


def hypotheses_and_references(args) -> tuple[list[str], list[str], str]:
    if args.hyp:
        if not args.ref:
            raise MTError("--hyp needs --ref")
        return read_lines(args.hyp), read_lines(args.ref), args.hyp
    if not args.checkpoint:
        raise MTError("give --checkpoint (with --split, or --src and --ref), or --hyp and --ref")
    model, tokenizer, cfg = load_for_inference(args.checkpoint)
    if args.split:
        corpus = load_split(cfg.data, args.split)
        sources, references, name = corpus.src, corpus.tgt, corpus.origin
    elif args.src and args.ref:
        sources, references, name = read_lines(args.src), read_lines(args.ref), args.src
    else:
        raise MTError("give --split, or both --src and --ref")
    dc = cfg.decode
    translator = Translator(model, tokenizer, args.device, args.dtype, dc.batch_tokens)
    beam = args.beam or dc.beam
    results = translator.translate(sources, beam=beam, alpha=dc.alpha if args.alpha is None else args.alpha,
                                   max_len_a=dc.max_len_a, max_len_b=dc.max_len_b, progress=sys.stderr.isatty())
    hypotheses = [r[0].text for r in results]
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hypotheses))
    return hypotheses, references, f"{name} (beam {beam})"


@report_errors
def main(argv=None) -> None:
    args = parse_args(argv)
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


if __name__ == "__main__":
    main()
