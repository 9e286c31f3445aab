"""Model speed on this machine: training tokens/s (forward + backward + Adam) and decode-step latency.

    make bench                      # or: .venv/bin/python scripts/bench_model.py --presets small
Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time

import torch

from mt.allocator import keep_large_buffers
from mt.loss import label_smoothed_loss
from mt.model import Transformer
from mt.translator import autocast

PRESETS = {
    "small": dict(d_model=256, heads=4, ffn_dim=1024, encoder_layers=3, decoder_layers=3, norm_first=True),
    "base": dict(d_model=512, heads=8, ffn_dim=2048, encoder_layers=6, decoder_layers=6, norm_first=False),
}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_training(preset: str, precision: str, vocab: int, tgt_tokens: int, steps: int) -> dict:
    """A Multi30k-like batch: sentences of ~27 target / ~28 source pieces, tgt_tokens per batch."""
    torch.manual_seed(0)
    model = Transformer(vocab, vocab, **PRESETS[preset]).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)  # as trained
    batch, tgt_len, src_len = max(1, tgt_tokens // 27), 27, 28
    src = torch.randint(4, vocab, (batch, src_len))
    tgt = torch.randint(4, vocab, (batch, tgt_len))
    device = torch.device("cpu")

    def step():
        with autocast(device, precision):
            logits = model(src, tgt, keep=torch.ones_like(tgt, dtype=torch.bool))
        loss, _ = label_smoothed_loss(logits, tgt.reshape(-1), 0.1)
        (loss / tgt.numel()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    seconds = sorted(times)[len(times) // 2]  # the median: robust to a noisy neighbour
    return {
        "bench": "train", "preset": preset, "precision": precision, "tgt_tokens_per_step": batch * tgt_len,
        "ms_per_step": round(seconds * 1000, 1), "tgt_tokens_per_s": round(batch * tgt_len / seconds),
        "peak_rss_mib": round(peak_rss_mib()),
    }


@torch.no_grad()
def bench_decode_steps(preset: str, vocab: int, batch: int, prefixes: list[int], repeats: int) -> list[dict]:
    """Latency of one decoder step after `prefix` tokens: with the KV cache vs re-running the prefix."""
    torch.manual_seed(0)
    model = Transformer(vocab, vocab, **PRESETS[preset]).eval()
    src = torch.randint(4, vocab, (batch, 20))
    rows = []
    for prefix in prefixes:
        state = model.start_state(src)
        tokens = torch.randint(4, vocab, (batch, prefix + 1))
        for t in range(prefix):
            _, state = model.step(tokens[:, t], state)
        caches = [dict(c) for c in state.caches]
        start = time.perf_counter()
        for _ in range(repeats):
            state.caches = [dict(c) for c in caches]
            state.position = prefix
            model.step(tokens[:, prefix], state)
        cached = (time.perf_counter() - start) / repeats
        memory, src_mask = model.encode(src)
        start = time.perf_counter()
        for _ in range(repeats):
            model.logits(model.decode(tokens, memory, src_mask)[:, -1])
        uncached = (time.perf_counter() - start) / repeats
        rows.append({"bench": "decode_step", "preset": preset, "batch": batch, "prefix": prefix,
                     "cached_ms": round(cached * 1000, 2), "full_rerun_ms": round(uncached * 1000, 2)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--presets", nargs="+", default=["small", "base"], choices=list(PRESETS))
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--tgt-tokens", type=int, default=4050)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--no-decode", action="store_true", help="training figures only")
    p.add_argument("--no-train", action="store_true", help="decoder step figures only")
    p.add_argument("--json", action="store_true", help="JSON lines only, no table")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_large_buffers()  # as mt-train does
    env = {"bench": "env", "torch": torch.__version__, "threads": torch.get_num_threads(),
           "cpu": platform.processor() or platform.machine(), "capability": torch.backends.cpu.get_cpu_capability()}
    print(json.dumps(env), flush=True)
    results = []
    for preset in [] if args.no_train else args.presets:
        for precision in args.precisions:
            results.append(bench_training(preset, precision, args.vocab, args.tgt_tokens, args.steps))
            print(json.dumps(results[-1]), flush=True)
    decode = [] if args.no_decode else bench_decode_steps("small", args.vocab, batch=32, prefixes=[8, 32, 128],
                                                          repeats=20)
    for row in decode:
        print(json.dumps(row), flush=True)
    if args.json:
        return

    print(f"\ntraining, forward+backward+Adam, {args.tgt_tokens} target tokens/step, vocab {args.vocab}, "
          f"{env['threads']} threads, torch {env['torch']}")
    print(f"{'preset':8} {'precision':9} {'tgt tok/s':>10} {'ms/step':>9} {'peak RSS MiB':>13}")
    for r in results:
        print(f"{r['preset']:8} {r['precision']:9} {r['tgt_tokens_per_s']:>10} {r['ms_per_step']:>9} "
              f"{r['peak_rss_mib']:>13}")
    if not decode:
        return
    print("\ndecode step latency, small preset, batch 32, fp32")
    print(f"{'prefix':>6} {'with cache ms':>14} {'re-run prefix ms':>17}")
    for r in decode:
        print(f"{r['prefix']:>6} {r['cached_ms']:>14} {r['full_rerun_ms']:>17}")


if __name__ == "__main__":
    main()
