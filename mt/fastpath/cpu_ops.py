"""Forms of stock torch ops that measured faster on a CPU, each with the measurement that justifies it.

Only `mt.fastpath` calls these, and only for CPU tensors. Each computes what its stock op computes
(the tests hold them to that); the numbers below come from a 2-core AMD EPYC with AVX512-BF16,
torch 2.13, unless a line says otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from mt.fastpath import loss_forms

# ---- output layer: h @ W^T --------------------------------------------------------------------

OUTPUT_ROWS_PER_BLOCK = 1024


class _RowBlockedLinear(torch.autograd.Function):
    """x @ weight^T written a block of rows at a time; the backward is the usual two matmuls."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = x.new_empty(x.size(0), weight.size(0))
        for start in range(0, x.size(0), OUTPUT_ROWS_PER_BLOCK):
            rows = slice(start, start + OUTPUT_ROWS_PER_BLOCK)
            torch.mm(x[rows], weight.t(), out=out[rows])
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x


def linear_by_row_blocks(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """F.linear(x, weight) for a wide output (tokens x vocabulary), a block of 1,024 rows at a time.

    Written at once, the large output leaves the cache mid-write: for 4,700 x 256 @ 256 x 8,000,
    blocks of 1,024 rows ran at 390 vs 255 GFLOP/s in bf16 and 167 vs 136 in fp32 (+0.5% per
    training step of the small model).
    """
    if x.dim() != 2 or x.size(0) <= OUTPUT_ROWS_PER_BLOCK:
        return F.linear(x, weight)
    if torch.is_autocast_enabled("cpu"):  # autocast does not reach into a custom Function: cast as it would
        dtype = torch.get_autocast_dtype("cpu")
        x, weight = x.to(dtype), weight.to(dtype)
    with torch.autocast("cpu", enabled=False):
        return _RowBlockedLinear.apply(x, weight)


# ---- dropout ----------------------------------------------------------------------------------


def random_int16(shape: tuple[int, ...]) -> torch.Tensor:
    """Uniform random int16 values, four per 64-bit draw of numpy's SFC64 generator.

    The generator is seeded from torch's default generator, so torch.manual_seed and the RNG
    state kept in checkpoints still decide every value. Three times faster than torch's
    CPU generator (0.65 vs 2.2 ms for 1.5M values).
    """
    n = math.prod(shape)
    seed = int(torch.randint(0, 2**62, (1,)))
    raw = np.random.SFC64(seed).random_raw((n + 3) // 4)
    return torch.from_numpy(raw).view(torch.int16)[:n].view(shape)


def dropout_from_int16(x: torch.Tensor, p: float) -> torch.Tensor:
    """F.dropout(x, p, training=True), the drop probability p rounded to a multiple of 1/65536.

    torch's CPU bernoulli_ draws one random number per element; here one 64-bit draw gives four
    16-bit uniforms, compared into a mask written straight in x's dtype and scaled once
    (multiplying by a bool mask would convert it in the forward and again in the backward pass).
    Forward+backward on a (6000, 256) bf16 tensor: 10.2 ms (nn.Dropout) -> 1.8 ms.
    """
    keep = torch.empty_like(x)
    torch.ge(random_int16(x.shape), round(p * 65536) - 32768, out=keep)  # 1 with probability 1 - p
    return x * keep.mul_(1.0 / (1.0 - p))


# ---- attention --------------------------------------------------------------------------------

SHORT_ROW = 16  # keys; one AVX-512 register of fp32


def masked_softmax_padded(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(scores) in fp32 with the positions mask hides set to 0 (what mt.fastpath.masked_softmax
    returns), computed in the form the CPU kernels are fast at.

    PyTorch's CPU softmax is slow on rows shorter than a vector register, and attention rows are short
    (a sentence's keys). Forward+backward of (B, 4, T, T) bf16 scores: bf16 output 1.0-3.1 ms; fp32
    output 0.5-0.7 ms for T >= 16 but 2.7-3.7 ms for T < 16, fixed by padding the rows to 16 keys with
    zero-weight positions (0.6-0.9 ms). Exactly the same values: a padded key gets exp(min - max) = 0.
    Masked keys already get 0 unless a query sees no key at all, so the zeroing pass runs only then
    (+2% bf16 training tokens/s, interleaved A/B).
    """
    keys = scores.size(-1)
    if keys < SHORT_ROW:
        padded = F.pad(scores, (0, SHORT_ROW - keys), value=torch.finfo(scores.dtype).min)
        weights = padded.softmax(dim=-1, dtype=torch.float32)[..., :keys]
    else:
        weights = scores.softmax(dim=-1, dtype=torch.float32)
    if mask is not None and not mask.any(dim=-1).all():  # some query sees no key at all
        weights = weights.masked_fill(~mask, 0.0)
    return weights


def index_select_as_rows(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """x.index_select(dim, index) for a contiguous x, as an index_select along dim 0 of a view that merges
    the dims up to dim: the CPU kernel copies whole rows fast along dim 0 only. Reordering a beam's
    (2, 400, 4, 20, 64) keys and values along dim 1, best of 15 on 2 cores: 345 us plainly, 177 us so in bf16
    (fp32: 1,064 and 1,020)."""
    outer, size = x.shape[:dim].numel(), x.size(dim)
    rows = (torch.arange(outer, device=x.device)[:, None] * size + index).flatten()
    picked = x.reshape(outer * size, *x.shape[dim + 1 :]).index_select(0, rows)
    return picked.view(*x.shape[:dim], index.numel(), *x.shape[dim + 1 :])


def explicit_attention_is_faster(q: torch.Tensor) -> bool:
    """SDPA's fused CPU kernel is the faster choice only in fp32 with many queries.

    Training forward+backward of a (150, 4, 28, 64) batch: 25 ms fused vs 7 ms explicit in bf16
    (fp32: 11.6 vs 14 ms); one decoding step's cross-attention, (1650, 4, 1, 64) queries over
    20 keys: 5.9 vs 3.8 ms in fp32, 9.5 vs 2.6 ms in bf16.
    """
    return q.dtype != torch.float32 or q.size(2) == 1


# ---- label-smoothed cross-entropy -------------------------------------------------------------

LOSS_ROWS_PER_BLOCK = 64  # 64 x 8k fp32 = 2 MB: 15 ms vs 25 ms for the whole 4k x 8k matrix at once


class _BlockedSmoothedCrossEntropy(torch.autograd.Function):
    """Both passes a block of rows at a time, from each row's log-normaliser; the gradient in closed form.

    With lse = log sum_v exp(z_v), -log p_y = lse - z_y and mean_v(-log p_v) = lse - mean_v(z_v): the
    forward pass needs one pass of exp (the log-sum-exp) and never writes log-probabilities out. The
    gradient, softmax - (1 - e) onehot(y) - e / V = exp(z - lse) - ..., is the second pass of exp, done
    in the same blocks while each is in cache, and written in the logits' dtype, which is what the fp32
    path would have rounded it to. Under bf16 autocast the logits stay bf16 and each block is taken to
    fp32 in cache (a full fp32 copy of a 4k x 8k matrix costs more than the softmax itself). Forward and
    backward against a blocked log_softmax and a whole-matrix softmax, alternating, on a 2-core AVX2 AMD
    EPYC: 0.69-0.79x the time at 1,323 x 8,000 fp32 logits (27-34 -> 20-24 ms), 0.77-0.87x at 4,700 x 8,000
    bf16; fp32 gradients equal to 5e-9. In the multi30k_cpu_fp32 step (~510 ms) that is within the noise of
    alternating steps (new/old 0.99-1.00).
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, smoothing: float):
        lse = logits.new_empty(target.shape, dtype=torch.float32)
        nll, uniform = torch.empty_like(lse), torch.empty_like(lse)
        for start in range(0, logits.size(0), LOSS_ROWS_PER_BLOCK):
            rows = slice(start, start + LOSS_ROWS_PER_BLOCK)
            lse[rows], z_target, z_mean = loss_forms.row_statistics(logits[rows], target[rows])
            nll[rows] = lse[rows] - z_target  # -log p_y
            uniform[rows] = lse[rows] - z_mean  # mean_v(-log p_v)
        loss = ((1.0 - smoothing) * nll + smoothing * uniform).sum()
        ctx.save_for_backward(logits, target, lse)
        ctx.smoothing = smoothing
        ctx.mark_non_differentiable(nll)
        return loss, nll.sum()

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, _grad_nll: torch.Tensor):
        logits, target, lse = ctx.saved_tensors
        e, vocab = ctx.smoothing, logits.size(-1)
        scale = grad_loss.float()
        grad = torch.empty_like(logits)
        for start in range(0, logits.size(0), LOSS_ROWS_PER_BLOCK):
            rows = slice(start, start + LOSS_ROWS_PER_BLOCK)
            if grad.dtype == torch.float32:  # softmax written straight into the gradient
                torch.sub(logits[rows], lse[rows, None], out=grad[rows]).exp_().sub_(e / vocab).mul_(scale)
            else:  # in fp32, rounded once
                grad[rows] = (logits[rows].float() - lse[rows, None]).exp_().sub_(e / vocab).mul_(scale)
        # index_put_, not scatter_add_: on CPU the latter copies a bf16 matrix to fp32 and back (18 vs 0.06 ms).
        rows = torch.arange(target.numel(), device=target.device)
        grad.index_put_((rows, target), (-(1.0 - e) * scale).to(grad.dtype).expand(target.shape), accumulate=True)
        return grad, None, None


def blocked_smoothed_cross_entropy(logits, target, smoothing: float, ignore_index: int | None):
    """(loss, nll) sums as mt.fastpath.label_smoothed_cross_entropy returns them.
    Rows whose target is ignore_index are dropped first (boolean indexing costs no sync on a CPU)."""
    if ignore_index is not None:
        real = target != ignore_index
        if not real.all():
            logits, target = logits[real], target[real]
    return _BlockedSmoothedCrossEntropy.apply(logits, target, smoothing)


# ---- search -----------------------------------------------------------------------------------


TOP_K_CHUNK = 64  # entries per chunk: a (1000, 8000) pick took 8.5 / 8.0 / 11.9 / 14.9 ms at 32 / 64 / 128 / 250


def _chunks_pay(vocab: int, k: int) -> bool:
    return vocab // TOP_K_CHUNK >= 4 * k


def chunked_top_k(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x.topk(k, dim=-1) of a (rows, vocabulary) matrix, reading each row's entries once with vector code.

    The CPU topk copies every row into (value, index) pairs and partially sorts them. Here each row is cut
    into chunks of 64 entries, the chunks' maxima taken (vectorised), and topk runs only over the k chunks
    with the highest maxima: each of a row's k best entries lies in one of them (a chunk outside them has
    k chunk maxima above its own, so none of its entries beats all of them). Equal entries may come
    in another order than topk's. On a 2-core AVX2 AMD EPYC, (700, 8000) fp32 logits, k = 10: 6.3 ms
    against topk's 11.3 (a row's maximum alone, with its index: 6.3 ms by max(dim), 0.8 ms by amax).
    Its one caller hands it fp32 (blocked_top_log_probs takes bf16 logits to fp32 first): over bf16, amax
    and topk are the slow part, (128, 8000) k = 10 on a 2-core AVX512-BF16 AMD EPYC: topk 0.80 ms,
    chunked 0.63, cast to fp32 and chunked 0.36.
    """
    rows, vocab = x.shape
    chunks = vocab // TOP_K_CHUNK
    if not _chunks_pay(vocab, k) or not x.is_contiguous():
        return x.topk(k, dim=-1)
    body = x[:, : chunks * TOP_K_CHUNK].view(rows, chunks, TOP_K_CHUNK)
    best_chunks = body.amax(dim=-1).topk(k, dim=-1).indices  # (rows, k)
    ids = (best_chunks[:, :, None] * TOP_K_CHUNK + torch.arange(TOP_K_CHUNK)).flatten(1)
    if chunks * TOP_K_CHUNK < vocab:  # the entries past the last whole chunk are candidates too
        ids = torch.cat([ids, torch.arange(chunks * TOP_K_CHUNK, vocab).expand(rows, -1)], dim=1)
    top, at = x.gather(1, ids).topk(k, dim=-1)
    return top, ids.gather(1, at)


def blocked_top_log_probs(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits.log_softmax(-1, dtype=float32).topk(k) without the log-probability matrix.

    Picks on the raw logits (chunked_top_k) and normalises only the winners: log p = z - max - log sum
    exp(z - max), the sum accumulated in fp32 (a bf16 beam step spent more time turning (1650, 8000)
    logits into fp32 log-probabilities than choosing from them). Blocks of 128 rows keep the exp/sum pass
    in cache right after the pick has read the block. Same 2-core AVX2 machine, (700, 8000) fp32, against
    log_softmax + topk, alternating: 10-13 vs 14-17 ms at k = 10, 6.3-7.4 vs 13 ms at k = 1; the values are
    closer to float64's (largest error 4.5e-7 vs 2.2e-6). A whole `translate --beam 5` of test2016 (a smoke
    model, fp32): 0.95x the wall time (6 alternating pairs, 0.89-0.98), greedy 0.96x (8 pairs), the same
    output. fp32 logits of a small vocabulary take the stock ops, as fast there.

    bf16 logits (a bf16 decoder's) are taken to fp32 a block at a time, in cache, then picked and normalised
    as fp32 ones: on a 2-core AVX512-BF16 AMD EPYC, (1140, 8000) at k = 10 8.98 ms against 12.43 for the
    same steps over bf16, at k = 1 4.53 against 10.42; log-probabilities within 5e-7 of float64's, where the
    subtraction in bf16 was off by up to 7e-4.
    """
    if logits.dtype == torch.float32 and not _chunks_pay(logits.size(-1), k):
        return logits.log_softmax(dim=-1).topk(k, dim=-1)
    values, indices = [], []
    for block in logits.split(128):
        block = block.float()  # bf16 logits: this block in fp32 (fp32 ones: the block itself)
        top, ids = chunked_top_k(block, k)
        best = top[:, :1]
        log_normaliser = (block - best).exp_().sum(-1, keepdim=True).log_()
        values.append(top - best - log_normaliser)
        indices.append(ids)
    return torch.cat(values), torch.cat(indices)


DROP_FINISHED_SHARE = 1 / 8
"""Finished rows leave the decoder batch once they are an eighth of it. Every change of batch size
costs a reorder of all caches and, on CPU, a new bf16 matmul kernel setup (~0.35 ms per projection);
carrying a few finished rows costs less until then."""


KEYS_MULTIPLE = 8  # a decoding step's self-attention keys, rounded up (sources: mt.data.buckets.rounded_up, 8 too)


def keys_room(keys: int) -> int:
    """The key slots a decoding step attends over for `keys` keys, the rest masked: keys rounded up to a
    multiple of KEYS_MULTIPLE. Every step with a new key length would otherwise compile new bmm kernels
    (see bounded_shapes in mt/fastpath/__init__.py)."""
    return -(-keys // KEYS_MULTIPLE) * KEYS_MULTIPLE


def kept_rows_bucket(rows: int) -> int:
    """The decoder batch size, at least `rows`, that greedy search keeps when finished rows leave on a CPU:
    rows rounded up to 8 sizes an octave (below 16 as they are, then even up to 32, multiples of 4 up to 64,
    and so on), at most an eighth more. oneDNN compiles a bf16 matmul kernel for every new shape, 0.1-5.5 ms
    by size, and keeps 1,024: with exact sizes a drop needs new kernels for each of a step's five
    projections, 222 of them (0.20 s) in a 2,000-line greedy translation; bucket sizes come back from batch
    to batch and chunk to chunk. Greedy `translate` of 20,000 lines on 2 Intel cores with AMX (bf16, a
    smoke model): 0.89 of the wall time (0.83-0.92, 5 pairs), 1.71 GB of peak memory against 1.91, the same
    output (docs/benchmarks.md, CPU decoding)."""
    step = 1 << max(0, rows.bit_length() - 4)
    return -(-rows // step) * step
