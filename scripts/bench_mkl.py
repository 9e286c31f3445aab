"""fp32 matmul speed with MKL as torch ships it against MKL given its fast kernels on an AMD CPU
(`mt.fastpath.cpu_process.mkl_fast_kernels_on_amd`, which `tune_process` applies to every CPU run).

MKL picks its kernels once per process, so each side runs in a fresh process, alternating (A, B, A, B ...):
the forward and backward matmuls of a multi30k_cpu_fp32 update (~2,400 target tokens, d_model 192, FFN
768, vocabulary 8,000), each repeated. On a CPU that is not AMD both sides run the same kernels.

    .venv/bin/python scripts/bench_mkl.py [--pairs 4] [--repeats 20]
Prints one JSON line per process, then the medians. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

TOKENS, D_MODEL, FFN, VOCAB = 2400, 192, 768, 8000
SHAPES = [  # (m, k, n) of the forward matmuls; the backward ones are the same shapes transposed
    (TOKENS, D_MODEL, VOCAB),  # output layer
    (TOKENS, D_MODEL, FFN),
    (TOKENS, FFN, D_MODEL),
    (TOKENS, D_MODEL, D_MODEL),  # attention projections
]


def measure(fast: bool, repeats: int) -> dict:
    """GFLOP/s over SHAPES (forward, input gradient and weight gradient of each), in this process."""
    from mt.fastpath import cpu_process

    applied = cpu_process.mkl_fast_kernels_on_amd() if fast else False
    import torch

    torch.manual_seed(0)
    operands = []
    for m, k, n in SHAPES:
        x, w, g = torch.randn(m, k), torch.randn(k, n), torch.randn(m, n)
        operands += [(x, w), (g, w.t()), (x.t(), g)]
    flops = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b in operands) * repeats
    for a, b in operands:
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        for a, b in operands:
            a @ b
    seconds = time.perf_counter() - start
    return {"fast_kernels": applied, "seconds": round(seconds, 3), "gflops": round(flops / seconds / 1e9, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--child", choices=["stock", "fast"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child == "fast", args.repeats)))
        return
    results = {"stock": [], "fast": []}
    for pair in range(args.pairs):
        order = ("stock", "fast") if pair % 2 == 0 else ("fast", "stock")
        for side in order:
            command = [sys.executable, __file__, "--child", side, "--repeats", str(args.repeats)]
            line = subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-1]
            result = json.loads(line)
            print(json.dumps({"pair": pair, "side": side, **result}), flush=True)
            results[side].append(result["gflops"])
    stock, fast = (statistics.median(results[side]) for side in ("stock", "fast"))
    print(json.dumps({"median_gflops_stock": stock, "median_gflops_fast": fast, "ratio": round(fast / stock, 3)}))


if __name__ == "__main__":
    main()
