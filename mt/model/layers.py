"""The building blocks of the Transformer: positions, feed-forward, residual sublayers, layers."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from mt import fastpath
from mt.model.attention import MultiHeadAttention, SharedMask, keep_weights
from mt.model.state import LayerCache


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


def vocabulary_logits(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The output layer, h @ weight^T: one score per vocabulary entry for every row of h."""
    return fastpath.linear(h, weight)


class Dropout(nn.Module):
    """Inverted dropout (Srivastava et al. 2014), as nn.Dropout: zero each unit with probability p,
    scale the rest by 1 / (1 - p)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        return fastpath.dropout(x, self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def sinusoidal_positions(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """Sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), for any positions."""
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, d/2)
    table = torch.zeros(positions.numel(), d_model, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


_GROWING = threading.Lock()


class PositionalEncoding(nn.Module):
    """Adds sinusoidal positions to scaled embeddings, then dropout (Sec. 3.4, 3.5, 5.4).

    The table grows on demand, so there is no fixed maximum length. A table it outgrows is kept: CUDA
    graphs captured before (mt.fastpath.cuda_graphs) read it by its address, which freed memory would
    give to other tensors.
    """

    def __init__(self, d_model: int, dropout: float):
        super().__init__()
        self.d_model = d_model
        self.dropout = Dropout(dropout)
        self.register_buffer("table", sinusoidal_positions(torch.arange(256), d_model), persistent=False)
        self.outgrown: list[torch.Tensor] = []

    def reserve(self, length: int) -> None:
        """Grow the table to hold `length` positions now (a position given as a tensor cannot grow it)."""
        if length > self.table.size(0):
            self._grow(length)

    def _grow(self, length: int) -> None:
        # threads searching side by side: the table only grows; grown while decoding under inference_mode, it is
        # still a plain tensor that training's autograd may save
        with _GROWING, torch.inference_mode(False):
            if length > self.table.size(0):
                self.outgrown.append(self.table)
                self.table = sinusoidal_positions(torch.arange(length, device=self.table.device), self.d_model)

    def forward(self, x: torch.Tensor, offset: int | torch.Tensor = 0) -> torch.Tensor:
        """x: (B, T, d) embeddings of positions offset .. offset+T-1; with offset a () device tensor (a
        static decoder state's position), x holds one position, read without waiting for the device."""
        if isinstance(offset, torch.Tensor):
            return self.dropout(x + self.table.index_select(0, offset.view(1)).to(x.dtype))
        end = offset + x.size(1)
        if end > self.table.size(0):
            self._grow(2 * end)
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


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm for the pre-norm stack, whose output feeds a sublayer (not the residual stream):
    under bf16 autocast on a CPU its output is already bf16 (see mt.fastpath.autocast_early).
    The statistics are still accumulated in fp32 inside the kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(fastpath.autocast_early(x))


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

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | SharedMask) -> torch.Tensor:
        x = self.attn_sublayer(x, lambda h: self.self_attn(h, h, mask=src_mask)[0])
        return self.ffn_sublayer(x, self.ffn)


class DecoderLayer(nn.Module):
    """Sec. 3.1: masked self-attention, encoder-decoder attention, feed-forward.

    With a cache (a LayerCache per layer), x holds only the newest position: its keys and values
    are appended to the cached ones (cache.past), and the memory's are projected once (cache.source).
    """

    def __init__(self, d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, norm_first):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout)
        self.self_sublayer = Residual(d_model, dropout, norm_first)
        self.cross_sublayer = Residual(d_model, dropout, norm_first)
        self.ffn_sublayer = Residual(d_model, dropout, norm_first)

    def _self_attend(self, h: torch.Tensor, cache: LayerCache | None) -> torch.Tensor:
        if cache is None:  # teacher forcing: all positions at once, look-ahead masked
            return self.self_attn(h, h, is_causal=True)[0]
        k, v, visible = cache.extend_past(self.self_attn.project_kv(h))  # the newest position's added
        return self.self_attn(h, kv=(k, v), mask=visible)[0]  # one query sees every earlier position

    def _cross_attend(self, h, memory, src_mask, cache, need_weights) -> torch.Tensor:
        if cache is None:
            kv = self.cross_attn.project_kv(memory)
        else:
            if "k" not in cache.source:  # contiguous once, or every step's matmul would copy them
                cache.source["k"], cache.source["v"] = (t.contiguous() for t in self.cross_attn.project_kv(memory))
            kv = (cache.source["k"], cache.source["v"])
        # A sentence's hypotheses (beam search: consecutive rows, one memory row) are its queries side by
        # side: each attends alone, as it would with a copy of the memory, which is read once, not once each.
        rows, length, d = h.shape
        copies = rows // memory.size(0)
        queries = h.reshape(-1, copies * length, d)
        out, weights = self.cross_attn(queries, mask=src_mask, kv=kv, need_weights=need_weights)
        if weights is not None and copies > 1:  # (B, heads, copies * T, S) -> (rows, heads, T, S)
            weights = weights.unflatten(2, (copies, length)).transpose(1, 2).flatten(0, 1)
        if need_weights:
            keep_weights(self, weights)  # per thread: decoding threads share the model
        return out.reshape(rows, length, d)

    def forward(self, x, memory, src_mask, cache: LayerCache | None = None, need_weights: bool = False):
        x = self.self_sublayer(x, lambda h: self._self_attend(h, cache))
        x = self.cross_sublayer(x, lambda h: self._cross_attend(h, memory, src_mask, cache, need_weights))
        return self.ffn_sublayer(x, self.ffn)
