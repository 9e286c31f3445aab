"""Mixed precision: the dtypes by name, autocast for training and decoding, low-precision copies of a
model for decoding, and a bf16 working copy for training on fp32 master weights."""

from __future__ import annotations

import contextlib
import copy

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str):
    """Mixed precision context for fp32/bf16/fp16 (fp32 = no autocast)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])


def low_precision_copy(model: torch.nn.Module, precision: str) -> torch.nn.Module:
    """For bf16/fp16 decoding, a copy of the model with its weights in that dtype.

    Autocast would cast every weight again at every decoding step (it caches casts only while
    recording gradients): 3,400 casts per 300 sentences of beam search. The copy leaves the
    caller's fp32 model (the one being trained, at validation) untouched.
    """
    if precision == "fp32":
        return model
    return copy.deepcopy(model).to(DTYPES[precision])


class WorkingCopy:
    """A bf16 copy of a model that training's forward and backward run, without autocast, while the
    optimizer steps the fp32 model (fp32 master weights, as fairseq's --bf16 and NVIDIA's MLPerf
    transformer train): no per-op casts of weights and activations, a bf16 residual stream.

    After backward, `widen_gradients` gives the fp32 model the copy's gradients as fp32 (for clipping
    and the optimizer); after the update, `refresh` rounds the updated weights into the copy. The fp32
    model stays what checkpoints, validation and resume see, so a resumed run makes its copy afresh
    from the weights it loaded and goes on exactly. (The CUDA-graph path keeps its own, in
    mt/fastpath/cuda_graphs.py: its gradient buffers must outlive every replay.)"""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype = torch.bfloat16):
        self.module = copy.deepcopy(model).to(dtype)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.working = [p for p in self.module.parameters() if p.requires_grad]

    def widen_gradients(self) -> None:
        """The copy's gradients, as fp32, become the model's (None where a parameter got none)."""
        for param, work in zip(self.params, self.working):
            param.grad = None if work.grad is None else work.grad.to(param.dtype)
            work.grad = None

    @torch.no_grad()
    def refresh(self) -> None:
        """The model's weights, rounded into the copy."""
        torch._foreach_copy_(self.working, self.params)
