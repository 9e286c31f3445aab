"""Device-specific speed, in one place: for every op whose fastest form depends on the device, which form runs.

Each function here stands for one stock torch op (named in its docstring) and computes what that op
computes. It runs the stock op, except on the device where another form was measured to pay: so far
that is the CPU, whose forms live in `cpu_ops.py` and `cpu_process.py` with their measurements.
Everywhere else (CUDA, `meta`, ...) the stock ops run: fused kernels, a number of kernel launches
that does not grow with the batch, no host syncs, shapes that `torch.compile` captures whole. On CUDA,
two choices among torch's own kernels were measured (see `autocast_decoding` and `tune_process`), and
the loss over large logits runs compiled (`loss_forms.py`).

`stock_ops()` (or MT_FASTPATH=stock in the environment) turns every CPU form off, to compare them
with the stock ops (the tests do) or to see the path another device takes, and leaves torch's own
choices on CUDA (cuDNN attention in training) as torch makes them.
"""

from __future__ import annotations

import contextlib
import logging
import os

import torch
import torch.nn.functional as F

from mt.fastpath import cpu_ops, cpu_process, loss_forms
from mt.host import cpu_cores

_stock_everywhere = os.environ.get("MT_FASTPATH", "auto") == "stock"


@contextlib.contextmanager
def stock_ops(enabled: bool = True):
    """Within this context, the stock op runs on every device, the CPU included."""
    global _stock_everywhere
    before, _stock_everywhere = _stock_everywhere, enabled
    try:
        yield
    finally:
        _stock_everywhere = before


def _cpu_form(x: torch.Tensor) -> bool:
    """Whether x's op takes its CPU form. Not inside torch.compile: the forms are for eager mode (the
    compiler fuses the stock ops itself, and cannot trace some forms, e.g. the numpy-drawn dropout)."""
    return x.device.type == "cpu" and not _stock_everywhere and not torch.compiler.is_compiling()


# ---- model ------------------------------------------------------------------------------------


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """F.linear(x, weight): x W^T, for the output layer (tokens x vocabulary)."""
    if _cpu_form(x):
        return cpu_ops.linear_by_row_blocks(x, weight)
    return F.linear(x, weight)


def dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """F.dropout(x, p, training=True)."""
    if _cpu_form(x):
        return cpu_ops.dropout_from_int16(x, p)
    return F.dropout(x, p, training=True)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Attention weights: softmax over the last dim, in fp32, 0 wherever mask (True: may attend) is False.
    A query that may attend to nothing gets all zeros (as SDPA gives), not a distribution."""
    if _cpu_form(scores):
        return cpu_ops.masked_softmax_padded(scores, mask)
    weights = scores.softmax(dim=-1, dtype=torch.float32)
    return weights if mask is None else weights.masked_fill(~mask, 0.0)


def index_select(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """x.index_select(dim, index): how beam search reorders a cache whose rows are not on dim 0."""
    if _cpu_form(x) and dim > 0 and x.is_contiguous():
        return cpu_ops.index_select_as_rows(x, dim, index)
    return x.index_select(dim, index)


def fused_attention_pays(q: torch.Tensor) -> bool:
    """Whether F.scaled_dot_product_attention (flash, cuDNN or memory-efficient kernels) should run
    rather than attention written out: yes, except where the written-out form measured faster."""
    if _cpu_form(q):
        return not cpu_ops.explicit_attention_is_faster(q)
    return True


def autocast_early(x: torch.Tensor) -> torch.Tensor:
    """x, or x already in bf16 under bf16 autocast on a CPU: a bf16 residual stream and pre-norm output.

    Autocast casts a tensor again in every op that reads it; casting once, early, does that work once
    (+4% training throughput on the 2-core CPU, same validation loss). bf16 has fp32's range; fp16
    (65,504 at most) keeps the fp32 stream. Elsewhere autocast does its own casts.
    """
    if _cpu_form(x) and torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16:
        return x.to(torch.bfloat16)
    return x


# ---- training ---------------------------------------------------------------------------------


def rows_to_score(real: torch.Tensor) -> torch.Tensor | None:
    """Which target positions go through the output layer: the real ones (the mask `real`) on a CPU,
    all of them (None) elsewhere, where the loss ignores padding instead.

    Picking rows by a boolean mask spares the output layer and the loss the padding, and costs
    nothing on a CPU; on a GPU it waits for the device (the number of rows decides a shape) and
    gives every batch a new shape, which torch.compile and CUDA graphs pay for.
    """
    return real if _cpu_form(real) else None


def label_smoothed_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float, ignore_index: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """F.cross_entropy(logits, target, label_smoothing=smoothing, ignore_index=..., reduction="sum"),
    and beside it the plain negative log-likelihood sum (unsmoothed, not differentiable).
    logits (N, V) in any float dtype; log-probabilities are taken in fp32."""
    if _cpu_form(logits):
        return cpu_ops.blocked_smoothed_cross_entropy(logits, target, smoothing, ignore_index)
    if _fused_loss_pays(logits):
        if _large_loss_form == "closed_form":
            return loss_forms.closed_form(logits, target, smoothing, ignore_index)
        return loss_forms.compiled_stock(logits, target, smoothing, ignore_index)
    return loss_forms.stock(logits, target, smoothing, ignore_index)


FUSED_LOSS_MIN_LOGITS = 2**27  # rows x vocabulary from which the compiled loss pays back its compile
LARGE_LOSS_FORMS = ("compiled_stock", "closed_form")  # mt/fastpath/loss_forms.py
_large_loss_form = "compiled_stock"


def _fused_loss_pays(logits: torch.Tensor) -> bool:
    """Whether the loss runs compiled (loss_forms: the compiler fuses log-softmax, gather and mean into a
    few kernels and never writes the fp32 log-probabilities out). On CUDA, for large logits only: on an
    H200, forward + backward at 24,960 x 37,000 took 6.8 ms compiled against 18.2 ms (a WMT-like step
    is ~60 ms), at 4,096 x 10,000 0.63 against 0.91 ms, which never repays the ~7 s compile in a run of
    minutes (scripts/profile_train_step.py; docs/benchmarks.md, GPU training)."""
    return (
        logits.device.type == "cuda"
        and not _stock_everywhere
        and not torch.compiler.is_compiling()
        and logits.numel() >= FUSED_LOSS_MIN_LOGITS
    )


@contextlib.contextmanager
def large_loss_form(form: str):
    """Within this context, large logits on CUDA take this form of the loss (LARGE_LOSS_FORMS): for the
    benchmarks that time the forms side by side. compiled_stock is the default."""
    global _large_loss_form
    if form not in LARGE_LOSS_FORMS:
        raise ValueError(f"loss form {form!r}: one of {', '.join(LARGE_LOSS_FORMS)}")
    before, _large_loss_form = _large_loss_form, form
    try:
        yield
    finally:
        _large_loss_form = before


# From torch 2.13 inductor's own dropout can repeat parts of its masks on CUDA (pytorch/pytorch#198333, silent).
INDUCTOR_DROPOUT_REPEATS = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 13)


def compiled_for_training(module: torch.nn.Module, dynamic: bool) -> torch.nn.Module:
    """torch.compile(module, dynamic=dynamic), with random ops (dropout) run by torch's own kernels inside the
    compiled code where INDUCTOR_DROPOUT_REPEATS. Unmeasured: what this costs in speed."""
    if INDUCTOR_DROPOUT_REPEATS:
        torch._inductor.config.fallback_random = True
    return torch.compile(module, dynamic=dynamic)


def cuda_graphs_off_because(device: torch.device, requested: bool, precision: str, ranks: int) -> str | None:
    """Why training steps run eagerly rather than as replayed CUDA graphs (cuda_graphs.py, batches in
    fixed shapes from mt.data.buckets), or None: they replay on CUDA unless turned off
    (train.cuda_graphs=false), under fp16 (GradScaler's dynamic scale), or with several ranks. With
    train.compile the graphs replay the model compiled for each shape (cuda_graphs.CompiledPerShape)."""
    if torch.device(device).type != "cuda":
        return "not on CUDA"
    for reason, applies in [
        ("train.cuda_graphs=false", not requested),
        ("MT_FASTPATH=stock", _stock_everywhere),
        ("fp16 (loss scaling)", precision == "fp16"),
        ("several ranks", ranks > 1),
    ]:
        if applies:
            return reason
    return None


# ---- search -----------------------------------------------------------------------------------


def top_log_probs(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits.log_softmax(-1, dtype=torch.float32).topk(k): the k most likely next tokens of each row
    and their fp32 log-probabilities."""
    if _cpu_form(logits):
        return cpu_ops.blocked_top_log_probs(logits, k)
    return logits.log_softmax(dim=-1, dtype=torch.float32).topk(k, dim=-1)


def worth_dropping(finished: int, rows: int, device: torch.device) -> bool:
    """Whether search should drop its finished rows from a decoder batch of `rows` on device now.

    On a CPU, once they are an eighth of the batch (measured, see cpu_ops). Elsewhere once they are
    half of it: a GPU step costs about the same at any batch size, so carrying finished rows is
    nearly free while each drop reorders every cache (a choice not yet measured on a GPU).
    """
    cpu = torch.device(device).type == "cpu" and not _stock_everywhere
    return finished >= (cpu_ops.DROP_FINISHED_SHARE if cpu else 0.5) * rows


def rows_to_keep(running: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The indices, in order, of the decoder rows that stay when finished ones leave a greedy (or sampling)
    search: every running one (running: bool, one per row) and, on a CPU, as many finished ones as round the
    number up to a size the batch has had before (cpu_ops.kept_rows_bucket), whose matmul kernels are ready.
    The finished rows kept ride along, ignored, as they do until a drop. (Beam search, whose batch changes
    size by whole beams, measured no faster so: 1.01x, 0.89-1.14, 5 pairs.)"""
    keep = running.nonzero().squeeze(1)
    if torch.device(device).type != "cpu" or _stock_everywhere:
        return keep
    extra = min(cpu_ops.kept_rows_bucket(keep.numel()), running.numel()) - keep.numel()
    if extra <= 0:
        return keep
    return torch.cat([keep, (~running).nonzero().squeeze(1)[:extra]]).sort().values


def bounded_shapes(device: torch.device) -> bool:
    """Whether decoding keeps its tensors to a bounded set of shapes: on a CPU, translation batches take
    the fixed-slot search's shapes (mt/decoding/fixed_slots.py: sources padded to a multiple of 8
    positions, each length's full rows, a smaller batch filled up to a power of two of sentences), and
    each step's self-attention keys sit in a room grown 8 positions at a time (self_attention_room);
    with rows_to_keep, the batches of a long input or of a server's requests come back to shapes seen before.

    oneDNN, which runs the CPU's bf16 matmuls, compiles a kernel for every new shape and keeps the last
    1,024, each holding ~0.5 MB of heap. With a new shape at every step and every batch, a long bf16
    translation filled that cache and then, evicting, fragmented the heap: greedy on 2 cores, 3.07 GB
    resident after 58,000 lines and rising, against 1.51 GB (1.39 at 26,000), at the same speed; mt-serve
    under requests of 1-64 lines, 0.92 GB after a minute against 2.0 (docs/benchmarks.md, CPU decoding).
    Elsewhere (CUDA), shapes are left exact."""
    return torch.device(device).type == "cpu" and not _stock_everywhere


def self_attention_room(position: int, device: torch.device) -> int | None:
    """The key slots a decoding step's self-attention attends over, its query at `position` (position + 1
    keys written, the slots past them masked), where shapes are bounded; None elsewhere: the keys are
    appended and attended over exactly."""
    return cpu_ops.keys_room(position + 1) if bounded_shapes(device) else None


def fixed_slot_search(model, requested: bool, search_py_only: bool) -> bool:
    """Whether greedy and beam search run in fixed slots (mt/decoding/fixed_slots.py), each step replayed
    as a CUDA graph on CUDA (eagerly elsewhere), rather than search.py's loop, which reads the host every
    step and drops finished sentences. Only when asked for (decode.cuda_graphs): on an H200 it has not yet
    measured faster (docs/benchmarks.md, GPU decoding). Models without a static state (the RNN, ensembles),
    forced prefixes and constraints (search_py_only: mt/decoding/constraints.py) keep search.py."""
    return requested and not search_py_only and hasattr(model, "start_static_state")


def fixed_slot_memory(device: torch.device) -> float:
    """Bytes the fixed-slot searches a translator keeps (one per batch shape, with its captured step) may
    hold on device: a quarter of a GPU's memory, so that a small GPU keeps fewer shapes rather than run out."""
    device = torch.device(device)
    if device.type != "cuda":
        return float("inf")
    return torch.cuda.get_device_properties(device).total_memory / 4


def autocast_decoding(device: torch.device) -> bool:
    """Whether decoding a bf16/fp16 copy of the weights also runs under autocast.

    On a CPU yes: the CPU forms above key on it (the configuration measured fast there). Elsewhere no:
    on an H100 under autocast, SDPA picked cuDNN attention, which builds a graph for every new key
    length (7 ms of CPU a call, 90% of decoding): bf16 greedy 142 sent/s with autocast, 1,014 without
    (fp32 880); beam 5 72 vs 559 (fp32 593) (scripts/bench_decode.py; docs/benchmarks.md, GPU decoding).
    Without it BLEU is the same (CPU, stock ops).
    """
    return torch.device(device).type == "cpu" and not _stock_everywhere


def training_precision(device: torch.device, requested: str) -> str:
    """The precision a run trains in when it asks for `requested` on device: the request, except bf16
    on a CPU without native bf16 (see cpu_process.native_bf16), where fp32 is many times faster."""
    cpu = torch.device(device).type == "cpu" and not _stock_everywhere
    if requested == "bf16" and cpu and not cpu_process.native_bf16():
        return "fp32"
    return requested


def decode_precision(device: torch.device, trained: str) -> str:
    """The precision a model trained in `trained` decodes in on device when none is asked for: in its
    run's validation and test score, and in translate, mt-evaluate, mt-score, mt-serve and load_translator,
    so that they all give the run's translations.

    On a CPU bf16 for a model trained in bf16, where the CPU multiplies bf16 natively: beam search there was
    1.2-1.3x as fast as fp32, at the same BLEU (docs/benchmarks.md, CPU decoding); else fp32 (emulated bf16
    is many times slower, and fp16 is for GPUs). Elsewhere fp32: on an H100, bf16 (without autocast, see
    autocast_decoding) was 1.15x faster greedy and 0.94x beam 5, not worth scores that differ from fp32's
    (scripts/bench_decode.py; docs/benchmarks.md, GPU decoding).
    """
    cpu = torch.device(device).type == "cpu" and not _stock_everywhere
    return "bf16" if cpu and training_precision(device, trained) == "bf16" else "fp32"


# ---- the process ------------------------------------------------------------------------------


_served = False  # a server's decoding threads share the cores already (serving_layout)


def search_threads(device: torch.device, batches: int) -> int:
    """How many threads search a call's `batches` side by side (greedy or beam search), torch's intra-op
    threads shared among them (cores_shared_by): on a CPU two for a call of 4 batches or more, where torch
    has two threads or more, in a process that is not a server's; else one.

    The reason is serving_layout's: a step spends part of its time in Python, op dispatch and small ops on
    one core, which the other thread's arithmetic fills. On the 2-core CPU (a 3+3 model, bf16), the whole
    `translate` of test2016 with beam 5 (6 batches) took 0.81 of the wall time of one thread of two, the same
    output, at 1.0 GB of peak memory against 0.77 (two batches at once). The gain follows the number of
    batches, as the last ones leave a thread idle: in one process, greedy or beam 5, 3 batches 0.92-1.00x,
    4 batches 1.05-1.19x, 6 batches 1.12-1.34x; fp32 beam 5 at 6 batches 1.00-1.04x (its arithmetic, several
    times slower, leaves less to overlap) (docs/benchmarks.md, CPU decoding)."""
    cpu = torch.device(device).type == "cpu"
    return 2 if cpu and batches >= 4 and not (_stock_everywhere or _served) and torch.get_num_threads() >= 2 else 1


@contextlib.contextmanager
def cores_shared_by(threads: int):
    """Within this context, torch's intra-op threads divided among `threads` threads that run ops side by side:
    the threads started within it take the number at their first op, and this thread's number is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, before // threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def serving_layout(device: torch.device, requested: int | None = None) -> int:
    """How many threads decode a server's batches side by side on device (requested: the caller's
    choice); torch's intra-op threads are set to share the cores among them. Call before the first op.

    On a CPU two, each with half the cores. A decoding step spends a fixed part of its time in Python and
    op dispatch on one core whatever the batch; two threads overlap one's dispatch with the other's
    arithmetic. On the 2-core CPU (beam 5, a 3+3 model), 8 clients' requests were served at 78-80% of
    `translate`'s lines/s on a file with two threads of one core each, at 55% with one thread of two; one
    client's latency was the same either way, p50 650-710 ms against 650 (scripts/bench_serve.py;
    docs/benchmarks.md, serving). Elsewhere one: a GPU runs one batch at a time (not measured).
    """
    global _served
    cpu = torch.device(device).type == "cpu"
    workers = requested or (2 if cpu and not _stock_everywhere and cpu_cores() >= 2 else 1)
    if cpu:
        torch.set_num_threads(max(1, cpu_cores() // workers))
    _served = True
    return workers


def tune_process(device: torch.device, training: bool) -> None:
    """Process-wide settings for a run on device. Call before the first tensor op.

    On any device: torch's threads no more than the cores this process may use (mt.host.cpu_cores: its
    affinity and its container's CPU quota, where torch counts the machine's cores).
    On a CPU: glibc's allocator keeps large buffers, MKL runs its fast kernels on an AMD CPU too, and
    (for training, whose batch shapes change every update) oneDNN keeps fewer compiled kernels.
    On CUDA, for training: no cuDNN attention in SDPA (flash and memory-efficient attention remain).
    cuDNN's builds a graph for every new batch shape, and shapes change every update: on one H100
    (five multi30k_base runs side by side, scripts/gpu_check.sh) the run without it reached update 500
    in 26 s against 74-78 s, then made 15.4 updates/s against 13.0. (Allowing it for the CUDA graphs'
    fixed shapes would have to keep masked key lengths off 64 mod 128: there its backward gives NaN query
    gradients on H100/H200 from torch 2.11, pytorch/pytorch#196678.) Elsewhere torch's defaults stand.
    """
    kind = torch.device(device).type
    cores = cpu_cores()
    if torch.get_num_threads() > cores:  # torch counts the machine's cores, not the share a container may use
        torch.set_num_threads(cores)
    if _stock_everywhere:
        return
    if kind == "cuda" and training:
        torch.backends.cuda.enable_cudnn_sdp(False)
    if kind != "cpu":
        return
    cpu_process.keep_large_buffers()
    if cpu_process.mkl_fast_kernels_on_amd():
        logging.getLogger(__name__).debug("MKL: fast kernels on this AMD CPU")
    if training:
        cpu_process.limit_onednn_primitive_cache()
