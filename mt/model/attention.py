"""Scaled dot-product and multi-head attention (Vaswani et al. 2017, Sec. 3.2).

Masks are boolean and broadcast to (B, h, T_query, T_key): True means "may attend". A mask that every layer
of a pass reads travels as a SharedMask, so that its float form is made once, not once per layer.
"""

from __future__ import annotations

import math
import threading

import torch
import torch.nn.functional as F
from torch import nn

from mt import fastpath

_kept = threading.local()  # each thread's attention weights, by the module that computed them


def keep_weights(owner: nn.Module, weights: torch.Tensor | None) -> None:
    """Keep the attention weights owner computed in a call with need_weights, for this thread alone: threads
    decoding with one model (mt-serve's) each read back their own, never another's."""
    if not hasattr(_kept, "weights"):
        _kept.weights = {}
    _kept.weights[id(owner)] = weights


def kept_weights(owner: nn.Module) -> torch.Tensor | None:
    """The weights owner kept in this thread's last call with need_weights (None before any)."""
    return _kept.weights.get(id(owner)) if hasattr(_kept, "weights") else None


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, S) token ids -> (B, 1, 1, S) mask that hides padding keys."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(length: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) look-ahead mask of Sec. 3.2.3: position i sees positions <= i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


class SharedMask:
    """A boolean mask (`allowed`, True: may attend) read by several attention calls of one pass or decoding
    step: the float form F.scaled_dot_product_attention takes (0 where a query may attend, -inf where not,
    as it makes from a boolean mask itself) is made at the first call that needs it and reused by the others.
    SDPA converts a boolean mask at every call: three kernels on a GPU, 36 of a 6+6 decoding step's ~150.

    Make one per pass or step and drop it after: its float form does not follow later changes to `allowed`."""

    def __init__(self, allowed: torch.Tensor):
        self.allowed = allowed
        self._additive: dict[torch.dtype, torch.Tensor] = {}

    def additive(self, dtype: torch.dtype) -> torch.Tensor:
        """The float form in dtype (SDPA's mask must have the query's dtype)."""
        if dtype not in self._additive:
            hidden = torch.full(self.allowed.shape, float("-inf"), dtype=dtype, device=self.allowed.device)
            self._additive[dtype] = hidden.masked_fill_(self.allowed, 0.0)
        return self._additive[dtype]


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 1, written out: softmax(Q K^T / sqrt(d_k)) V. Returns (output, weights in fp32).

    The readable path, and the one that can hand back the weights for heatmaps.
    A query that may attend to nothing gets zero weights (as SDPA gives), not NaN.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, Tq, Tk)
    if is_causal:
        causal = causal_mask(scores.size(-1), scores.device)[-scores.size(-2) :]
        mask = causal if mask is None else mask & causal
    if mask is not None:
        # The dtype's own minimum, never a hard-coded -1e9 (which overflows fp16).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = fastpath.masked_softmax(scores, mask)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped.to(v.dtype) @ v, weights


class MultiHeadAttention(nn.Module):
    """Sec. 3.2.2: h heads of attention over linear projections, concatenated and projected."""

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} is not divisible by heads={heads}")
        self.heads = heads
        self.d_k = d_model // heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)  # W^Q
        # W^K and W^V side by side: one matmul projects both (fewer, larger matmuls are faster,
        # and under autocast the input is cast to bf16 once instead of twice).
        self.kv_proj = nn.Linear(d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)  # W^O

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (B, h, T, d_k)."""
        batch, length, _ = x.shape
        return x.unflatten(-1, (self.heads, self.d_k)).transpose(1, 2)

    def project_kv(self, x: torch.Tensor) -> torch.Tensor:
        """Keys and values of x (B, T, d), split into heads, side by side: (2, B, h, T, d_k), [0] the keys,
        [1] the values (`k, v = project_kv(x)` takes them apart). An incremental decoder caches them as one
        tensor, so that appending a position or reordering the hypotheses is one op, not two."""
        return self.kv_proj(x).unflatten(-1, (2, self.heads, self.d_k)).permute(2, 0, 3, 1, 4)

    def forward(
        self,
        query: torch.Tensor,
        key_value: torch.Tensor | None = None,
        mask: torch.Tensor | SharedMask | None = None,
        is_causal: bool = False,
        kv: tuple[torch.Tensor, torch.Tensor] | torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from query (B, Tq, d) to key_value (B, Tk, d), or to ready projections kv.

        Returns the output (B, Tq, d) and, if need_weights, the weights (B, h, Tq, Tk).
        """
        q = self.split_heads(self.q_proj(query))  # (B, h, Tq, d_k)
        k, v = kv if kv is not None else self.project_kv(key_value)  # (B, h, Tk, d_k)
        dropout_p = self.dropout if self.training else 0.0
        allowed = mask.allowed if isinstance(mask, SharedMask) else mask
        if is_causal and allowed is not None:  # SDPA takes one or the other: merge them
            mask = allowed = allowed & causal_mask(k.size(2), k.device)[-q.size(2) :]
            is_causal = False
        if need_weights or not fastpath.fused_attention_pays(q):
            out, weights = attention(q, k, v, allowed, is_causal, dropout_p)
            weights = weights if need_weights else None
        else:  # the same maths as attention() above, in one fused kernel
            if isinstance(mask, SharedMask):
                mask = mask.additive(q.dtype)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
            weights = None
        batch, _, length, _ = out.shape
        out = out.transpose(1, 2).reshape(batch, length, self.heads * self.d_k)
        return self.out_proj(out), weights
