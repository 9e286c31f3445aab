"""mt-score: how likely a trained model finds given translations (forced decoding), a line per pair.

    mt-score --checkpoint runs/multi30k.de-en/smoke --src test.de --tgt test.en > scores.txt
    paste test.de test.en | mt-score --checkpoint runs/multi30k.de-en/smoke --normalize

Output, a line per pair in input order:
  default       log P(target | source), natural log, summed over the target's pieces and EOS
  --normalize   the same per target piece (EOS included): comparable across lengths, for filtering a corpus
  --pieces      then a tab, the target's pieces, a tab, each piece's log-probability (space-separated)

The summary on stderr (and --json FILE) gives the corpus's log-probability per piece and its perplexity.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time

from tqdm import tqdm

from mt.cli.translate import check_engine_args, writing_failed
from mt.data.lines import count_lines, open_for_writing, read_line_chunks
from mt.decoding.ctranslate2_translator import load_export_translator
from mt.errors import MTError, StoppedAfter, check_output_file, counted, truncation_warning

# torch and the model are imported where the torch engine is picked, as in translate.


def check_args(args) -> None:
    inputs = {"--src": args.src, "--tgt": args.tgt, "--checkpoint": args.checkpoint}
    check_output_file(args.output, "--output", inputs)
    check_output_file(args.json, "--json", {**inputs, "--output": args.output})
    if bool(args.src) != bool(args.tgt):
        raise MTError("--src and --tgt go together (or neither: 'source<TAB>target' lines on stdin)")
    if args.src is None and sys.stdin.isatty():
        raise MTError("give --src and --tgt, or pipe 'source<TAB>target' lines to stdin")
    for flag, value in (
        ("--batch-tokens", args.batch_tokens),
        ("--max-src-len", args.max_src_len),
        ("--chunk-lines", args.chunk_lines),
    ):
        if value < 1:
            raise MTError(f"{flag} must be >= 1")
    if args.engine == "ctranslate2" and (args.ensemble or len(args.checkpoint) != 1):
        raise MTError("--engine ctranslate2 takes one --checkpoint, an export directory (no --ensemble)")
    check_engine_args(args)


def aligned_pairs(args) -> int | None:
    """The pairs --src and --tgt hold, their line counts checked to agree before any scoring (and the
    progress bar's total); None for pairs on stdin, not counted ahead."""
    if not args.src:
        return None
    src_lines, tgt_lines = count_lines(args.src), count_lines(args.tgt)
    if src_lines != tgt_lines:
        raise MTError(
            f"--src {args.src} has {counted(src_lines, 'line')} but --tgt {args.tgt} has {tgt_lines:,}: "
            "the files must be line-aligned"
        )
    return src_lines


def pair_chunks(args, chunk_lines: int):
    """(sources, targets) lists of up to chunk_lines pairs: from --src/--tgt (aligned_pairs checks them),
    or from 'source<TAB>target' lines on stdin."""
    if args.src:
        yield from zip(read_line_chunks(args.src, chunk_lines), read_line_chunks(args.tgt, chunk_lines))
        return
    done = 0
    for chunk in read_line_chunks(None, chunk_lines):
        sources, targets = [], []
        for number, line in enumerate(chunk, start=done + 1):
            fields = line.split("\t")
            if len(fields) != 2:
                found = "no tab" if len(fields) == 1 else f"{len(fields) - 1} tabs"
                raise MTError(
                    f"<stdin>:{number}: expected 'source<TAB>target', found {found} "
                    "(give --src and --tgt files for text with tabs)"
                )
            sources.append(fields[0])
            targets.append(fields[1])
        done += len(chunk)
        yield sources, targets


def load_scorer(args):
    """A translator of the engine asked for: both score pairs through the same interface."""
    if args.engine == "ctranslate2":
        return load_export_translator(
            args.checkpoint[0], args.device, args.dtype, args.max_src_len, tgt_lang=args.tgt_lang
        )
    from mt.inference import load_translator

    return load_translator(
        args.checkpoint,
        args.device,
        ensemble=args.ensemble,
        max_src_len=args.max_src_len,
        precision=args.dtype,
        tgt_lang=args.tgt_lang,
    )


def format_score(found, normalize: bool, pieces: bool) -> str:
    value = found.mean_log_prob if normalize else found.log_prob
    line = f"{value:.4f}"
    if pieces:
        line += "\t" + " ".join(found.pieces) + "\t" + " ".join(f"{lp:.4f}" for lp in found.piece_log_probs)
    return line


def summary(pairs: int, pieces: int, log_prob: float, seconds: float) -> dict:
    per_piece = log_prob / pieces if pieces else 0.0
    return {
        "pairs": pairs,
        "target_pieces": pieces,
        "log_prob": round(log_prob, 4),
        "log_prob_per_piece": round(per_piece, 4),
        "perplexity": round(math.exp(-per_piece), 4),
        "seconds": round(seconds, 2),
    }


def run(args) -> None:
    """mt-score with the arguments of mt.cli.commands's parser."""
    check_args(args)
    start = time.perf_counter()
    total = aligned_pairs(args)
    chunks = pair_chunks(args, args.chunk_lines)
    first = next(chunks, None)  # a bad first chunk (or misaligned files) fails before any output exists
    scorer = load_scorer(args)
    out = open_for_writing(args.output) if args.output else sys.stdout
    pairs = pieces = 0
    writing = False
    log_prob = 0.0
    shown = not args.quiet and sys.stderr.isatty()
    bar = tqdm(total=total, unit="pair", disable=None if shown else True)
    try:
        for sources, targets in itertools.chain([first] if first is not None else [], chunks):
            found = scorer.score(sources, targets, batch_tokens=args.batch_tokens)
            try:
                writing = True
                out.write("".join(format_score(f, args.normalize, args.pieces) + "\n" for f in found))
                out.flush()
                writing = False
            except BrokenPipeError:
                raise
            except OSError as err:
                raise writing_failed(args.output or "<stdout>", err) from None
            pairs += len(found)
            pieces += sum(len(f.piece_log_probs) for f in found)
            log_prob += sum(f.log_prob for f in found)
            bar.update(len(found))
    except KeyboardInterrupt:
        raise StoppedAfter(pairs, "score", args.output, writing) from None
    finally:
        bar.close()
        if out is not sys.stdout:
            try:
                out.close()
            except OSError as err:
                raise writing_failed(args.output, err) from None
    result = summary(pairs, pieces, log_prob, time.perf_counter() - start)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    if not args.quiet:
        print(
            f"scored {counted(pairs, 'pair')} ({counted(pieces, 'target piece')}) in {result['seconds']:.1f}s: "
            f"log-probability per piece {result['log_prob_per_piece']:.4f}, perplexity {result['perplexity']:.2f}",
            file=sys.stderr,
        )
    if scorer.truncated:
        print(truncation_warning(scorer.truncated, "source", args.max_src_len), file=sys.stderr)
