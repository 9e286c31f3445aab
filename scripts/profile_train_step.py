"""Where a training step's GPU time goes: torch.profiler's kernel table for one base-model step at a WMT-like
and at a Multi30k batch, in the forms a run takes, each table closed by the time per kind of kernel (matrix
products, attention, layer norm, casts and copies, ...); then the label-smoothed loss alone (forward +
backward) in the forms that could replace it: what decides which fusion pays.

Forms: `autocast` (fp32 weights under bf16 autocast, the eager step), `bf16w` (a bf16 copy of the weights
without autocast, Adam stepping the fp32 ones: train.bf16_weights, the fastest step measured). The bf16w
step runs here eagerly: the kernels its CUDA graphs replay, without the host's gaps between them, which a
kernel's device time does not count anyway.

    python scripts/profile_train_step.py --device cuda
    python scripts/profile_train_step.py --device cuda --forms bf16w --shapes wmt --no-loss
    python scripts/profile_train_step.py --device cpu --loss-only --loss-sizes 2000x8000

On a CPU (for a check of the script) the tables hold ops' own CPU time instead of kernels' device time.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from mt.fastpath import loss_forms, tune_process
from mt.fastpath.cuda_graphs import GraphedTraining, capturable_adam
from mt.model import Transformer
from mt.precision import autocast
from mt.training.loss import label_smoothed_loss

SIZES = {
    "base": dict(d_model=512, heads=8, ffn_dim=2048, encoder_layers=6, decoder_layers=6, norm_first=True, dropout=0.1),
    "tiny": dict(d_model=64, heads=4, ffn_dim=128, encoder_layers=1, decoder_layers=1, norm_first=True, dropout=0.1),
}
SHAPES = {"wmt": (780, 32, 37000), "multi30k": (256, 16, 10000)}  # sentences, length (both sides), vocabulary
FORMS = ("autocast", "bf16w")
PROFILED_STEPS = 3
# Kinds of kernel (CUDA kernel names, or aten op names on a CPU), the first pattern that matches a name wins.
KINDS = [
    ("layer norm", r"layer_norm|layernorm"),
    ("optimizer and clipping", r"adam|multi_tensor|foreach|_amp_|clip"),
    ("attention", r"flash|fmha|attention|_sdpa|cudnn.*sdp"),
    ("matrix products", r"gemm|cutlass|xmma|cublas|nvjet|splitk|sm\d+_|aten::(mm|addmm|bmm|matmul|_scaled_mm)\b"),
    ("softmax, gathers and reductions (the loss, bias gradients)", r"softmax|nll|gather|reduce|sum|aten::mean"),
    ("casts and copies", r"copy|cast|convert|concat|aten::cat\b|aten::to\b|aten::_to|clone"),
    ("dropout", r"dropout|bernoulli|philox"),
    ("embedding", r"embedding|index_select|indexing_backward|index_put"),
    ("elementwise (adds, relu, masks, ...)", r"elementwise|vectorized|add|mul|relu|threshold|where|fill|aten::"),
]


def kind_of(name: str) -> str:
    lowered = name.lower()
    for kind, pattern in KINDS:
        if re.search(pattern, lowered):
            return kind
    return "other"


def make_step(form: str, size: str, shape: str, device: torch.device):
    """One training step of the form (forward, loss, backward, clipping at 1, Adam), on a batch of random tokens."""
    sentences, length, vocab = SHAPES[shape]
    torch.manual_seed(0)
    model = Transformer(vocab, vocab, **SIZES[size]).to(device).train()
    src = torch.randint(4, vocab, (sentences, length), device=device)
    tgt = torch.randint(4, vocab, (sentences, length), device=device)
    if form == "bf16w":

        def loss_fn(net, src, tgt_in, tgt_out):
            return label_smoothed_loss(net(src, tgt_in), tgt_out, 0.1, pad_id=0)

        optimizer = capturable_adam(model.parameters(), (0.9, 0.98), 1e-9, 0.0, device)
        graphed = GraphedTraining(model, optimizer, loss_fn, clip_norm=1.0, capture=False, weights_dtype=torch.bfloat16)

        def step():
            graphed.accumulate(src, tgt, tgt, 1.0 / tgt.numel())
            graphed.apply(1e-4)

        return step

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=device.type == "cuda")

    def step():
        with autocast(device, "bf16"):
            logits = model(src, tgt)
        loss, _ = label_smoothed_loss(logits, tgt, 0.1, pad_id=0)
        (loss / tgt.numel()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def kernel_table(form: str, size: str, shape: str, device: torch.device, rows: int) -> dict[str, float]:
    """Print the kernels of one step of form by their time, then the time per kind; return ms per kind."""
    step = make_step(form, size, shape, device)
    for _ in range(3):  # warm-up: allocator, cuBLAS plans, Adam's state
        step()
    synchronize(device)
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(PROFILED_STEPS):
            step()
        synchronize(device)
    on = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    events = [e for e in prof.key_averages() if e.device_type == on]

    def own_us(e) -> float:
        return e.self_device_time_total if cuda else e.self_cpu_time_total

    total = sum(own_us(e) for e in events) or 1.0

    def line(us: float, calls: int, what: str) -> str:
        return f"{100 * us / total:5.1f}% {us / PROFILED_STEPS / 1000:8.2f} {calls // PROFILED_STEPS:6d}  {what}"

    sentences, length, vocab = SHAPES[shape]
    where = "GPU time" if cuda else "CPU time (ops' own)"
    print(f"\n== {form}, {size}, {shape}: {sentences} x {length}, vocab {vocab}: {where} per step", end=" ")
    print(f"{total / PROFILED_STEPS / 1000:.1f} ms")
    print(f"{'share':>6} {'ms/step':>8} {'calls':>6}  kernel")
    for e in sorted(events, key=lambda e: -own_us(e))[:rows]:
        print(line(own_us(e), e.count, e.key[:110]))
    us_by_kind: dict[str, float] = defaultdict(float)
    calls_by_kind: dict[str, int] = defaultdict(int)
    for e in events:
        us_by_kind[kind_of(e.key)] += own_us(e)
        calls_by_kind[kind_of(e.key)] += e.count
    print(f"-- by kind ({form}, {shape})")
    for kind, us in sorted(us_by_kind.items(), key=lambda item: -item[1]):
        print(line(us, calls_by_kind[kind], kind))
    return {kind: us / PROFILED_STEPS / 1000 for kind, us in us_by_kind.items()}


def current(logits, target):
    return label_smoothed_loss(logits, target, 0.1, pad_id=0)


def torch_cross_entropy(logits, target):
    loss = F.cross_entropy(logits.float(), target, ignore_index=0, label_smoothing=0.1, reduction="sum")
    with torch.no_grad():
        nll = F.cross_entropy(logits.float(), target, ignore_index=0, reduction="sum")
    return loss, nll


def time_loss(name, fn, rows: int, vocab: int, device, repeats: int = 10) -> None:
    torch.manual_seed(0)  # every form the same logits: their losses printed side by side agree
    logits = torch.randn(rows, vocab, device=device, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, vocab, (rows,), device=device)
    start = time.perf_counter()
    loss, _ = fn(logits, target)
    loss.backward()
    synchronize(device)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeats):
        loss, nll = fn(logits, target)
        loss.backward()
    synchronize(device)
    ms = (time.perf_counter() - start) / repeats * 1000
    print(f"{name:28} {rows:>6} x {vocab:<6} {ms:7.2f} ms (first call {first:.1f} s) loss {float(loss.detach()):.1f}")


LOSS_SIZES = [(24960, 37000), (4096, 10000)]  # (rows, vocabulary): the WMT-like batch's logits, a Multi30k one's


def loss_table(device: torch.device, sizes: list[tuple[int, int]]) -> None:
    """The loss alone, forward + backward, in each form, at each size."""
    print("\n== the label-smoothed loss alone, forward + backward, bf16 logits")
    for rows, vocab in sizes:
        for name, fn in [
            ("as the trainer calls it", current),
            ("F.cross_entropy", torch_cross_entropy),
            ("stock ops", lambda logits, target: loss_forms.stock(logits, target, 0.1, 0)),
            ("stock ops, compiled", lambda logits, target: loss_forms.compiled_stock(logits, target, 0.1, 0)),
            ("closed form, compiled", lambda logits, target: loss_forms.closed_form(logits, target, 0.1, 0)),
        ]:
            time_loss(name, fn, rows, vocab, device)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--rows", type=int, default=25, help="kernels shown per table")
    p.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS))
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--size", choices=list(SIZES), default="base", help="tiny: a check of the script on a CPU")
    p.add_argument("--no-loss", action="store_true", help="leave out the loss alone in its forms")
    p.add_argument("--loss-only", action="store_true", help="the loss alone, no step profile")
    p.add_argument(
        "--loss-sizes",
        nargs="+",
        default=[f"{rows}x{vocab}" for rows, vocab in LOSS_SIZES],
        help="logits the loss alone is timed at, ROWSxVOCABULARY (default: %(default)s)",
    )
    args = p.parse_args()
    device = torch.device(args.device)
    tune_process(device, training=True)
    for shape in [] if args.loss_only else args.shapes:
        for form in args.forms:
            kernel_table(form, args.size, shape, device, args.rows)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if args.no_loss:
        return
    loss_table(device, [tuple(int(n) for n in size.split("x")) for size in args.loss_sizes])


if __name__ == "__main__":
    main()
