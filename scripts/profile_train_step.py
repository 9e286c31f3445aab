"""Where a training step's GPU time goes: torch.profiler's kernel table for one base-model step at a WMT-like
and at a Multi30k batch (bf16), then the label-smoothed loss alone (forward + backward) in the forms that
could replace it: what decides which fusion pays.

    python scripts/profile_train_step.py --device cuda
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from mt.fastpath import tune_process
from mt.model import Transformer
from mt.precision import autocast
from mt.training.loss import label_smoothed_loss

BASE = dict(d_model=512, heads=8, ffn_dim=2048, encoder_layers=6, decoder_layers=6, norm_first=True, dropout=0.1)
SHAPES = {"wmt": (780, 32, 37000), "multi30k": (256, 16, 10000)}  # sentences, length (both sides), vocabulary


def kernel_table(shape: str, device: torch.device, rows: int) -> None:
    sentences, length, vocab = SHAPES[shape]
    torch.manual_seed(0)
    model = Transformer(vocab, vocab, **BASE).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    src = torch.randint(4, vocab, (sentences, length), device=device)
    tgt = torch.randint(4, vocab, (sentences, length), device=device)

    def step():
        with autocast(device, "bf16"):
            logits = model(src, tgt)
        loss, _ = label_smoothed_loss(logits, tgt, 0.1, pad_id=0)
        (loss / tgt.numel()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(e.self_device_time_total for e in events)
    print(f"\n== {shape}: {sentences} x {length}, vocab {vocab}: GPU time per step {total / 3 / 1000:.1f} ms")
    print(f"{'share':>6} {'ms/step':>8} {'calls':>6}  kernel")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:rows]:
        share = e.self_device_time_total / total
        print(f"{100 * share:5.1f}% {e.self_device_time_total / 3 / 1000:8.2f} {e.count // 3:6d}  {e.key[:110]}")


def current(logits, target):
    return label_smoothed_loss(logits, target, 0.1, pad_id=0)


def torch_cross_entropy(logits, target):
    loss = F.cross_entropy(logits.float(), target, ignore_index=0, label_smoothing=0.1, reduction="sum")
    with torch.no_grad():
        nll = F.cross_entropy(logits.float(), target, ignore_index=0, reduction="sum")
    return loss, nll


def time_loss(name, fn, rows: int, vocab: int, device, repeats: int = 10) -> None:
    logits = torch.randn(rows, vocab, device=device, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, vocab, (rows,), device=device)
    start = time.perf_counter()
    loss, _ = fn(logits, target)
    loss.backward()
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        loss, nll = fn(logits, target)
        loss.backward()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) / repeats * 1000
    print(f"{name:28} {rows:>6} x {vocab:<6} {ms:7.2f} ms (first call {first:.1f} s) loss {float(loss):.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--rows", type=int, default=25, help="kernels shown per table")
    args = p.parse_args()
    device = torch.device(args.device)
    tune_process(device, training=True)
    for shape in SHAPES:
        kernel_table(shape, device, args.rows)
        torch.cuda.empty_cache()
    print("\n== the label-smoothed loss alone, forward + backward, bf16 logits")
    compiled = torch.compile(current, dynamic=True)
    for rows, vocab in [(24960, 37000), (4096, 10000)]:
        for name, fn in [("log_softmax (now)", current), ("F.cross_entropy", torch_cross_entropy),
                         ("torch.compile(now), dynamic", compiled)]:  # fmt: skip
            time_loss(name, fn, rows, vocab, device)


if __name__ == "__main__":
    main()
