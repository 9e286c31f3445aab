"""A training update as CUDA graph replays: the GPU's path when batches come in a few fixed shapes.

Eager PyTorch spends tens of microseconds of Python and launch work per op, and a training step of the
base model is over a thousand ops: at small batches the GPU waits for the host. A CUDA graph records the
kernels of one step once and replays them with one launch. It needs every shape fixed and no value read
back by the host inside the step, so:

- batches are padded to a few shapes (`mt.data.buckets`); each shape's forward + loss + backward is one
  graph (`accumulate`), which adds its gradients into gradient buffers allocated once and its
  (loss, nll) sums into a device tensor;
- the update (clip, the finite check, Adam, zeroing the gradients) is one more graph (`apply`). The
  learning rate and the loss normaliser are device tensors filled before each replay; Adam is fused and
  capturable, and skips a non-finite update on the device (its `found_inf`), as GradScaler makes it do;
- the host reads an update's figures later (`PendingStats`), never waiting inside the step;
- optionally (`weights_dtype=torch.bfloat16`) forward and backward run a bf16 working copy of the model,
  without autocast, and Adam updates the fp32 model from the copy's gradients, widened (fp32 master weights,
  as fairseq's --bf16 and NVIDIA's MLPerf transformer train): no per-op casts of weights and activations, a
  bf16 residual stream. The fp32 model stays what checkpoints, validation and resume see.

All graphs share one memory pool: everything that lives from one graph to another (inputs, gradients,
sums) is allocated outside them, so their temporaries may share memory whatever order they replay in.
Each shape and the update first run eagerly (`warmup` times, on a side stream, as torch's guidance on
capture asks), then are captured. The same calls without capture (`capture=False`) run the same math
eagerly on any device: the reference the tests compare with.
"""

from __future__ import annotations

import copy
import logging
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

from mt.fastpath import compiled_for_training

log = logging.getLogger(__name__)

LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class PendingStats:
    """One update's (loss sum, nll sum, gradient norm, skipped), copied to the host without waiting;
    `values()` waits only if the device has not got there yet."""

    def __init__(self, device_stats: torch.Tensor):
        if device_stats.device.type == "cuda":
            self._host = torch.empty(device_stats.shape, dtype=device_stats.dtype, pin_memory=True)
            self._host.copy_(device_stats, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host, self._event = device_stats.clone(), None

    def ready(self) -> bool:
        return self._event is None or self._event.query()

    def values(self) -> tuple[float, float, float, bool]:
        if self._event is not None:
            self._event.synchronize()
        loss, nll, norm, skipped = self._host.tolist()
        return loss, nll, norm, skipped > 0


class Replays:
    """Calls that run the same kernels on the same buffers every time, each captured once as a CUDA graph
    (after `warmup` eager runs on a side stream, as torch's guidance on capture asks) and replayed after.
    All graphs share one memory pool: whatever lives from one call to the next must be allocated outside
    them. With capture=False (or after a capture failed) every call runs eagerly: the same work, any device.
    """

    def __init__(self, device: torch.device, capture: bool, warmup: int = 2, what: str = "work"):
        self.device, self.capture, self.warmup, self.what = device, capture, warmup, what
        self.graphs: dict[object, torch.cuda.CUDAGraph] = {}
        self.runs: dict[object, int] = {}  # eager runs so far, per key
        self.counts: Counter[str] = Counter()  # calls run "eager", "captured" or "replayed" (for profiles)
        self.pool = torch.cuda.graph_pool_handle() if capture else None
        self.side = torch.cuda.Stream(self.device) if capture else None

    def run(self, key, body: Callable[[], None], warm_as=None) -> None:
        """body(), as the graph captured for key if there is one. Every call does body's work once.
        warm_as: the key whose eager runs count as this one's warm-up (default key itself): bodies that run
        the same kernels at the same shapes on other buffers need warming up once between them."""
        warm_as = key if warm_as is None else warm_as
        if key in self.graphs:
            self.graphs[key].replay()
            self.counts["replayed"] += 1
        elif not self.capture:
            body()
            self.counts["eager"] += 1
        elif self.runs.get(warm_as, 0) < self.warmup:
            self.side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.side):
                body()
            torch.cuda.current_stream(self.device).wait_stream(self.side)
            self.runs[warm_as] = self.runs.get(warm_as, 0) + 1
            self.counts["eager"] += 1
        else:
            self._capture(key, body)

    def _capture(self, key, body: Callable[[], None]) -> None:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                body()
        except RuntimeError as error:  # an op this torch cannot capture: go on, eagerly
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            log.warning(
                "CUDA graph capture failed (%s, at %s); %s goes on without graphs",
                first_line, raised_at(error), self.what,
            )  # fmt: skip
            self.capture = False
            torch.cuda.synchronize(self.device)
            body()
            self.counts["eager"] += 1
            return
        self.graphs[key] = graph
        graph.replay()  # capture records the kernels without running them
        self.counts["captured"] += 1

    def forget(self, which: Callable[[object], bool]) -> None:
        """Drop the graphs of the keys `which` is true of (their buffers are going away)."""
        for key in [key for key in {**self.runs, **self.graphs} if which(key)]:
            self.graphs.pop(key, None)
            self.runs.pop(key, None)


def raised_at(error: BaseException) -> str:
    """Where error was raised, as "file:line in function": the innermost frame outside torch, the line
    that called the op a capture refused (what a bug report about a failed capture needs)."""
    inside_torch = str(Path(torch.__file__).parent)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(inside_torch)]
    if not frames:
        return "an unknown place"
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


class GraphedTraining:
    """Training updates of `model` with `optimizer`, whose batches are accumulated by `accumulate` and
    applied by `apply`, captured as CUDA graphs when `capture` (CUDA only).

    The optimizer must be fused and capturable on CUDA (see `capturable_adam`); `loss_fn(net, src, tgt_in,
    tgt_out)` returns the batch's summed (loss, nll) of the module `net`, the loss differentiable. net is
    `model`, or with weights_dtype its working copy in that dtype (see the module's docstring), which
    loss_fn must run as it is (no autocast: under autocast layer norm would give fp32 again).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: LossFn,
        clip_norm: float,
        capture: bool,
        warmup: int = 2,
        weights_dtype: torch.dtype | None = None,
    ):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.device = self.params[0].device
        self.max_norm = clip_norm if clip_norm > 0 else float("inf")
        for p in self.params:  # allocated once: backward adds into them, `apply` zeroes them
            p.grad = torch.zeros_like(p)
        self.working, self.working_params = model, self.params  # what forward and backward run
        if weights_dtype is not None and weights_dtype != self.params[0].dtype:
            self.working = copy.deepcopy(model).to(weights_dtype)
            self.working_params = [p for p in self.working.parameters() if p.requires_grad]
            assert len(self.working_params) == len(self.params)  # the same order, ties kept by deepcopy
            for p in self.working_params:
                p.grad = torch.zeros_like(p)
        # The learning rate as one device tensor that every replay reads. A resumed optimizer's may be a
        # float (a checkpoint of the eager path) or a tensor on the CPU (where checkpoints load to).
        first = optimizer.param_groups[0]["lr"]
        self.lr = first if torch.is_tensor(first) and first.device == self.device else None
        self.lr = self.lr if self.lr is not None else torch.tensor(float(first), device=self.device)
        for group in optimizer.param_groups:
            group["lr"] = self.lr
        self.scale = torch.zeros((), device=self.device)  # what each batch's loss is multiplied by
        self.sums = torch.zeros(2, device=self.device)  # (loss, nll) of the update's batches
        self.stats = torch.zeros(4, device=self.device)  # loss, nll, grad norm, skipped
        self.found_inf = torch.zeros((), device=self.device)
        optimizer.found_inf = self.found_inf  # read by fused Adam: 1 skips the update on the device
        self.inputs: dict[tuple, tuple[torch.Tensor, ...]] = {}  # per shape: static src, tgt_in, tgt_out
        self.replays = Replays(self.device, capture, warmup, "training")  # per shape, and "update"

    # ---- the two parts of an update ------------------------------------------------------------

    def _accumulate_body(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> None:
        loss, nll = self.loss_fn(self.working, src, tgt_in, tgt_out)
        (loss * self.scale).backward()
        self.sums.add_(torch.stack([loss.detach().float(), nll.float()]))

    def _apply_body(self) -> None:
        copied = self.working is not self.model
        if copied:  # the working copy's gradients, widened to fp32 for clipping and Adam
            torch._foreach_copy_([p.grad for p in self.params], [p.grad for p in self.working_params])
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_norm, foreach=True)
        finite = torch.isfinite(self.sums[0]) & torch.isfinite(norm)
        self.found_inf.copy_((~finite).float())
        self.optimizer.step()
        if copied:  # the updated fp32 weights, rounded into the working copy (unchanged if skipped)
            with torch.no_grad():
                torch._foreach_copy_(self.working_params, self.params)
        self.stats.copy_(torch.stack([self.sums[0], self.sums[1], norm.float(), self.found_inf]))
        torch._foreach_zero_([p.grad for p in self.working_params])
        self.sums.zero_()

    # ---- what the trainer calls ----------------------------------------------------------------

    def accumulate(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor, scale: float) -> None:
        """Add one batch's gradients, its loss multiplied by scale (host tensors are copied over
        without waiting)."""
        self.scale.fill_(scale)
        self.working.train(self.model.training)
        shape = (tuple(src.shape), tuple(tgt_in.shape))
        if shape not in self.inputs:
            self.inputs[shape] = tuple(torch.empty_like(t, device=self.device) for t in (src, tgt_in, tgt_out))
        static = self.inputs[shape]
        for buffer, value in zip(static, (src, tgt_in, tgt_out)):
            buffer.copy_(value, non_blocking=True)
        self._run(shape, lambda: self._accumulate_body(*static))

    def apply(self, lr: float) -> PendingStats:
        """Clip, check, step Adam at lr (skipped on the device if the loss or gradient is not finite)."""
        self.lr.fill_(lr)
        self._run("update", self._apply_body)
        return PendingStats(self.stats)

    def _run(self, key, body: Callable[[], None]) -> None:
        self.replays.run(key, body)

    @property
    def graphs(self) -> dict[object, torch.cuda.CUDAGraph]:
        return self.replays.graphs


class CompiledPerShape:
    """Modules compiled for the graph path's fixed shapes (train.compile): torch.compile(dynamic=False), which
    specialises its kernels to each batch shape, compiling at a shape's first (eager) run; its captured graph
    then replays the compiled kernels. Dynamic shapes, as the eager path compiles for, would give up that
    specialisation for shapes that never change here. On an H200 the base step at a WMT-like batch, compiled
    for its shape and replayed, made 1.09x the tokens/s of the same step uncompiled, both on bf16 weights
    (docs/benchmarks.md, GPU training); each shape compiled for 32-41 s, so it pays in long runs only."""

    RECOMPILES = 64  # torch recompiles a function for at most this many shapes (its default, 8, is a bucket count)

    def __init__(self):
        self.compiled: dict[torch.nn.Module, torch.nn.Module] = {}  # modules hash by identity
        limits = torch._dynamo.config
        limits.recompile_limit = max(limits.recompile_limit, self.RECOMPILES)

    def __call__(self, module: torch.nn.Module) -> torch.nn.Module:
        """module's compiled form (made once a module)."""
        if module not in self.compiled:
            self.compiled[module] = compiled_for_training(module, dynamic=False)
        return self.compiled[module]


def capturable_adam(params, betas, eps: float, weight_decay: float, device: torch.device) -> torch.optim.Adam:
    """Adam whose learning rate is a device tensor and whose step a CUDA graph can capture (fused)."""
    return torch.optim.Adam(
        params,
        lr=torch.tensor(0.0, device=device),
        betas=tuple(betas),
        eps=eps,
        weight_decay=weight_decay,
        fused=True,
        capturable=device.type == "cuda",
    )
