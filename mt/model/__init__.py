"""Model code: imports only torch and mt.fastpath (the device-specific form of a few ops). No configs, no I/O,
no training."""

import inspect

from mt.model.attention import MultiHeadAttention, attention, causal_mask, padding_mask
from mt.model.rnn import RNNAttention
from mt.model.transformer import DecoderState, Transformer

ARCHITECTURES = {"transformer": Transformer, "rnn_attention": RNNAttention}


def build_model(arch: str, src_vocab_size: int, tgt_vocab_size: int, **options):
    """Instantiate architecture `arch`; options it does not take (another architecture's) are ignored."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown model arch {arch!r}; known: {', '.join(ARCHITECTURES)}")
    cls = ARCHITECTURES[arch]
    accepted = inspect.signature(cls.__init__).parameters
    return cls(src_vocab_size, tgt_vocab_size, **{k: v for k, v in options.items() if k in accepted})


__all__ = [
    "ARCHITECTURES",
    "DecoderState",
    "MultiHeadAttention",
    "RNNAttention",
    "Transformer",
    "attention",
    "build_model",
    "causal_mask",
    "padding_mask",
]
