"""Model code: imports only torch and mt.fastpath (the device-specific form of a few ops). No configs, no I/O,
no training."""

from mt.model.attention import MultiHeadAttention, attention, causal_mask, padding_mask
from mt.model.ensemble import Ensemble
from mt.model.rnn import RNNAttention
from mt.model.state import DecoderState, LayerCache
from mt.model.transformer import Transformer

__all__ = [
    "DecoderState",
    "Ensemble",
    "LayerCache",
    "MultiHeadAttention",
    "RNNAttention",
    "Transformer",
    "attention",
    "causal_mask",
    "padding_mask",
]
