"""The label-smoothed loss in the forms a device without a CPU form of its own runs (a GPU, `meta`):

    loss = sum over rows of (1 - e) * (-log p_y) + e * mean_v(-log p_v),  nll = sum of -log p_y

- `stock`: log_softmax in fp32, a gather and a mean, as written; autograd takes each op's gradient.
- `compiled_stock`: the same ops under torch.compile, which fuses them and never writes the fp32
  log-probabilities out: what CUDA runs for large logits (mt.fastpath.label_smoothed_cross_entropy).
- `closed_form`: the gradient written out, as the CPU's blocked form has it (cpu_ops), each pass compiled.
  With lse = log sum_v exp(z_v): -log p_y = lse - z_y and mean_v(-log p_v) = lse - mean_v(z_v), so the
  forward pass is one reduction over each row (its log-sum-exp, target logit and mean logit), and the
  gradient, softmax - (1 - e) onehot(y) - e / V, is one elementwise pass that reads the logits and writes
  the gradient in their dtype. The stock ops' autograd instead keeps the fp32 log-probabilities and goes
  over them several times (log_softmax's backward, the gather's scatter, the mean's expand, their sum),
  which a compiler fuses only in part. Not yet measured on a GPU: `scripts/bench_model.py --kinds
  graphs_bf16w graphs_bf16w_closed` and `scripts/profile_train_step.py` time it beside `compiled_stock`.
  On a 2-core CPU the loss alone at 4,700 x 8,000 bf16 logits took 70-76 ms against 87-90 compiled stock and
  90-103 for the CPU's own blocked form (docs/benchmarks.md, CPU training), but whole training steps of the
  multi30k_cpu shape, alternating in one process, took 0.94-1.38x the blocked form's time (6 pairs): the
  CPU keeps its blocked form.
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)


def stock(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float, ignore_index: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, nll) summed over the rows whose target is not ignore_index; the loss differentiable."""
    log_probs = logits.log_softmax(dim=-1, dtype=torch.float32)  # (N, V)
    nll = -log_probs.gather(-1, target[:, None]).squeeze(-1)  # -log p_y
    loss = (1.0 - smoothing) * nll - smoothing * log_probs.mean(dim=-1)  # + e * mean_v(-log p_v)
    if ignore_index is not None:
        real = target != ignore_index
        loss, nll = loss.where(real, 0.0), nll.where(real, 0.0)
    return loss.sum(), nll.detach().sum()


def row_statistics(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's log-sum-exp, target logit and mean logit, in fp32: all the forward pass needs."""
    z = logits.float()
    return torch.logsumexp(z, dim=-1), z.gather(-1, target[:, None]).squeeze(-1), z.mean(dim=-1)


def gradient(
    logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, scale: torch.Tensor, smoothing: float
) -> torch.Tensor:
    """d loss / d logits: (softmax - (1 - e) onehot(target) - e / V) * scale (one factor per row, 0 for an
    ignored row), computed in fp32 and written in the logits' dtype."""
    vocab = logits.size(-1)
    is_target = torch.arange(vocab, device=logits.device) == target[:, None]
    p = torch.exp(logits.float() - lse[:, None])
    grad = (p - smoothing / vocab - (1.0 - smoothing) * is_target.float()) * scale[:, None]
    return grad.to(logits.dtype)


class _Compiled:
    """A function compiled at its first call (dynamic in the number of rows), or run as it is where
    compiling fails (no compiler, say): the same result either way."""

    def __init__(self, fn, what: str):
        self.fn, self.what, self.compiled = fn, what, None

    def __call__(self, *args):
        if self.compiled is None:
            self.compiled = torch.compile(self.fn, dynamic=True)
        if self.compiled is not False:
            try:
                return self.compiled(*args)
            except Exception as error:  # noqa: BLE001 - any compiler failure: the same ops uncompiled
                log.warning("compiling %s failed (%s); it runs uncompiled", self.what, error)
                self.compiled = False
        return self.fn(*args)


compiled_stock = _Compiled(stock, "the loss")
compiled_row_statistics = _Compiled(row_statistics, "the loss's forward pass")
compiled_gradient = _Compiled(gradient, "the loss's gradient")


class _ClosedForm(torch.autograd.Function):
    """closed_form's two passes: the rows' statistics forward (the only tensor kept for backward besides
    the logits is their log-sum-exp), the gradient written out backward."""

    @staticmethod
    def forward(ctx, logits, target, smoothing: float, ignore_index: int | None, compiled: bool):
        lse, z_target, z_mean = (compiled_row_statistics if compiled else row_statistics)(logits, target)
        nll = lse - z_target  # -log p_y
        loss = (1.0 - smoothing) * nll + smoothing * (lse - z_mean)
        real = torch.ones_like(target, dtype=torch.bool) if ignore_index is None else target != ignore_index
        ctx.save_for_backward(logits, target, lse, real)
        ctx.smoothing, ctx.compiled = smoothing, compiled
        nll_sum = nll.where(real, 0.0).sum()
        ctx.mark_non_differentiable(nll_sum)
        return loss.where(real, 0.0).sum(), nll_sum

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        logits, target, lse, real = ctx.saved_tensors
        scale = grad_loss.float().where(real, 0.0)
        grad = (compiled_gradient if ctx.compiled else gradient)(logits, target, lse, scale, ctx.smoothing)
        return grad, None, None, None, None


def closed_form(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float, ignore_index: int | None, compiled: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """stock's (loss, nll) with the gradient in closed form; compiled=False runs the same passes uncompiled
    (what the tests compare with the stock ops on a CPU)."""
    return _ClosedForm.apply(logits, target, smoothing, ignore_index, compiled)
