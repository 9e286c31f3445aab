"""The encoder-decoder Transformer (Vaswani et al. 2017, Sec. 3), with incremental decoding."""

from __future__ import annotations

import math

import torch
from torch import nn

from mt import fastpath
from mt.model.attention import SharedMask, kept_weights, padding_mask
from mt.model.layers import (
    DecoderLayer,
    EncoderLayer,
    LayerNorm,
    PositionalEncoding,
    vocabulary_layers,
    vocabulary_logits,
)
from mt.model.state import DecoderState, LayerCache, StaticDecoderState, StaticLayerCache


class Transformer(nn.Module):
    """Embeddings -> N encoder layers; embeddings -> N decoder layers -> linear -> logits."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        heads: int = 8,
        ffn_dim: int = 2048,
        encoder_layers: int = 6,
        decoder_layers: int = 6,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        norm_first: bool = False,
        tie_embeddings: bool = True,
        init: str = "fairseq",
        pad_id: int = 0,
    ):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.norm_first = norm_first
        self.init = init
        layer_args = (d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, norm_first)

        # Sec. 3.4: with a joint vocabulary, source, target and output share one matrix.
        self.tie_embeddings = tie_embeddings
        self.src_embed, self.tgt_embed, self.output_proj = vocabulary_layers(
            src_vocab_size, tgt_vocab_size, d_model, pad_id, tie_embeddings
        )
        self.positions = PositionalEncoding(d_model, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(decoder_layers))
        # Pre-norm leaves the residual stream un-normalised: close each stack with a LayerNorm.
        self.encoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initial weights; embeddings keep N(0, d^-1/2), so that x sqrt(d) has unit scale.

        init="fairseq" (the default): fairseq's scales, the query, key and value projections Xavier-uniform as
        if the three were one 3d x d matrix (as nn.MultiheadAttention's packed weight is: sqrt(2) narrower),
        the feed-forward layers at nn.Linear's default (uniform within 1/sqrt(fan_in)), every other matrix
        Xavier-uniform, biases zero but the feed-forward's; it ended whole runs at a lower valid loss than xavier
        (docs/benchmarks.md#initialisation). init="xavier": every matrix Xavier-uniform, each of the query, key
        and value projections as a d x d matrix of its own; biases zero.
        """
        packed = self.init == "fairseq"
        for name, p in self.named_parameters():
            if "embed" in name or (packed and ".ffn." in name):
                continue
            if packed and name.endswith(("q_proj.weight", "kv_proj.weight")):
                bound = math.sqrt(6 / (4 * self.d_model))
                nn.init.uniform_(p, -bound, bound)
            elif p.dim() > 1:
                for block in p.data.split(self.d_model) if "kv_proj" in name else [p.data]:
                    nn.init.xavier_uniform_(block)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def embed(self, table: nn.Embedding, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Sec. 3.4: embeddings scaled by sqrt(d_model), plus positions: the residual stream's start."""
        x = table(tokens) * math.sqrt(self.d_model)
        return self.positions(fastpath.autocast_early(x), offset)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        h = self.decoder_norm(h)
        return vocabulary_logits(h, self.tgt_embed.weight if self.output_proj is None else self.output_proj.weight)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) -> memory (B, S, d) and the source padding mask (B, 1, 1, S)."""
        src_mask = padding_mask(src, self.pad_id)
        x = self.embed(self.src_embed, src)
        mask = SharedMask(src_mask)  # one for the layers
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return self.encoder_norm(x), src_mask

    def decode(self, tgt_in, memory, src_mask, need_weights: bool = False) -> torch.Tensor:
        """Teacher forcing: all target positions at once, look-ahead masked -> states (B, T, d)."""
        x = self.embed(self.tgt_embed, tgt_in)
        src_mask = SharedMask(src_mask)  # one for the layers
        for layer in self.decoder_layers:
            x = layer(x, memory, src_mask, need_weights=need_weights)
        return x

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, V) of the next token at every target position; with a boolean mask
        keep (B, T), only the kept positions' logits (N, V), which spares the output layer
        the padding."""
        memory, src_mask = self.encode(src)
        h = self.decode(tgt_in, memory, src_mask)
        return self.logits(h if keep is None else h[keep])

    # Incremental decoding: the interface search.py relies on.

    def start_state(self, src: torch.Tensor, copies: int = 1) -> DecoderState:
        """Encode src (B, S) for B * copies hypotheses: each sentence's copies attend to its one memory row."""
        memory, src_mask = self.encode(src)
        return DecoderState(memory, src_mask, [LayerCache() for _ in self.decoder_layers], copies=copies)

    def start_static_state(self, src: torch.Tensor, copies: int, length: int) -> StaticDecoderState:
        """start_state for search in fixed slots (mt/decoding/fixed_slots.py): each sentence as `copies`
        rows that share its memory row, room for `length` target positions, the cross-attention keys and
        values projected now (once per sentence)."""
        memory, src_mask = self.encode(src)
        self.positions.reserve(length)
        position = torch.zeros((), dtype=torch.long, device=src.device)
        slots = torch.arange(length, device=src.device).view(1, 1, 1, length)
        caches, past = [], None
        for i, layer in enumerate(self.decoder_layers):
            k, v = (t.contiguous() for t in layer.cross_attn.project_kv(memory))
            if past is None:  # every layer's self-attention keys and values: (2 * layers, rows, heads, length, d_k)
                past = k.new_zeros(2 * len(self.decoder_layers), src.size(0) * copies, k.size(1), length, k.size(3))
            own = StaticLayerCache({"kv": past[2 * i : 2 * i + 2]}, {"k": k, "v": v}, position=position, slots=slots)
            caches.append(own)
        return StaticDecoderState(memory, src_mask, caches, position, copies=copies, past=past)

    def restart_static_state(self, state: StaticDecoderState, src: torch.Tensor) -> None:
        """Load src, of the shape state was started with, into state's storage (a step captured on it stays
        valid): its memory, mask and cross-attention keys and values, position 0, the self-attention slots
        cleared (no value of the batch before can reach this one's). Nothing else is allocated."""
        memory, src_mask = self.encode(src)
        state.memory.copy_(memory)
        state.src_mask.copy_(src_mask)
        state.position.zero_()
        state.clear_past()
        for layer, cache in zip(self.decoder_layers, state.caches):
            for kept, new in zip((cache.source["k"], cache.source["v"]), layer.cross_attn.project_kv(memory)):
                kept.copy_(new)

    def step(
        self, tokens: torch.Tensor, state: DecoderState, need_weights: bool = False
    ) -> tuple[torch.Tensor, DecoderState]:
        """Feed one token per hypothesis, tokens (B,), -> logits (B, V) for the next one.

        Cost does not grow with a re-run over the prefix: earlier keys/values come from the cache.
        """
        x = self.embed(self.tgt_embed, tokens[:, None], offset=state.position)  # (B, 1, d)
        state.start_step()
        src_mask = SharedMask(state.src_mask)  # one for the layers, made in the step (a captured step remakes it)
        for layer, cache in zip(self.decoder_layers, state.caches):
            x = layer(x, state.memory, src_mask, cache=cache, need_weights=need_weights)
        state.position += 1
        return self.logits(x)[:, 0], state

    def cross_attention(self, layer: int = -1) -> torch.Tensor | None:
        """Cross-attention weights (B, h, T, S) of this thread's last call made with need_weights."""
        return kept_weights(self.decoder_layers[layer])

    def attention_maps(self) -> tuple[int, int]:
        """(decoder layers, heads): the layers and heads cross_attention can show."""
        return len(self.decoder_layers), self.decoder_layers[0].cross_attn.heads
