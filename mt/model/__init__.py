"""Model code: imports only torch. No configs, no I/O, no training."""

from mt.model.attention import MultiHeadAttention, attention, causal_mask, padding_mask
from mt.model.transformer import DecoderState, Transformer

ARCHITECTURES = {"transformer": Transformer}


def build_model(arch: str, src_vocab_size: int, tgt_vocab_size: int, **options):
    """Instantiate architecture `arch` with plain keyword options."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown model arch {arch!r}; known: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[arch](src_vocab_size, tgt_vocab_size, **options)


__all__ = [
    "ARCHITECTURES",
    "DecoderState",
    "MultiHeadAttention",
    "Transformer",
    "attention",
    "build_model",
    "causal_mask",
    "padding_mask",
]
