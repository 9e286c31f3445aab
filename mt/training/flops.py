"""Training FLOPs of the Transformer and model FLOPs utilisation (MFU), as nanoGPT and PaLM count them.

Forward + backward costs about 6 FLOPs per parameter per token it touches (2 forward, 4 backward);
encoder weights touch source tokens, decoder weights and the output projection target tokens.
Attention's own matmuls add 12 * layers * d * length per token (Kaplan et al. 2020).
"""

from __future__ import annotations

import torch

# Dense bf16/fp16 tensor-core peaks in FLOP/s, used when train.peak_tflops is not set.
KNOWN_PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12, "A10": 125e12, "V100": 125e12}


def parameter_counts(model) -> dict | None:
    """What training_flops needs to know of a Transformer, counted once (None for other models)."""
    if not hasattr(model, "encoder_layers"):
        return None
    params = dict(model.named_parameters())
    return {
        "encoder": sum(p.numel() for n, p in params.items() if n.startswith("encoder")),
        "decoder": sum(p.numel() for n, p in params.items() if n.startswith("decoder")),
        "output": model.tgt_embed.weight.numel(),
        "d_model": model.d_model,
        "encoder_layers": len(model.encoder_layers),
        "decoder_layers": len(model.decoder_layers),
    }


def training_flops(counts: dict | None, src_shape, tgt_shape) -> float:
    """Approximate FLOPs of one forward+backward pass over a padded (B, S) source and (B, T) target batch."""
    if counts is None:
        return 0.0
    (batch, src_len), (_, tgt_len) = src_shape, tgt_shape
    src_tokens, tgt_tokens = batch * src_len, batch * tgt_len
    dense = 6 * (counts["encoder"] * src_tokens + (counts["decoder"] + counts["output"]) * tgt_tokens)
    attention = (
        12
        * counts["d_model"]
        * (
            counts["encoder_layers"] * src_len * src_tokens
            + counts["decoder_layers"] * (tgt_len + src_len) * tgt_tokens
        )
    )
    return float(dense + attention)


def peak_flops(device: torch.device, configured_tflops: float) -> float | None:
    """The device's peak FLOP/s: configured, or looked up for known GPUs; None if unknown."""
    if configured_tflops:
        return configured_tflops * 1e12
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, value in KNOWN_PEAKS.items():
            if key in name:
                return value
    return None
