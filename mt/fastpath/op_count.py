"""Counting the aten ops a piece of code dispatches, views left out: on a GPU each is a kernel launch (or a
node of a captured graph), and an eager step pays host time for every one. It lets a CPU check what a GPU
step would launch: the tests hold op counts flat across batch sizes and depths, and
`scripts/count_ops.py` prints them."""

from __future__ import annotations

from collections import Counter

from torch.utils._python_dispatch import TorchDispatchMode

VIEWS = {
    "aten.view",
    "aten.t",
    "aten.detach",
    "aten.transpose",
    "aten._unsafe_view",
    "aten.slice",
    "aten.unsqueeze",
    "aten.squeeze",
    "aten.expand",
    "aten.permute",
    "aten.select",
    "aten.as_strided",
    "aten.split",
    "aten.unbind",
    "aten.alias",
    "aten.split_with_sizes",
    "aten.reshape",
    "aten._reshape_alias",
    "aten.lift_fresh",
}  # ops that make a view of a tensor's storage (or hand it back): no kernel


class OpCounter(TorchDispatchMode):
    """Within `with OpCounter() as counter:`, counter.ops counts the ops that reach a kernel, by name."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name not in VIEWS:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))
