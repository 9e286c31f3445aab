"""Model speed on the machine it runs on: training tokens/s, TFLOP/s and MFU (forward + backward + Adam), beside a plain
torch.nn.Transformer of the same size in the same process, and decode-step latency.

    make bench                                   # CPU: small and base presets, fp32 and bf16
    .venv/bin/python scripts/bench_model.py --device cuda
        # GPU: base preset, bf16, a WMT-like batch (780 x 32 tokens, vocab 37k) and a Multi30k batch
        # (300 x 28/27, vocab 10k), ours and nn.Transformer's, ours replayed as CUDA graphs too
        # (mt.fastpath.cuda_graphs, as mt-train runs on CUDA), with fp32 weights under autocast and with
        # a bf16 working copy of them (train.bf16_weights); --compile for each under torch.compile too
    .venv/bin/python scripts/bench_model.py --presets tiny --shapes tiny --kinds mt torch graphs graphs_bf16w
        # a check, in seconds on a CPU, that every kind of step runs (the graphs without capture)
Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import resource
import time

import torch
import torch.nn.functional as F
from torch import nn

from mt import fastpath
from mt.fastpath import tune_process
from mt.fastpath.cuda_graphs import GraphedTraining, capturable_adam
from mt.model import LayerCache, Transformer
from mt.precision import autocast
from mt.training.flops import parameter_counts, peak_flops, training_flops
from mt.training.loss import label_smoothed_loss

PRESETS = {
    "small": dict(d_model=256, heads=4, ffn_dim=1024, encoder_layers=3, decoder_layers=3, norm_first=True),
    "base": dict(d_model=512, heads=8, ffn_dim=2048, encoder_layers=6, decoder_layers=6, norm_first=False),
    "tiny": dict(d_model=64, heads=4, ffn_dim=128, encoder_layers=1, decoder_layers=1, norm_first=True),  # a check
}
MODEL_NAMES = {
    "mt": "mt",
    "graphs": "mt+graphs",
    "graphs_bf16w": "mt+graphs+bf16w",
    "graphs_bf16w_cudnn": "mt+graphs+bf16w+cudnn",
    "graphs_bf16w_closed": "mt+graphs+bf16w+closed-form-loss",
    "torch": "torch",
}
# (sentences, source length, target length, vocabulary)
SHAPES = {
    "multi30k_cpu": (150, 28, 27, 8000),  # ~4,050 target tokens: a Multi30k update on the 2-core CPU
    "multi30k": (300, 28, 27, 10000),  # ~8,100 target tokens: a Multi30k batch on a GPU
    "wmt": (780, 32, 32, 37000),  # ~25,000 target tokens, the paper's base batch, 37k joint vocabulary
    "tiny": (16, 8, 9, 200),  # with --presets tiny: a check that every kind runs, in seconds on a CPU
}


class TorchTransformer(nn.Module):
    """The reference: what a user writes in 30 lines with nn.Transformer (same sizes, tied embeddings,
    sinusoidal positions, F.cross_entropy with label smoothing)."""

    def __init__(self, vocab: int, d_model, heads, ffn_dim, encoder_layers, decoder_layers, norm_first):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=0)
        self.core = nn.Transformer(
            d_model, heads, encoder_layers, decoder_layers, ffn_dim, 0.1, batch_first=True, norm_first=norm_first
        )
        position = torch.arange(1024)[:, None]
        freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(1024, d_model)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * freq), torch.cos(position * freq)
        self.register_buffer("positions", table)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        def embed(x):
            return self.embed(x) * math.sqrt(self.d_model) + self.positions[: x.size(1)]

        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device, dtype=torch.bool)
        h = self.core(
            embed(src), embed(tgt), tgt_mask=causal, src_key_padding_mask=src == 0, memory_key_padding_mask=src == 0
        )
        return h @ self.embed.weight.t()


def peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_training(
    kind: str, preset: str, precision: str, shape: str, steps: int, device: torch.device, compile_model: bool = False
) -> dict:
    """One training configuration: kind "mt" (ours, eager), "graphs" (ours, each update two CUDA graph
    replays, clipping at 1 as multi30k_base does), "graphs_bf16w" (the same on a bf16 copy of the weights,
    Adam stepping fp32 ones), "graphs_bf16w_cudnn" (that, with cuDNN's attention allowed: mt-train turns it
    off on CUDA, where eager shapes change every update and cuDNN plans each new one, but the graphs run a
    few fixed shapes), "graphs_bf16w_closed" (graphs_bf16w with the loss's gradient in closed form, each pass
    compiled: mt/fastpath/loss_forms.py, for logits as large as the WMT-like batch's) or "torch"
    (nn.Transformer). Compiled graphs compile the model for the one shape (as mt-train does with
    train.compile), captured in the graphs after the warm-up runs."""
    batch, src_len, tgt_len, vocab = SHAPES[shape]
    torch.manual_seed(0)
    ours = Transformer(vocab, vocab, **PRESETS[preset])
    model = (TorchTransformer(vocab, **PRESETS[preset]) if kind == "torch" else ours).to(device).train()
    counts = parameter_counts(ours)  # the same FLOPs for both: same sizes
    forward = torch.compile(model, dynamic=False) if compile_model else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)  # as trained
    src = torch.randint(4, vocab, (batch, src_len), device=device)
    tgt = torch.randint(4, vocab, (batch, tgt_len), device=device)

    keep = fastpath.rows_to_score(tgt != 0)  # as the trainer asks: every position (None) or the real ones

    graphs = kind.startswith("graphs")
    if graphs:
        optimizer = capturable_adam(model.parameters(), (0.9, 0.98), 1e-9, 0.0, device)
        compiled = {}  # the module each call runs (the model, or its bf16 copy), compiled

        def loss_fn(net, src, tgt_in, tgt_out):
            if compile_model and net not in compiled:
                compiled[net] = torch.compile(net, dynamic=False)
            with autocast(device, precision) if net is model else contextlib.nullcontext():
                logits = compiled.get(net, net)(src, tgt_in)
            return label_smoothed_loss(logits, tgt_out, 0.1, pad_id=0)

        weights = torch.bfloat16 if kind.startswith("graphs_bf16w") else None
        graphed = GraphedTraining(
            model, optimizer, loss_fn, clip_norm=1.0, capture=device.type == "cuda", weights_dtype=weights
        )

    def step():
        if graphs:
            graphed.accumulate(src, tgt, tgt, 1.0 / tgt.numel())
            graphed.apply(1e-4)
            return
        with autocast(device, precision):
            if kind == "mt":
                logits = forward(src, tgt, keep=keep)
            else:
                logits = forward(src, tgt).float().view(-1, vocab)
                loss = F.cross_entropy(logits, tgt.reshape(-1), label_smoothing=0.1, reduction="sum")
        if kind == "mt":
            loss, _ = label_smoothed_loss(logits, tgt if keep is None else tgt[keep], 0.1, pad_id=0)
        (loss / tgt.numel()).backward()
        if kind == "mt":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as the graphs do (multi30k_base clips)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    start = time.perf_counter()
    for _ in range(4):  # the graphs are captured at the third run
        step()
    synchronize(device)
    warmup = time.perf_counter() - start
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    seconds = sorted(times)[len(times) // 2]  # the median: robust to a noisy neighbour
    flops = training_flops(counts, src.shape, tgt.shape) / seconds
    peak = peak_flops(device, 0)
    row = {
        "bench": "train",
        "model": MODEL_NAMES[kind] + ("+compile" if compile_model else ""),
        "preset": preset,
        "precision": precision,
        "shape": shape,
        "vocab": vocab,
        "tgt_tokens_per_step": batch * tgt_len,
        "ms_per_step": round(seconds * 1000, 1),
        "tgt_tokens_per_s": round(batch * tgt_len / seconds),
        "tflops": round(flops / 1e12, 2),
        "peak_mem_mib": round(peak_memory_mib(device)),
        "warmup_s": round(warmup, 1),
    }
    if peak:
        row["mfu"] = round(flops / peak, 4)
    if device.type == "cpu":
        row["peak_rss_mib"] = row["peak_mem_mib"]
    return row


@torch.no_grad()
def bench_decode_steps(
    preset: str, vocab: int, batch: int, prefixes: list[int], repeats: int, device: torch.device
) -> list[dict]:
    """Latency of one decoder step after `prefix` tokens: with the KV cache vs re-running the prefix."""
    torch.manual_seed(0)
    model = Transformer(vocab, vocab, **PRESETS[preset]).to(device).eval()
    src = torch.randint(4, vocab, (batch, 20), device=device)
    rows = []
    for prefix in prefixes:
        state = model.start_state(src)
        tokens = torch.randint(4, vocab, (batch, prefix + 1), device=device)
        for t in range(prefix):
            _, state = model.step(tokens[:, t], state)
        caches = [LayerCache(dict(c.past), dict(c.source)) for c in state.caches]
        synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            state.caches = [LayerCache(dict(c.past), dict(c.source)) for c in caches]
            state.position = prefix
            model.step(tokens[:, prefix], state)
        synchronize(device)
        cached = (time.perf_counter() - start) / repeats
        memory, src_mask = model.encode(src)
        start = time.perf_counter()
        for _ in range(repeats):
            model.logits(model.decode(tokens, memory, src_mask)[:, -1])
        synchronize(device)
        uncached = (time.perf_counter() - start) / repeats
        rows.append(
            {
                "bench": "decode_step",
                "preset": preset,
                "batch": batch,
                "prefix": prefix,
                "cached_ms": round(cached * 1000, 2),
                "full_rerun_ms": round(uncached * 1000, 2),
            }
        )
    return rows


def print_training_table(rows: list[dict]) -> None:
    width = max([len("model"), *(len(r["model"]) for r in rows)])
    print(
        f"{'model':{width}} {'preset':6} {'precision':9} {'shape':12} {'tgt tok/s':>10} {'ms/step':>8} "
        f"{'TFLOP/s':>8} {'MFU':>6} {'peak MiB':>9} {'vs torch':>8} {'vs eager':>8}"
    )
    for r in rows:
        torch_row = next(
            (t for t in rows if t["model"] == "torch" and all(t[k] == r[k] for k in ("preset", "precision", "shape"))),
            None,
        )
        eager_row = next(
            (t for t in rows if t["model"] == "mt" and all(t[k] == r[k] for k in ("preset", "precision", "shape"))),
            None,
        )
        ratio = f"{r['tgt_tokens_per_s'] / torch_row['tgt_tokens_per_s']:.2f}x" if torch_row else "-"
        eager = f"{r['tgt_tokens_per_s'] / eager_row['tgt_tokens_per_s']:.2f}x" if eager_row else "-"
        mfu = f"{100 * r['mfu']:.1f}%" if "mfu" in r else "-"
        print(
            f"{r['model']:{width}} {r['preset']:6} {r['precision']:9} {r['shape']:12} {r['tgt_tokens_per_s']:>10} "
            f"{r['ms_per_step']:>8} {r['tflops']:>8} {mfu:>6} {r['peak_mem_mib']:>9} {ratio:>8} {eager:>8}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--presets", nargs="+", choices=list(PRESETS), help="default: small base (CPU), base (GPU)")
    p.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], help="default: fp32 bf16 (CPU), bf16 (GPU)")
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), help="default: multi30k_cpu (CPU), wmt multi30k (GPU)")
    p.add_argument(
        "--reference",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time nn.Transformer (default: on a GPU)",
    )
    p.add_argument(
        "--compile",
        nargs="?",
        const="also",
        choices=["also", "only"],
        help="also time each under torch.compile (`--compile only`: compiled only)",
    )
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=list(MODEL_NAMES),
        help="exactly these (mt: ours eagerly, torch: nn.Transformer, graphs, graphs_bf16w, graphs_bf16w_cudnn, "
        "graphs_bf16w_closed); "
        "default: from --reference, --graphs and --bf16-weights",
    )
    p.add_argument(
        "--graphs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time ours replayed as CUDA graphs, as mt-train runs on CUDA (default: on a GPU)",
    )
    p.add_argument(
        "--bf16-weights",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time the graphs on a bf16 copy of the weights, Adam on fp32 ones (train.bf16_weights; "
        "default: on a GPU, for bf16)",
    )
    p.add_argument("--steps", type=int, default=0, help="timed steps per configuration (default 5 CPU, 20 GPU)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--no-decode", action="store_true", help="training figures only")
    p.add_argument("--no-train", action="store_true", help="decoder step figures only")
    p.add_argument("--json", action="store_true", help="JSON lines only, no table")
    args = p.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    presets = args.presets or (["base"] if gpu else ["small", "base"])
    precisions = args.precisions or (["bf16"] if gpu else ["fp32", "bf16"])
    shapes = args.shapes or (["wmt", "multi30k"] if gpu else ["multi30k_cpu"])
    kinds = ["mt", "torch"] if (gpu if args.reference is None else args.reference) else ["mt"]
    kinds += ["graphs"] if (gpu if args.graphs is None else args.graphs) else []
    kinds += ["graphs_bf16w"] if (gpu if args.bf16_weights is None else args.bf16_weights) else []
    kinds = args.kinds or kinds
    compiled_too = {None: [False], "also": [False, True], "only": [True]}[args.compile]
    steps = args.steps or (20 if gpu else 5)
    if args.threads:
        torch.set_num_threads(args.threads)
    tune_process(device, training=True)  # as mt-train does
    env = {
        "bench": "env",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": str(device),
        "name": torch.cuda.get_device_name(device) if gpu else platform.processor() or platform.machine(),
        "capability": None if gpu else torch.backends.cpu.get_cpu_capability(),
    }
    print(json.dumps(env), flush=True)
    results = []
    for shape in [] if args.no_train else shapes:
        for preset in presets:
            for precision in precisions:
                for compiled in compiled_too:
                    for kind in kinds if precision == "bf16" else [k for k in kinds if "bf16w" not in k]:
                        if gpu:  # cuDNN attention off, as mt-train turns it off on CUDA, but for the _cudnn kind
                            torch.backends.cuda.enable_cudnn_sdp(kind.endswith("_cudnn"))
                        loss_form = "closed_form" if kind.endswith("_closed") else "compiled_stock"
                        with fastpath.large_loss_form(loss_form):
                            results.append(bench_training(kind, preset, precision, shape, steps, device, compiled))
                        print(json.dumps(results[-1]), flush=True)
                        if gpu:
                            torch.cuda.empty_cache()  # the last model's memory, for the next one
    prefixes = [8, 32, 128]  # the first preset's step (small on a CPU, base on a GPU, by default)
    decode = [] if args.no_decode else bench_decode_steps(presets[0], 8000, 32, prefixes, 20, device)
    for row in decode:
        print(json.dumps(row), flush=True)
    if args.json:
        return

    if results:
        print(f"\ntraining, forward + backward + Adam on {env['name']}, {env['threads']} threads, torch {env['torch']}")
        print_training_table(results)
    if decode:
        print(f"\ndecode step latency, {decode[0]['preset']} preset, batch 32, fp32")
        print(f"{'prefix':>6} {'with cache ms':>14} {'re-run prefix ms':>17}")
        for r in decode:
            print(f"{r['prefix']:>6} {r['cached_ms']:>14} {r['full_rerun_ms']:>17}")


if __name__ == "__main__":
    main()
