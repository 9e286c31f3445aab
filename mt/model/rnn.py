"""The attention RNN baseline (Bahdanau, Cho and Bengio 2015; Luong et al. 2015 for dot/general scores).

A bidirectional GRU (or LSTM) reads the source; a decoder cell, fed the previous target word and a
context vector, writes the target. The context is an attention-weighted sum of the encoder states,
with weights a_tj = softmax_j(e_tj) and alignment scores e_tj = f_att(s_{t-1}, h_j):
  bahdanau (additive):  v^T tanh(W s_{t-1} + U h_j)        (Sec. 3.1 and App. A.1.2)
  general:              s_{t-1}^T W h_j                      (Luong et al., Eq. 8)
  dot:                  s_{t-1}^T h_j
The model offers the same incremental decoding interface as the Transformer (start_state, step,
DecoderState.select / reorder_same_source), so search, translate and the trainer use it unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mt.model.attention import keep_weights, kept_weights, padding_mask
from mt.model.layers import vocabulary_layers
from mt.model.state import DecoderState, LayerCache


class AlignmentScores(nn.Module):
    """e_tj = f_att(s_{t-1}, h_j); the part that depends on h_j alone is computed once per sentence."""

    def __init__(self, kind: str, d_model: int):
        super().__init__()
        if kind not in ("bahdanau", "general", "dot"):
            raise ValueError(f"unknown attention {kind!r}: bahdanau, general or dot")
        self.kind = kind
        if kind == "bahdanau":
            self.query = nn.Linear(d_model, d_model, bias=False)  # W
            self.key = nn.Linear(d_model, d_model)  # U (with the bias of the hidden layer)
            self.v = nn.Linear(d_model, 1, bias=False)
        elif kind == "general":
            self.key = nn.Linear(d_model, d_model, bias=False)  # W, applied to h_j once

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, d) encoder states -> what scores() compares the decoder state with."""
        return memory if self.kind == "dot" else self.key(memory)

    def forward(self, state: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """state (B, d), keys (B, S, d) -> scores (B, S)."""
        if self.kind == "bahdanau":
            return self.v(torch.tanh(self.query(state)[:, None, :] + keys)).squeeze(-1)
        return torch.bmm(keys, state[:, :, None]).squeeze(-1)


class RNNAttention(nn.Module):
    """Bidirectional RNN encoder, attention, RNN decoder cell, deep output layer."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 256,
        encoder_layers: int = 1,
        dropout: float = 0.2,
        rnn_cell: str = "gru",
        attention: str = "bahdanau",
        tie_embeddings: bool = True,
        pad_id: int = 0,
    ):
        super().__init__()
        if rnn_cell not in ("gru", "lstm"):
            raise ValueError(f"unknown rnn_cell {rnn_cell!r}: gru or lstm")
        if d_model % 2:
            raise ValueError("d_model must be even (two encoder directions of d_model / 2)")
        self.d_model, self.pad_id, self.rnn_cell = d_model, pad_id, rnn_cell
        self.tie_embeddings = tie_embeddings
        self.src_embed, self.tgt_embed, self.output_proj = vocabulary_layers(
            src_vocab_size, tgt_vocab_size, d_model, pad_id, tie_embeddings
        )
        rnn = nn.GRU if rnn_cell == "gru" else nn.LSTM
        self.encoder = rnn(
            d_model,
            d_model // 2,
            num_layers=encoder_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if encoder_layers > 1 else 0.0,
        )
        self.init_state = nn.Linear(d_model, d_model)  # s_0 = tanh(W_s mean_j h_j)
        self.scores = AlignmentScores(attention, d_model)
        cell = nn.GRUCell if rnn_cell == "gru" else nn.LSTMCell
        self.decoder_cell = cell(2 * d_model, d_model)  # input: [E y_{t-1}; c_t]
        self.deep_output = nn.Linear(3 * d_model, d_model)  # from [s_t; c_t; E y_{t-1}]
        self.dropout = nn.Dropout(dropout)

    # ---- the encoder ----------------------------------------------------------------------------

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) -> annotations h_j (B, S, d), the concatenated forward and backward states,
        and the padding mask (B, 1, 1, S)."""
        src_mask = padding_mask(src, self.pad_id)
        lengths = src_mask[:, 0, 0].sum(-1).clamp(min=1).cpu()
        packed = pack_padded_sequence(
            self.dropout(self.src_embed(src)), lengths, batch_first=True, enforce_sorted=False
        )
        memory, _ = self.encoder(packed)
        memory, _ = pad_packed_sequence(memory, batch_first=True, total_length=src.size(1))
        return memory, src_mask

    # ---- the decoder ----------------------------------------------------------------------------

    def start_state(self, src: torch.Tensor, copies: int = 1) -> DecoderState:
        memory, src_mask = self.encode(src)
        return self._initial_state(memory, src_mask).repeat_rows(copies)  # a hypothesis reads its own row

    def _initial_state(self, memory: torch.Tensor, src_mask: torch.Tensor) -> DecoderState:
        real = src_mask[:, 0, 0, :, None].to(memory.dtype)  # (B, S, 1)
        mean = (memory * real).sum(1) / real.sum(1).clamp(min=1)
        hidden = torch.tanh(self.init_state(mean))
        cache = LayerCache(past={"hidden": hidden}, source={"keys": self.scores.keys(memory)})
        if self.rnn_cell == "lstm":
            cache.past["cell"] = torch.zeros_like(hidden)
        return DecoderState(memory, src_mask, [cache])

    def _advance(self, tokens: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed y_{t-1} (B,): attend with s_{t-1}, update the cell -> (pre-output state (B, d), a_t (B, S))."""
        cache = state.caches[0]
        prev = cache.past["hidden"]  # s_{t-1}
        scores = self.scores(prev, cache.source["keys"])  # e_tj, (B, S)
        scores = scores.masked_fill(~state.src_mask[:, 0, 0], torch.finfo(scores.dtype).min)
        weights = scores.float().softmax(-1).to(state.memory.dtype)  # a_tj
        context = torch.bmm(weights[:, None, :], state.memory).squeeze(1)  # c_t = sum_j a_tj h_j
        embedded = self.dropout(self.tgt_embed(tokens))
        cell_input = torch.cat([embedded, context], dim=-1)
        if self.rnn_cell == "gru":
            hidden = self.decoder_cell(cell_input, prev)
        else:
            hidden, cache.past["cell"] = self.decoder_cell(cell_input, (prev, cache.past["cell"]))
        cache.past["hidden"] = hidden
        state.position += 1
        out = torch.tanh(self.deep_output(torch.cat([hidden, context, embedded], dim=-1)))
        return self.dropout(out), weights

    def step(self, tokens: torch.Tensor, state: DecoderState, need_weights: bool = False):
        """One target word per hypothesis, tokens (B,) -> logits (B, V) of the next one."""
        out, weights = self._advance(tokens, state)
        if need_weights:
            keep_weights(self, weights[:, None, None, :])  # (B, 1 head, 1 step, S), for this thread
        return self.logits(out), state

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.tgt_embed.weight) if self.output_proj is None else self.output_proj(h)

    def decode(self, tgt_in, memory, src_mask, need_weights: bool = False) -> torch.Tensor:
        """Teacher forcing -> pre-output states (B, T, d). An RNN decoder is sequential by nature:
        this is the incremental step in a loop, so both give the same numbers."""
        state = self._initial_state(memory, src_mask)
        outputs, weights = [], []
        for t in range(tgt_in.size(1)):
            out, w = self._advance(tgt_in[:, t], state)
            outputs.append(out)
            weights.append(w)
        if need_weights:
            keep_weights(self, torch.stack(weights, dim=1)[:, None])  # (B, 1, T, S), for this thread
        return torch.stack(outputs, dim=1)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        h = self.decode(tgt_in, memory, src_mask)
        return self.logits(h if keep is None else h[keep])

    def cross_attention(self, layer: int = -1) -> torch.Tensor | None:
        """Attention weights (B, 1, T, S) of this thread's last step or decode made with need_weights."""
        return kept_weights(self)

    def attention_maps(self) -> tuple[int, int]:
        """(decoder layers, heads) cross_attention can show: one attention, however many RNN layers."""
        return 1, 1
