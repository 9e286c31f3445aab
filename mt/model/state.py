"""The incremental-decoding state every model hands to search (mt/decoding/search.py):

    state = model.start_state(src, copies)     # encode once; `copies` hypotheses (rows) per sentence
    logits, state = model.step(tokens, state)  # one token per hypothesis
    state = state.select(index)                # reorder / drop hypotheses (batch dim 0)

Its caches are kept apart by what they depend on, so beam search moves only what must move.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mt import fastpath
from mt.model.attention import SharedMask


@dataclass
class LayerCache:
    """One decoder layer's cached tensors, kept apart by what they depend on."""

    past: dict[str, torch.Tensor] = field(default_factory=dict)  # the hypothesis so far (self-attention keys
    # and values side by side, "kv": (2, rows, heads, T, d_k); an RNN's hidden state): follows its hypothesis
    # when beams reorder. Rows are on dim 0, except for "kv" (dim 1).
    source: dict[str, torch.Tensor] = field(default_factory=dict)  # the source sentence alone (cross-attention
    # keys and values): the same for every hypothesis of a sentence

    # Where decoding keeps to bounded shapes (a CPU: mt.fastpath.bounded_shapes), past["kv"] is a room of
    # key slots grown a few at a time (cpu_ops.keys_room), the unwritten ones zero and masked; start_step
    # sets these two before each step:
    written: int = 0  # the position this step writes
    visible: SharedMask | None = None  # (1, 1, 1, room): the slots this step's query sees (None: exact keys)

    def extend_past(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, SharedMask | None]:
        """Self-attention keys and values of every position so far, the newest (kv: (2, B, h, 1, d_k), keys
        and values side by side) appended, and which of them a query may see (None: all)."""
        if self.visible is None:
            if "kv" in self.past:
                kv = torch.cat([self.past["kv"], kv], dim=3)
            self.past["kv"] = kv
            return kv[0], kv[1], None
        room, past = self.visible.allowed.size(-1), self.past.get("kv")
        if past is None or past.size(3) < room:  # zeros, not garbage: a masked slot's weight 0 times NaN is NaN
            grown = kv.new_zeros(*kv.shape[:3], room, kv.size(4))
            if past is not None:
                grown[:, :, :, : past.size(3)] = past
            past = self.past["kv"] = grown
        past[:, :, :, self.written : self.written + 1] = kv
        return past[0], past[1], self.visible

    def select(self, index: torch.Tensor, sources: torch.Tensor | None = None) -> LayerCache:
        """The past of the rows at index; the source part of the rows at sources (None: as it is)."""
        past = {name: fastpath.index_select(t, 1 if name == "kv" else 0, index) for name, t in self.past.items()}
        source = self.source if sources is None else {k: v.index_select(0, sources) for k, v in self.source.items()}
        return LayerCache(past, source)


@dataclass
class StaticLayerCache(LayerCache):
    """A LayerCache of fixed shape: the past is allocated for `length` positions up front (a view of the
    state's store, StaticDecoderState.past), each step writes its keys and values at `position` (a device
    tensor shared by the layers) and attends over every slot, the ones not yet written masked. No shape
    changes from step to step, no host reads: a step can be captured as a CUDA graph and replayed
    (mt/decoding/fixed_slots.py)."""

    position: torch.Tensor | None = None  # () long: the position this step writes
    slots: torch.Tensor | None = None  # (1, 1, 1, length): 0 .. length - 1, against the keys' dim
    # The first `window` slots alone are attended over and reordered (None: all): set on the host before
    # each step, at least the position + 1, as the slots past the position are not written yet. A search
    # captures one step per window, so that early steps do not attend over the whole length.
    window: int | None = None
    visible: SharedMask | None = None  # (1, 1, 1, window): the slots this step's query sees, made by the state

    def extend_past(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, SharedMask | None]:
        self.past["kv"].index_copy_(3, self.position.view(1), kv)
        written = self.past["kv"][:, :, :, : self.window or self.slots.size(-1)]
        return written[0], written[1], self.visible


@dataclass
class DecoderState:
    """What one decoding step needs: the encoder output and each decoder layer's cache.

    The hypotheses' tensors have one row per hypothesis on dim 0, so select() can reorder hypotheses
    (beam search) or drop finished sentences. With copies > 1 (beam search over a Transformer), each
    sentence's `copies` hypotheses are consecutive rows that share one row of the memory, its mask and
    the caches' `source` part: they attend to the same source, which is neither copied nor moved.
    """

    memory: torch.Tensor  # (B, S, d)
    src_mask: torch.Tensor  # (B, 1, 1, S) for the Transformer, (B, S) for the RNN
    caches: list[LayerCache] = field(default_factory=list)
    position: int = 0  # how many target positions were fed so far
    copies: int = 1  # hypotheses per memory row, in consecutive rows

    def select(self, index: torch.Tensor) -> DecoderState:
        """Keep (and reorder) the hypotheses at index; with copies > 1, index holds groups of `copies`
        rows, each group within one sentence (as beam search keeps them)."""
        sources = index if self.copies == 1 else index[:: self.copies] // self.copies
        return DecoderState(
            memory=self.memory.index_select(0, sources),
            src_mask=self.src_mask.index_select(0, sources),
            caches=[c.select(index, sources) for c in self.caches],
            position=self.position,
            copies=self.copies,
        )

    def repeat_rows(self, copies: int) -> DecoderState:
        """A state of one row per sentence (copies = 1) with each row `copies` times over, the memory
        too: for a model whose step reads the memory row by row (the RNN)."""
        if copies == 1:
            return self
        return self.select(torch.arange(self.memory.size(0), device=self.memory.device).repeat_interleave(copies))

    def start_step(self) -> None:
        """What the layers of a step share, made once before them: where shapes are bounded, the room of key
        slots this step's self-attention attends over and which of them its query sees."""
        room = fastpath.self_attention_room(self.position, self.memory.device)
        if room is None:
            return
        visible = SharedMask(torch.arange(room, device=self.memory.device).view(1, 1, 1, room) <= self.position)
        for cache in self.caches:
            cache.written, cache.visible = self.position, visible

    def reorder_same_source(self, index: torch.Tensor) -> DecoderState:
        """select(index) where every hypothesis moves to a row with the same source sentence (beam
        search within a sentence): what depends on the source alone (memory, mask, the caches'
        `source` part) is already in place, so only the `past` part is reordered."""
        caches = [c.select(index) for c in self.caches]
        return DecoderState(self.memory, self.src_mask, caches, self.position, self.copies)


@dataclass
class StaticDecoderState(DecoderState):
    """A DecoderState whose tensors keep their storage for a whole search (StaticLayerCache caches,
    position a () device tensor advanced in place): hypotheses move within their rows, none leave.
    The model's restart_static_state() loads another batch of the same shape into the same storage.

    Every layer's self-attention keys and values are views of one store, `past` (2 * layers, rows, heads,
    length, d_k), layer i's keys at 2i and values at 2i + 1: a beam step reorders them all in one gather,
    not one per layer. With a `spare` store of the same shape (keep_spare, for beam search), the gather
    writes the reordered rows there and the two swap roles (swap_stores): the rows are read once and
    written once, where reordering in place reads and writes them twice (gather, then copy back)."""

    past: torch.Tensor | None = None
    window: int | None = None
    spare: torch.Tensor | None = None
    parity: int = 0  # how many times the stores swapped, mod 2: which of the two `past` is now

    def start_step(self) -> None:
        """Which slots this step's query sees, the written ones (up to the position), made once for every layer."""
        slots = self.caches[0].slots
        visible = SharedMask(slots[..., : self.window or slots.size(-1)] <= self.position)
        for cache in self.caches:
            cache.visible = visible

    def reorder_same_source(self, index: torch.Tensor) -> StaticDecoderState:
        """In place: row i of every layer's past (its first `window` slots) becomes row index[i]."""
        if self.spare is None:
            written = self._written(self.past)
            written.copy_(written.index_select(1, index))
        else:
            self.reorder_into_spare(index)
            self.swap_stores()
        return self

    def keep_spare(self) -> None:
        """Allocate the spare store: reorders then gather into it (reorder_into_spare, swap_stores)."""
        if self.spare is None:
            self.spare = torch.zeros_like(self.past)

    def reorder_into_spare(self, index: torch.Tensor) -> None:
        """Row i of the spare store's first `window` slots becomes row index[i] of the past's: the reorder's
        kernels alone, which a CUDA graph can capture. swap_stores, outside the capture, completes it."""
        torch.index_select(self._written(self.past), 1, index, out=self._written(self.spare))

    def swap_stores(self) -> None:
        """The spare store becomes the past the layers read and write, and the past the spare: host work
        alone (no kernel), so a step captured as a CUDA graph is captured once for each `parity`."""
        self.past, self.spare, self.parity = self.spare, self.past, self.parity ^ 1
        for i, cache in enumerate(self.caches):
            cache.past["kv"] = self.past[2 * i : 2 * i + 2]

    def clear_past(self) -> None:
        """Zero every slot of the store (and the spare), for a new batch: no value of the last one reaches it."""
        self.past.zero_()
        if self.spare is not None:
            self.spare.zero_()

    def _written(self, store: torch.Tensor) -> torch.Tensor:
        return store[:, :, :, : self.window or store.size(3)]

    def select(self, index: torch.Tensor) -> DecoderState:
        raise NotImplementedError("a static decoder state keeps its rows: mask finished ones instead")

    def set_window(self, window: int | None) -> None:
        """Attend over and reorder the first `window` target slots only (StaticLayerCache.window)."""
        self.window = window
        for cache in self.caches:
            cache.window = window
