"""The incremental-decoding state every model hands to search (mt/decoding/search.py):

    state = model.start_state(src)             # encode once
    logits, state = model.step(tokens, state)  # one token per hypothesis
    state = state.select(index)                # reorder / drop hypotheses (batch dim 0)

Its caches are kept apart by what they depend on, so beam search moves only what must move.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerCache:
    """One decoder layer's cached tensors, kept apart by what they depend on."""

    past: dict[str, torch.Tensor] = field(default_factory=dict)  # the hypothesis so far (self-attention keys
    # and values, an RNN's hidden state): follows its hypothesis when beams reorder
    source: dict[str, torch.Tensor] = field(default_factory=dict)  # the source sentence alone (cross-attention
    # keys and values): the same for every hypothesis of a sentence

    def select(self, index: torch.Tensor, same_source: bool = False) -> LayerCache:
        past = {k: v.index_select(0, index) for k, v in self.past.items()}
        source = self.source if same_source else {k: v.index_select(0, index) for k, v in self.source.items()}
        return LayerCache(past, source)


@dataclass
class DecoderState:
    """What one decoding step needs: the encoder output and each decoder layer's cache.

    Every tensor has the batch (or batch x beam) on dim 0, so select() can reorder hypotheses
    (beam search) or drop finished sentences.
    """

    memory: torch.Tensor  # (B, S, d)
    src_mask: torch.Tensor  # (B, 1, 1, S) for the Transformer, (B, S) for the RNN
    caches: list[LayerCache] = field(default_factory=list)
    position: int = 0  # how many target positions were fed so far

    def select(self, index: torch.Tensor) -> DecoderState:
        """Keep (and reorder) the hypotheses at index."""
        return DecoderState(
            memory=self.memory.index_select(0, index),
            src_mask=self.src_mask.index_select(0, index),
            caches=[c.select(index) for c in self.caches],
            position=self.position,
        )

    def reorder_same_source(self, index: torch.Tensor) -> DecoderState:
        """select(index) where every hypothesis moves to a row with the same source sentence (beam
        search within a sentence): what depends on the source alone (memory, mask, the caches'
        `source` part) is already in place, so only the `past` part is reordered."""
        caches = [c.select(index, same_source=True) for c in self.caches]
        return DecoderState(self.memory, self.src_mask, caches, self.position)
