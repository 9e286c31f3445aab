"""Memory of one process translating a long input call after call, as `translate` does a file in chunks and
`mt-serve` does requests: the process's RSS after each call, and (with glibc) what malloc holds live and
what it keeps freed. A long input should level off: growth that goes on with the number of lines, while the
live bytes stay, is heap the allocator keeps, fragmented.

    .venv/bin/python scripts/bench_memory.py --checkpoint CKPT --src data/multi30k/train.de \\
        [--copies 6] [--call-lines 2000] [--beam 5] [--dtype bf16] [--device cpu] [--json out.jsonl]

--copies N: the source N times, each copy after the first in another random order (seeded), so that the
calls hold other mixes of lengths than the first pass did. Prints a line per call and, with --json, one
JSON object per call. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GIB = 2**30


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


def malloc_info():
    """glibc's mallinfo2 as a function of no arguments, or None where there is none (musl, macOS, old glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        return libc.mallinfo2
    except (OSError, AttributeError):
        return None


def rss_gib() -> float:
    """Resident memory now (Linux), or the peak so far elsewhere."""
    statm = Path("/proc/self/statm")
    if statm.exists():
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / GIB
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, KiB elsewhere
    return peak * (1 if sys.platform == "darwin" else 1024) / GIB


def input_lines(path: str, copies: int, seed: int) -> list[str]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out = list(lines)
    for copy in range(1, copies):
        shuffled = list(lines)
        random.Random(seed + copy).shuffle(shuffled)
        out += shuffled
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", default=str(REPO / "data/multi30k/train.de"))
    p.add_argument("--copies", type=int, default=1, help="the source this many times (later copies shuffled)")
    p.add_argument("--call-lines", type=int, default=2_000, help="lines per translate call")
    p.add_argument("--beam", type=int, help="beam size, 1 greedy (default: the checkpoint's)")
    p.add_argument("--dtype", help="bf16, fp32, ... (default: the checkpoint's on this device)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0, help="seeds the shuffled copies")
    p.add_argument("--json", help="append one JSON object per call to this file")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    from mt import load_translator

    torch.manual_seed(0)
    choices = ({"beam": args.beam} if args.beam else {}) | ({"precision": args.dtype} if args.dtype else {})
    translator = load_translator(args.checkpoint, device=args.device, **choices)
    lines = input_lines(args.src, args.copies, args.seed)
    info = malloc_info()
    out = open(args.json, "a", encoding="utf-8") if args.json else None
    print(f"{len(lines):,} lines in calls of {args.call_lines:,}; RSS before any: {rss_gib():.2f} GiB", flush=True)
    start = time.perf_counter()
    for first in range(0, len(lines), args.call_lines):
        translator.translate_nbest(lines[first : first + args.call_lines])  # as translate does (no notes logged)
        row = {"lines": min(first + args.call_lines, len(lines)), "rss_gib": round(rss_gib(), 3)}
        if info is not None:
            m = info()
            row |= {"live_gib": round(m.uordblks / GIB, 3), "free_gib": round(m.fordblks / GIB, 3)}
        row["seconds"] = round(time.perf_counter() - start, 1)
        print("  ".join(f"{key} {value}" for key, value in row.items()), flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
    if out:
        out.close()


if __name__ == "__main__":
    main()
