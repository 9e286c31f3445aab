"""translate: a trained checkpoint turns source lines into target lines, N lines in, N lines out.

    translate --checkpoint runs/smoke/checkpoints/best.pt < input.de > output.en

Output formats:
  default       one translation per input line, in input order (an empty line gives an empty line)
  --nbest K     K lines per input line: "<line number, 0-based>\\t<rank>\\t<score>\\t<translation>"
  --alignments  "<translation>\\t<alignment>", the alignment as source-target piece index pairs
                ("0-0 2-1 ..."), the most-attended source piece of each target piece (EOS included)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from mt.alignment import format_alignment, hard_alignment, heatmap_svg
from mt.checkpoint import load_for_inference
from mt.data import decode_utf8, read_lines, split_lines
from mt.errors import MTError, report_errors
from mt.fastpath import tune_process
from mt.translator import Translator


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="translate", description="Translate text with a trained checkpoint.")
    p.add_argument("--checkpoint", "-c", nargs="+", required=True,
                   help="checkpoint file(s); several are averaged into one model")
    p.add_argument("--input", "-i", help="input file (default: stdin)")
    p.add_argument("--output", "-o", help="output file (default: stdout)")
    p.add_argument("--beam", type=int, help="beam size; 1 = greedy (default: the checkpoint's decode.beam)")
    p.add_argument("--alpha", type=float, help="length penalty exponent (default: the checkpoint's)")
    p.add_argument("--nbest", type=int, default=1, help="write this many hypotheses per line (tab-separated)")
    p.add_argument("--batch-tokens", type=int, help="source tokens per batch (default: the checkpoint's)")
    p.add_argument("--max-len-a", type=float, help="output at most a*|source|+b pieces")
    p.add_argument("--max-len-b", type=int)
    p.add_argument("--max-src-len", type=int, default=1024, help="longer inputs are truncated (and counted)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--attention-dir", help="write a cross-attention heatmap (SVG) per input line here")
    p.add_argument("--attention-layer", type=int, default=-1, help="decoder layer for heatmaps/alignments")
    p.add_argument("--attention-head", type=int, help="one head for heatmaps/alignments (default: mean)")
    p.add_argument("--alignments", action="store_true", help="append the hard alignment after a tab")
    p.add_argument("--interactive", action="store_true",
                   help="translate each line as it arrives and flush (the default when stdin is a terminal)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary on stderr")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p.parse_args(argv)


def read_input(path: str | None) -> list[str]:
    """Every "\\n"-terminated line (a last line without "\\n" counts too), strictly UTF-8."""
    if path is None:
        return split_lines(decode_utf8(sys.stdin.buffer.read(), "<stdin>"))
    return read_lines(path)


def format_results(results, nbest: int, alignments: bool = False) -> list[str]:
    if alignments:
        return [r[0].text + "\t" + format_alignment(hard_alignment(r[0].attention))
                if r[0].attention is not None else r[0].text + "\t" for r in results]
    if nbest == 1:
        return [r[0].text for r in results]
    return [f"{i}\t{rank}\t{t.score:.4f}\t{t.text}" for i, r in enumerate(results) for rank, t in enumerate(r)]


def write_heatmaps(results, folder: str, first_line: int = 0) -> None:
    """One SVG per translated line, named by its 0-based line number."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(results, start=first_line):
        t = r[0]
        if t.attention is not None:
            svg = heatmap_svg(t.attention, t.src_pieces, t.tgt_pieces, title=f"line {i}: {t.text}")
            (out / f"{i:06d}.svg").write_text(svg, encoding="utf-8")


def check_args(args) -> None:
    if args.beam is not None and args.beam < 1:
        raise MTError("--beam must be >= 1")
    if args.nbest < 1 or (args.nbest > (args.beam or args.nbest)):
        raise MTError("--nbest must be between 1 and --beam")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise MTError("--device cuda: no CUDA device is available")
    if args.nbest > 1 and (args.alignments or args.attention_dir):
        raise MTError("--alignments and --attention-dir work with --nbest 1")
    if args.dtype == "fp16" and args.device != "cuda":
        raise MTError("--dtype fp16 needs --device cuda; on CPU use bf16 or fp32")


@report_errors
def main(argv=None) -> None:
    args = parse_args(argv)
    if args.debug:
        os.environ["MT_DEBUG"] = "1"
    check_args(args)
    tune_process(torch.device(args.device), training=False)
    start = time.perf_counter()
    model, tokenizer, cfg = load_for_inference(args.checkpoint)
    dc = cfg.decode
    beam = args.beam or dc.beam
    if args.nbest > beam:
        beam = args.nbest
    options = dict(
        beam=beam,
        alpha=dc.alpha if args.alpha is None else args.alpha,
        max_len_a=dc.max_len_a if args.max_len_a is None else args.max_len_a,
        max_len_b=dc.max_len_b if args.max_len_b is None else args.max_len_b,
        nbest=args.nbest,
        attention_layer=args.attention_layer if (args.alignments or args.attention_dir) else None,
        attention_head=args.attention_head,
    )
    translator = Translator(model, tokenizer, args.device, args.dtype,
                            args.batch_tokens or dc.batch_tokens, args.max_src_len)
    interactive = args.interactive or (args.input is None and sys.stdin.isatty())
    lines = None if interactive else read_input(args.input)  # a bad input fails before any output exists
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        if interactive:
            for number, raw in enumerate(sys.stdin.buffer):
                results = translator.translate(split_lines(decode_utf8(raw, "<stdin>")) or [""], **options)
                if args.attention_dir:
                    write_heatmaps(results, args.attention_dir, number)
                for text in format_results(results, args.nbest, args.alignments):
                    out.write(text + "\n")
                out.flush()
        else:
            show = not args.quiet and sys.stderr.isatty()
            results = translator.translate(lines, progress=show, **options)
            if args.attention_dir:
                write_heatmaps(results, args.attention_dir)
            out.write("".join(text + "\n" for text in format_results(results, args.nbest, args.alignments)))
            if not args.quiet:
                seconds = time.perf_counter() - start
                print(f"translated {len(lines)} lines in {seconds:.1f}s (beam {beam})", file=sys.stderr)
    finally:
        if out is not sys.stdout:
            out.close()
    if translator.truncated:
        print(f"warning: {translator.truncated} lines were longer than {args.max_src_len} pieces "
              "and were truncated", file=sys.stderr)


if __name__ == "__main__":
    main()
