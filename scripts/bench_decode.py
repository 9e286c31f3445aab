"""Decoding speed and quality of a checkpoint: sentences/s, target tokens/s and BLEU for greedy and beam
search in fp32 and bf16, batched by tokens, plus `translate` start-up time on one sentence. On CUDA each
also with decode.cuda_graphs (search in fixed slots, replayed steps), with the share of lines identical
to the search without it; `--precisions tf32` adds a what-if, fp32 with CUDA's matmuls on TF32 tensor
cores, with the share of lines identical to fp32's. Given references, also scoring them (mt-score's forced
decoding): pairs/s and the test set's perplexity, and how well the per-piece score finds pairs made
misaligned on purpose (a share of the references moved to other lines): the precision among the
lowest-scored pairs, and ROC AUC.

    .venv/bin/python scripts/bench_decode.py --checkpoint runs/multi30k.de-en/smoke/checkpoints/final.pt \\
        --src data/multi30k/test2016.de --ref data/multi30k/test2016.en
Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import random
import subprocess
import sys
import time
from collections import Counter

import torch

import mt.decoding.translator as translator_module
from mt.data.lines import read_lines
from mt.decoding import fixed_slots
from mt.decoding.translator import DecodeSettings, Translator
from mt.fastpath import tune_process
from mt.inference import load_for_inference
from mt.metrics import score
from mt.precision import DTYPES

TRANSLATORS_CHOICE = translator_module.fastpath.search_threads  # of search threads
TF32 = "tf32"  # a what-if precision: fp32 weights and activations, CUDA's fp32 matmuls on TF32 tensor cores


def startup_seconds(checkpoint: str, sentence: str, device: str) -> float:
    """Wall time of a whole `translate` process on one sentence."""
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from mt.cli.commands import translate; translate()",
            "-c",
            checkpoint,
            "--beam",
            "1",
            "-q",
            "--device",
            device,
        ],
        input=sentence + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start


def forms(precisions: list[str], cudnn_choices: list[bool]) -> list[tuple[str, bool]]:
    """(precision, cuDNN attention on) pairs to time: fp32 (and tf32) once when both are asked (cuDNN has no
    fp32 kernel)."""
    both = len(cudnn_choices) > 1
    return [(p, c) for p in precisions for c in cudnn_choices if not (both and p in ("fp32", TF32) and not c)]


@contextlib.contextmanager
def matmuls_in_tf32(on: bool):
    """A what-if for the tf32 rows: CUDA's fp32 matmuls on TF32 tensor cores (inputs rounded to 10 bits of
    mantissa, fp32's range, fp32 sums) rather than in full fp32 as translate runs them (torch's default).
    Through torch's newer switch where it has one (the old and new switches may not be mixed); put back after.
    A CPU's matmuls are not affected: there tf32 rows are fp32 ones."""
    matmul = torch.backends.cuda.matmul
    name = "fp32_precision" if hasattr(matmul, "fp32_precision") else "allow_tf32"
    before = getattr(matmul, name)
    setattr(matmul, name, ("tf32" if on else "ieee") if name == "fp32_precision" else on)
    try:
        yield
    finally:
        setattr(matmul, name, before)


def weights_of(precision: str) -> str:
    """The decode.precision a timed precision runs: tf32 keeps the weights in fp32."""
    return "fp32" if precision == TF32 else precision


def checking_every(steps: int | None) -> None:
    """A what-if: the translator's fixed-slot searches read whether they are done every `steps` steps
    (None: the search's own interval)."""
    chosen = fixed_slots.run if steps is None else functools.partial(fixed_slots.run, check_every=steps)
    translator_module.run_search = chosen


def searching_in(threads: int | None) -> None:
    """A what-if: search.py's searches run a call's batches in `threads` threads sharing the cores (None:
    fastpath.search_threads' choice: two on a CPU for a call of 4 batches or more, one elsewhere)."""
    translator_module.fastpath.search_threads = TRANSLATORS_CHOICE if threads is None else lambda *_, **__: threads


def timed_calls(translator: Translator, sources: list[str], repeats: int, cuda_graphs: bool):
    """(the best of `repeats` calls on sources in seconds, the first call's (None without fixed slots, warmed
    up on a few lines instead), the fixed-slot steps a timed call ran by kind, the last call's results)."""
    first = None
    if cuda_graphs:  # the first call captures each shape's steps: what a one-off `translate` pays
        start = time.perf_counter()
        translator.translate_nbest(sources)
        first = time.perf_counter() - start
    else:
        translator.translate_nbest(sources[:64])  # warm-up
    best, before = float("inf"), Counter(translator.replays.counts)
    for _ in range(repeats):
        start = time.perf_counter()
        results = translator.translate_nbest(sources)
        best = min(best, time.perf_counter() - start)
    steps = Counter(translator.replays.counts) - before  # fixed-slot steps: eager, captured, replayed
    return best, first, steps, results


def share_equal(lines: list[str], others: list[str]) -> float:
    """The share of lines equal to the other form's, line by line."""
    return round(sum(a == b for a, b in zip(lines, others)) / len(lines), 4)


def variants(graphs: list[bool], checks: list[int] | None, threads: list[int] | None) -> list[tuple]:
    """(cuda_graphs, check interval, search threads) of each form timed: search.py's loop in each number of
    threads asked for, fixed slots at each interval asked for (None: the default)."""
    found = []
    for g in graphs:
        found += [(True, n, None) for n in checks or [None]] if g else [(False, None, k) for k in threads or [None]]
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref")
    p.add_argument("--beams", nargs="+", type=int, default=[1, 5])
    p.add_argument(
        "--precisions",
        nargs="+",
        default=["fp32", "bf16"],
        choices=[*DTYPES, TF32],
        help="decode.precision, each; tf32: fp32 with CUDA's matmuls on TF32 tensor cores (a what-if: translate "
        "runs fp32 matmuls in full), its lines compared with fp32's where fp32 is asked before it",
    )
    p.add_argument("--batch-tokens", type=int, default=0, help="default: the checkpoint's decode.batch_tokens")
    p.add_argument("--repeats", type=int, default=3, help="best of N runs (timings on shared machines are noisy)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--cuda-graphs",
        choices=["off", "on", "both"],
        help="decode.cuda_graphs: off, on, or each search both ways (default: both on CUDA, off on a CPU)",
    )
    p.add_argument(
        "--cudnn-attention",
        choices=["on", "off", "both"],
        default="on",
        help="SDPA's cuDNN attention on CUDA: on (torch's default, as translate runs), off, or bf16 both ways "
        "(cuDNN attention takes no fp32: off changes nothing there)",
    )
    p.add_argument(
        "--check-every",
        nargs="+",
        type=int,
        help="fixed slots: read whether every sentence is done every N steps, each N given (default: the "
        "search's own); fewer steps run past the last sentence's end, more waits for the device",
    )
    p.add_argument(
        "--search-threads",
        nargs="+",
        type=int,
        help="search.py's loop in each of these numbers of threads, a call's batches side by side (default: "
        "the translator's own choice: two on a CPU for a call of 4 batches or more, one elsewhere)",
    )
    p.add_argument("--json", action="store_true", help="JSON lines only, no table")
    args = p.parse_args()
    graphs_choice = args.cuda_graphs or ("both" if args.device == "cuda" else "off")
    graphs = {"off": [False], "on": [True], "both": [False, True]}[graphs_choice]
    cudnn_choices = {"on": [True], "off": [False], "both": [True, False]}[args.cudnn_attention]

    tune_process(torch.device(args.device), training=False)  # as translate does
    model, tokenizer, cfg = load_for_inference([args.checkpoint])
    sources = read_lines(args.src)
    references = read_lines(args.ref) if args.ref else None
    batch_tokens = args.batch_tokens or cfg.decode.batch_tokens
    env = {
        "bench": "env",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": args.device,
        "sentences": len(sources),
        "batch_tokens": batch_tokens,
    }
    print(json.dumps(env), flush=True)
    rows = []
    with_cudnn = {}  # (precision, beam, cuda_graphs, check interval, threads): the translations with cuDNN attention on
    in_fp32 = {}  # (beam, cuda_graphs, check interval, threads): fp32's translations, for tf32's to compare with
    for precision, cudnn in forms(args.precisions, cudnn_choices):
        with matmuls_in_tf32(precision == TF32):
            torch.backends.cuda.enable_cudnn_sdp(cudnn)
            warm_up = DecodeSettings.from_config(
                cfg.decode, beam=max(args.beams), batch_tokens=batch_tokens, precision=weights_of(precision)
            )
            Translator(model, tokenizer, warm_up, args.device).translate_nbest(sources[:64])
            for beam in args.beams:
                plain = None  # the translations without cuda_graphs, to compare with
                for cuda_graphs, every, threads in variants(graphs, args.check_every, args.search_threads):
                    settings = DecodeSettings.from_config(
                        cfg.decode,
                        beam=beam,
                        batch_tokens=batch_tokens,
                        precision=weights_of(precision),
                        cuda_graphs=cuda_graphs,
                    )
                    checking_every(every)
                    searching_in(threads)
                    translator = Translator(model, tokenizer, settings, args.device)
                    best, first, steps, results = timed_calls(translator, sources, args.repeats, cuda_graphs)
                    hyps = [r[0].text for r in results]
                    tgt_tokens = sum(len(r[0].tgt_pieces) for r in results)
                    row = {
                        "bench": "decode",
                        "precision": precision,
                        "beam": beam,
                        "cuda_graphs": cuda_graphs,
                        "cudnn_attention": cudnn,
                        "sentences_per_s": round(len(sources) / best, 1),
                        "tgt_tokens_per_s": round(tgt_tokens / best),
                        "seconds": round(best, 2),
                    }
                    if every is not None:
                        row["check_every"] = every
                    if threads is not None:
                        row["search_threads"] = threads
                    if first is not None:
                        row["first_call_sentences_per_s"] = round(len(sources) / first, 1)
                        row["steps_a_call"] = {kind: n // args.repeats for kind, n in sorted(steps.items())}
                    if references:
                        row["bleu"] = score(hyps, references).bleu
                    if cudnn:
                        with_cudnn[precision, beam, cuda_graphs, every, threads] = hyps
                    elif (precision, beam, cuda_graphs, every, threads) in with_cudnn:
                        row["same_as_cudnn_on"] = share_equal(
                            hyps, with_cudnn[precision, beam, cuda_graphs, every, threads]
                        )
                    if precision == "fp32":
                        in_fp32[beam, cuda_graphs, every, threads] = hyps
                    elif precision == TF32 and (beam, cuda_graphs, every, threads) in in_fp32:
                        row["same_as_fp32"] = share_equal(hyps, in_fp32[beam, cuda_graphs, every, threads])
                    if plain is None:
                        plain = hyps
                    else:
                        row["same_lines"] = share_equal(hyps, plain)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    torch.backends.cuda.enable_cudnn_sdp(cudnn_choices[0])
    scoring = []
    if references:
        for precision in args.precisions:
            settings = DecodeSettings.from_config(cfg.decode, precision=weights_of(precision))
            translator = Translator(model, tokenizer, settings, args.device)
            with matmuls_in_tf32(precision == TF32):
                scoring.append(scoring_row(translator, sources, references, args.repeats, precision))
            print(json.dumps(scoring[-1]), flush=True)
    startup = startup_seconds(args.checkpoint, sources[0], args.device)
    print(json.dumps({"bench": "startup", "seconds": round(startup, 2)}), flush=True)
    if args.json:
        return

    print_table(
        rows,
        startup,
        f"decoding {len(sources)} sentences on {args.device}, batches of {batch_tokens} tokens, "
        f"{env['threads']} threads",
    )
    print_scoring_table(scoring)


def misaligned(references: list[str], share: float, seed: int = 0) -> tuple[list[str], set[int]]:
    """The references with a share of them moved one place along among themselves (each of those lines
    now holds another line's reference), and which lines those are."""
    lines = random.Random(seed).sample(range(len(references)), max(2, round(share * len(references))))
    noisy = list(references)
    for here, there in zip(lines, lines[1:] + lines[:1]):
        noisy[here] = references[there]
    return noisy, set(lines)


def detection(scores: list[float], bad: set[int]) -> tuple[float, float]:
    """(precision among the len(bad) lowest scores, ROC AUC: the chance a bad pair scores below a good one)."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    precision = len(bad & set(order[: len(bad)])) / len(bad)
    rank_sum = sum(rank for rank, i in enumerate(order, start=1) if i not in bad)  # good pairs ranked high
    good = len(scores) - len(bad)
    return precision, (rank_sum - good * (good + 1) / 2) / (good * len(bad))


def scoring_row(translator, sources, references, repeats: int, precision: str, share: float = 0.1) -> dict:
    """Forced decoding of the references: speed, perplexity, and how it finds misaligned pairs."""
    translator.score(sources[:64], references[:64])  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        found = translator.score(sources, references)
        best = min(best, time.perf_counter() - start)
    pieces = sum(len(f.piece_log_probs) for f in found)
    per_piece = sum(f.log_prob for f in found) / pieces
    noisy, bad = misaligned(references, share)
    found_precision, auc = detection([f.mean_log_prob for f in translator.score(sources, noisy)], bad)
    return {
        "bench": "score",
        "precision": precision,
        "pairs_per_s": round(len(sources) / best, 1),
        "tgt_tokens_per_s": round(pieces / best),
        "perplexity": round(math.exp(-per_piece), 3),
        "misaligned_share": share,
        "misaligned_found": round(found_precision, 3),
        "misaligned_auc": round(auc, 4),
    }


def print_scoring_table(rows: list[dict]) -> None:
    """The scoring rows as a table (also used by bench.py)."""
    if not rows:
        return
    share = rows[0]["misaligned_share"]
    print(f"\nscoring the references (forced decoding); {share:.0%} of them misaligned on purpose, found by score")
    print(f"{'precision':9} {'pairs/s':>8} {'tgt tok/s':>10} {'perplexity':>10} {'found':>6} {'AUC':>6}")
    for r in rows:
        print(
            f"{r['precision']:9} {r['pairs_per_s']:>8} {r['tgt_tokens_per_s']:>10} {r['perplexity']:>10} "
            f"{r['misaligned_found']:>6} {r['misaligned_auc']:>6}"
        )


def print_table(rows: list[dict], startup: float, title: str) -> None:
    """The decode rows as a table (also used by bench.py)."""
    print(f"\n{title}")
    cudnn = any(r.get("cudnn_attention") is False for r in rows)  # a column only where it was turned off
    checks = any("check_every" in r for r in rows)  # a column only where the interval was chosen
    threads = any("search_threads" in r for r in rows)  # the same for search.py's threads
    print(
        f"{'precision':9} {'beam':>4} {'graphs':>6} " + (f"{'cuDNN':>5} " if cudnn else "")
        + (f"{'check':>5} " if checks else "") + (f"{'thr':>3} " if threads else "")
        + f"{'sent/s':>8} {'1st call':>8} {'tgt tok/s':>10} {'BLEU':>6} {'same':>6}"
    )  # fmt: skip
    for r in rows:
        print(
            f"{r['precision']:9} {r['beam']:>4} {'on' if r.get('cuda_graphs') else 'off':>6} "
            + (f"{'on' if r.get('cudnn_attention', True) else 'off':>5} " if cudnn else "")
            + (f"{r.get('check_every', '-'):>5} " if checks else "")
            + (f"{r.get('search_threads', '-'):>3} " if threads else "")
            + f"{r['sentences_per_s']:>8} {r.get('first_call_sentences_per_s', '-'):>8} {r['tgt_tokens_per_s']:>10} "
            f"{r.get('bleu', '-'):>6} {r.get('same_lines', '-'):>6}"
        )  # fmt: skip
    if any("first_call_sentences_per_s" in r for r in rows):
        print("sent/s: the best of the repeated calls; 1st call: a translator's first (fixed slots capture there)")
        for r in rows:
            if "steps_a_call" in r:
                said = f", cuDNN {'on' if r['cudnn_attention'] else 'off'}" if cudnn else ""
                said += f", done read every {r['check_every']} steps" if "check_every" in r else ""
                form = f"{r['precision']} beam {r['beam']}{said}"
                print(f"fixed slots, {form}: steps a timed call {r['steps_a_call']}")
    for r in rows:
        if "same_as_cudnn_on" in r:
            graphs = "fixed slots" if r["cuda_graphs"] else "search.py"
            graphs += f" (done read every {r['check_every']} steps)" if "check_every" in r else ""
            print(f"cuDNN off, {r['precision']} beam {r['beam']}, {graphs}: same lines as on {r['same_as_cudnn_on']}")
        if "same_as_fp32" in r:
            graphs = "fixed slots" if r["cuda_graphs"] else "search.py"
            print(f"tf32 (fp32, TF32 matmuls) beam {r['beam']}, {graphs}: same lines as fp32 {r['same_as_fp32']}")
    print(f"translate start-up on one sentence: {startup:.2f} s")


if __name__ == "__main__":
    main()
