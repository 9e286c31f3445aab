"""Where decoding spends its time, per precision, with and without fixed slots (decode.cuda_graphs): for each
form, the wall time of a first call (eager warm-up runs and CUDA graph captures included) and of a steady one,
with how many steps ran eagerly, were captured or replayed; a steady call under cProfile (the host's Python,
by function) and under torch.profiler (the ops' host and device time, the kernel and host-op tables; a device
busy for less than the wall time waits for the host). How the cause of slow bf16 decoding under autocast on a
GPU was found (docs/benchmarks.md, GPU decoding).

    python scripts/profile_decode.py --checkpoint CKPT --src test2016.de --device cuda --beams 5 1 \\
        --cuda-graphs both --attention both --trace /tmp/traces

--attention written is a what-if: attention written out (mt/model/attention.py's `attention`) instead of
F.scaled_dot_product_attention for queries of at most 8 positions (a decoding step's), by replacing
mt.fastpath.fused_attention_pays in this process.

First it times detokenizing the lines one by one, each the way sentencepiece is called (see tokenizer_calls).
The batches are searched one after the other in the calling thread, where the profilers look (translate on a
CPU searches 4 batches or more in two threads). On CUDA, after each fixed-slot form's steady call, every
captured step is replayed on its own (replays_alone): its launch on the host, its time on the device and its
pace back to back, beside the call's wall time a step.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import io
import pstats
import time
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from mt import fastpath
from mt.data.lines import read_lines
from mt.decoding.translator import DecodeSettings, Translator
from mt.fastpath import tune_process
from mt.inference import load_for_inference

SHORT_QUERY = 8  # query positions of a decoding step: 1 (self-attention), the beam (cross-attention)
STOCK_CHOICE = fastpath.fused_attention_pays


def attention_choice(kind: str):
    """fastpath.fused_attention_pays for --attention kind."""
    if kind == "sdpa":
        return STOCK_CHOICE
    return lambda q: STOCK_CHOICE(q) and q.size(-2) > SHORT_QUERY


def timed_call(translator: Translator, sources: list[str], sync) -> tuple[float, Counter]:
    """Seconds of one translate_nbest call, and the steps it ran eagerly, captured and replayed."""
    before = Counter(translator.replays.counts)
    sync()
    start = time.perf_counter()
    translator.translate_nbest(sources)
    sync()
    return time.perf_counter() - start, Counter(translator.replays.counts) - before


def steps_text(counts: Counter) -> str:
    """Fixed-slot steps by how they ran (search.py's loop runs none of them)."""
    if not counts:
        return ""
    return " (steps: " + ", ".join(f"{counts[kind]} {kind}" for kind in ("eager", "captured", "replayed")) + ")"


def python_profile(translator: Translator, sources: list[str], sync, rows: int) -> str:
    """The top functions of one call by their own time (builtins included: a graph's replay, a wait in .item())."""
    profiler = cProfile.Profile()
    profiler.enable()
    translator.translate_nbest(sources)
    sync()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(rows)
    text = out.getvalue()
    return text[text.index("   ncalls") :] if "   ncalls" in text else text


def tokenizer_calls(tokenizer, sources: list[str]) -> str:
    """Microseconds a line to detokenize each line on its own: in a call on a list of one (sentencepiece then
    starts a pool of threads; what translate did per hypothesis before mt.data.tokenizer.BATCH_CALL_PAYS), in
    a call on the ids alone, and in one call on every line."""
    ids = tokenizer.tgt.encode(sources)
    forms = {
        "a list of one each": lambda: [tokenizer.tgt.decode([seq]) for seq in ids],
        "the ids alone each": lambda: [tokenizer.tgt.decode(seq) for seq in ids],
        "one call on all": lambda: tokenizer.tgt.decode(ids),
    }
    timings = []
    for name, form in forms.items():
        start = time.perf_counter()
        form()
        timings.append(f"{name} {(time.perf_counter() - start) * 1e6 / len(ids):.1f}")
    return "sentencepiece decoding, microseconds a line: " + "; ".join(timings)


def replays_alone(translator: Translator, repeats: int) -> str:
    """Each captured step replayed on its own, after a steady call: the host's time to launch one replay, the
    device's time for one (CUDA events), and the wall per replay back to back. A call whose wall per step is
    far above these spends its time outside the steps; one near the device's time is bound by its kernels.
    Each replay writes at the last position of its window (the step's state is reloaded by the next call)."""
    with torch.inference_mode():  # the searches' tensors were made in it (Translator._search)
        return _replays_alone(translator, repeats)


def _replays_alone(translator: Translator, repeats: int) -> str:
    rows = []
    for (key, window, parity), graph in translator.replays.graphs.items():
        search = translator._searches.get(key)  # a diagnosis may look inside; the translator keeps them by key
        if search is None:
            continue
        position = search.state.position
        saved = position.clone()
        launch = device = 0.0
        for _ in range(repeats):  # one at a time: each replay's own host and device time
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            position.fill_(window - 1)
            torch.cuda.synchronize()
            start = time.perf_counter()
            begin.record()
            graph.replay()
            end.record()
            launch += time.perf_counter() - start
            torch.cuda.synchronize()
            device += begin.elapsed_time(end) / 1e3
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):  # back to back, as a search runs them
            position.fill_(window - 1)
            graph.replay()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
        position.copy_(saved)
        rows.append(
            f"  rows {key[0]:>5} x {key[1]:>3} positions, window {window:>3}, store {parity}: "
            f"launch {launch / repeats * 1e6:7.0f} us, "
            f"device {device / repeats * 1e6:7.0f} us, back to back {wall / repeats * 1e6:7.0f} us a replay"
        )
    if not rows:
        return "no captured steps"
    return f"each captured step replayed alone ({repeats} times):\n" + "\n".join(rows)


def report(translator: Translator, sources: list[str], device: torch.device, args, form: str) -> None:
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    first, first_steps = timed_call(translator, sources, sync)
    steady, steady_steps = timed_call(translator, sources, sync)
    print(f"\n==== {form}, {len(sources)} lines on {device}")
    print(f"first call {first * 1e3:.0f} ms{steps_text(first_steps)}")
    steps = sum(steady_steps.values())
    per_step = f", {steady * 1e3 / steps:.2f} ms of wall a step" if steps else ""
    print(f"steady call {steady * 1e3:.0f} ms{steps_text(steady_steps)}{per_step}", flush=True)
    if cuda and args.replays:
        print(replays_alone(translator, args.replays), flush=True)
    if args.python_rows:
        table = python_profile(translator, sources, sync, args.python_rows)
        print(f"\nthe host's Python in a steady call (cProfile), by own time:\n{table}")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        translator.translate_nbest(sources)
        sync()
        wall = time.perf_counter() - start
    if args.trace:
        path = Path(args.trace) / (form.replace(", ", "_").replace(" ", "-") + ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(path))
        with open(path, "rb") as raw, gzip.open(f"{path}.gz", "wb") as packed:
            packed.write(raw.read())
        path.unlink()
    ops = prof.key_averages()
    host = sum(op.self_cpu_time_total for op in ops) / 1e3
    on_device = f", {sum(op.self_device_time_total for op in ops) / 1e3:.0f} ms on the device" if cuda else ""
    print(f"profiled call {wall * 1e3:.0f} ms: ops {host:.0f} ms on the host (waits included){on_device}")
    tables = [("self_device_time_total", "by device time")] if cuda else []
    for key, title in tables + [("self_cpu_time_total", "by host time")]:
        print(f"\nops {title}:\n{ops.table(sort_by=key, row_limit=args.rows, max_name_column_width=70)}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--lines", type=int, default=300)
    p.add_argument("--beams", nargs="+", type=int, default=[1])
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--batch-tokens", type=int, help="decode.batch_tokens (default: the checkpoint's)")
    p.add_argument("--cuda-graphs", choices=["off", "on", "both"], default="off", help="decode.cuda_graphs")
    p.add_argument("--attention", choices=["sdpa", "written", "both"], default="sdpa", help="see below")
    p.add_argument("--rows", type=int, default=15, help="ops shown per table")
    p.add_argument("--python-rows", type=int, default=15, help="functions shown from cProfile (0: no cProfile)")
    p.add_argument("--replays", type=int, default=10, help="replays of each captured step alone (CUDA; 0: none)")
    p.add_argument("--trace", help="a folder for each form's Chrome trace (.json.gz; chrome://tracing, Perfetto)")
    args = p.parse_args()
    device = torch.device(args.device)
    tune_process(device, training=False)  # as translate does
    # Searched in this thread: cProfile and torch.profiler see this thread's work alone, and on a CPU translate
    # searches a call of 4 batches or more in two worker threads (fastpath.search_threads), leaving them blind.
    fastpath.search_threads = lambda *_: 1
    model, tokenizer, cfg = load_for_inference([args.checkpoint])
    sources = read_lines(args.src)[: args.lines]
    print(tokenizer_calls(tokenizer, sources), flush=True)
    kinds = ["sdpa", "written"] if args.attention == "both" else [args.attention]
    for beam, precision in [(beam, precision) for beam in args.beams for precision in args.precisions]:
        for graphs in {"off": [False], "on": [True], "both": [False, True]}[args.cuda_graphs]:
            for kind in kinds:
                fastpath.fused_attention_pays = attention_choice(kind)
                settings = DecodeSettings.from_config(
                    cfg.decode, beam=beam, precision=precision, cuda_graphs=graphs, batch_tokens=args.batch_tokens
                )
                translator = Translator(model, tokenizer, settings, device)
                form = f"{precision}, beam {beam}, fixed slots {'on' if graphs else 'off'}, attention {kind}"
                report(translator, sources, device, args, form)
    fastpath.fused_attention_pays = STOCK_CHOICE


if __name__ == "__main__":
    main()
