"""The building blocks of the Transformer: positions, feed-forward, residual sublayers, layers."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mt.model.attention import MultiHeadAttention


def vocabulary_layers(src_vocab_size: int, tgt_vocab_size: int, d_model: int, pad_id: int, tie: bool):
    """Source and target embeddings and the output projection, initialised N(0, d^-1/2) (pad row 0).

    Sec. 3.4 (after Press and Wolf 2017): with a joint vocabulary the three share one matrix, and
    the returned output projection is None (use the target embedding's weight).
    """
    src = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
    if tie:
        if src_vocab_size != tgt_vocab_size:
            raise ValueError("tied embeddings need a joint vocabulary (equal sizes)")
        tgt, output = src, None
    else:
        tgt = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        output = nn.Linear(d_model, tgt_vocab_size, bias=False)
    for embed in {src, tgt}:
        nn.init.normal_(embed.weight, mean=0.0, std=d_model**-0.5)
        with torch.no_grad():
            embed.weight[pad_id].zero_()
    return src, tgt, output


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


def vocabulary_logits(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The output layer, h @ weight^T: one score per vocabulary entry for every row of h.

    On CPU a (tokens x vocabulary) product written at once is slow, probably because the large
    output leaves the cache mid-write: for 4,700 x 256 @ 256 x 8,000, blocks of 1,024 rows run
    at 390 vs 255 GFLOP/s in bf16 and 167 vs 136 in fp32 (2-core AVX-512 CPU).
    """
    if h.device.type != "cpu" or h.dim() != 2 or h.size(0) <= OUTPUT_ROWS_PER_BLOCK:
        return F.linear(h, weight)
    dtype = autocast_dtype("cpu")
    if dtype is not None:  # autocast does not reach into a custom Function: cast as it would
        h, weight = h.to(dtype), weight.to(dtype)
    with torch.autocast("cpu", enabled=False):
        return _RowBlockedLinear.apply(h, weight)


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


class Dropout(nn.Module):
    """Inverted dropout (Srivastava et al. 2014), as nn.Dropout, but cheaper on CPU.

    torch's CPU bernoulli_ draws one random number per element; here one 64-bit draw gives four
    16-bit uniforms, compared into a mask written straight in x's dtype and scaled once
    (multiplying by a bool mask would convert it in the forward and again in the backward pass).
    Forward+backward on a (6000, 256) bf16 tensor: 10.2 ms (nn.Dropout) -> 1.8 ms.
    The drop probability is p rounded to a multiple of 1/65536.
    """

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        if x.device.type != "cpu":  # GPUs have a fused kernel
            return F.dropout(x, self.p, training=True)
        keep = torch.empty_like(x)
        torch.ge(random_int16(x.shape), round(self.p * 65536) - 32768, out=keep)  # 1 with probability 1 - p
        return x * keep.mul_(1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"


def sinusoidal_positions(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """Sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), for any positions."""
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)
        * (-math.log(10000.0) / d_model)
    )
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, d/2)
    table = torch.zeros(positions.numel(), d_model, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


class PositionalEncoding(nn.Module):
    """Adds sinusoidal positions to scaled embeddings, then dropout (Sec. 3.4, 3.5, 5.4).

    The table grows on demand, so there is no fixed maximum length.
    """

    def __init__(self, d_model: int, dropout: float):
        super().__init__()
        self.d_model = d_model
        self.dropout = Dropout(dropout)
        self.register_buffer("table", sinusoidal_positions(torch.arange(256), d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (B, T, d) embeddings of positions offset .. offset+T-1."""
        end = offset + x.size(1)
        if end > self.table.size(0):
            self.table = sinusoidal_positions(torch.arange(2 * end, device=x.device), self.d_model)
        return self.dropout(x + self.table[offset:end].to(x.dtype))


class FeedForward(nn.Module):
    """Sec. 3.3, Eq. 2: FFN(x) = max(0, x W1 + b1) W2 + b2."""

    def __init__(self, d_model: int, ffn_dim: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, ffn_dim)
        self.linear2 = nn.Linear(ffn_dim, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast computes in on this device type, or None where autocast is off."""
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm whose output, under autocast, is already in the autocast dtype.

    Autocast runs layer norm in fp32 and casts its output again in every projection that reads
    it (the q and k/v projections, the FFN): casting the input once here does that work once.
    The statistics are still accumulated in fp32 inside the kernel. Used where the output feeds
    a sublayer (pre-norm), not where it is the residual stream itself (post-norm).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = autocast_dtype(x.device.type)
        if dtype is not None:
            x = x.to(dtype)
        return super().forward(x)


class Residual(nn.Module):
    """Sec. 3.1 and 5.4: LayerNorm(x + Dropout(Sublayer(x))) (post-norm, the paper's),
    or x + Dropout(Sublayer(LayerNorm(x))) (pre-norm, steadier at high learning rates)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm = LayerNorm(d_model) if norm_first else nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Sec. 3.1: self-attention, then a feed-forward network, each in a residual sublayer."""

    def __init__(self, d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, norm_first):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout)
        self.attn_sublayer = Residual(d_model, dropout, norm_first)
        self.ffn_sublayer = Residual(d_model, dropout, norm_first)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        x = self.attn_sublayer(x, lambda h: self.self_attn(h, h, mask=src_mask)[0])
        return self.ffn_sublayer(x, self.ffn)


class DecoderLayer(nn.Module):
    """Sec. 3.1: masked self-attention, encoder-decoder attention, feed-forward.

    With a cache (a dict per layer), x holds only the newest position: its keys and values
    are appended to the cached ones, and the memory's keys and values are projected once.
    """

    def __init__(self, d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, norm_first):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout)
        self.self_sublayer = Residual(d_model, dropout, norm_first)
        self.cross_sublayer = Residual(d_model, dropout, norm_first)
        self.ffn_sublayer = Residual(d_model, dropout, norm_first)
        self.cross_weights: torch.Tensor | None = None

    def _self_attend(self, h: torch.Tensor, cache: dict | None) -> torch.Tensor:
        if cache is None:  # teacher forcing: all positions at once, look-ahead masked
            return self.self_attn(h, h, is_causal=True)[0]
        k, v = self.self_attn.project_kv(h)  # (B, h, 1, d_k): the newest position
        if "self_k" in cache:
            k = torch.cat([cache["self_k"], k], dim=2)
            v = torch.cat([cache["self_v"], v], dim=2)
        cache["self_k"], cache["self_v"] = k, v
        return self.self_attn(h, kv=(k, v))[0]  # one query sees every earlier position

    def _cross_attend(self, h, memory, src_mask, cache, need_weights) -> torch.Tensor:
        if cache is None:
            kv = self.cross_attn.project_kv(memory)
        else:
            if "cross_k" not in cache:  # contiguous once, or every step's matmul would copy them
                cache["cross_k"], cache["cross_v"] = (t.contiguous() for t in self.cross_attn.project_kv(memory))
            kv = (cache["cross_k"], cache["cross_v"])
        out, self.cross_weights = self.cross_attn(h, mask=src_mask, kv=kv, need_weights=need_weights)
        return out

    def forward(self, x, memory, src_mask, cache: dict | None = None, need_weights: bool = False):
        x = self.self_sublayer(x, lambda h: self._self_attend(h, cache))
        x = self.cross_sublayer(x, lambda h: self._cross_attend(h, memory, src_mask, cache, need_weights))
        return self.ffn_sublayer(x, self.ffn)
