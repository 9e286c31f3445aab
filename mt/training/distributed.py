"""Data-parallel training across processes (torchrun), in a few functions.

Every rank computes the same batch order; each update takes update_freq x world batches and rank r
trains on every world-th one. DistributedDataParallel averages gradients, so the loss is scaled
by world / (target tokens of the whole update): the result equals one process accumulating all of
those batches. Only rank 0 writes files.
"""

from __future__ import annotations

import atexit
import functools
import gc
import inspect
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1


def init_from_env(use_cuda: bool) -> Dist:
    """Join the process group torchrun describes in the environment (a no-op for one process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    return Dist(rank=dist.get_rank(), world=world, local_rank=local_rank)


def data_parallel(model: torch.nn.Module) -> DistributedDataParallel:
    """model in DistributedDataParallel, its buffers not synced before each forward: the only buffers are
    sinusoid tables each rank grows to its own batches' lengths. (torch 2.13 renamed the option.)"""
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return DistributedDataParallel(model, forward_sync_buffers=False)
    return DistributedDataParallel(model, broadcast_buffers=False)


def sum_across(values: list[float], d: Dist, device: torch.device) -> list[float]:
    """Element-wise sum of the values over all ranks (the values themselves for one process)."""
    if not d.enabled:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def barrier(d: Dist) -> None:
    if d.enabled:
        dist.barrier()


def broadcast_from_main(obj, d: Dist):
    """Rank 0's obj, on every rank."""
    if not d.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def shutdown(d: Dist, finished: bool = True, keep: bool = False) -> None:
    """Leave the process group. After a finished run every rank first waits for the others (rank 0
    scores the test set alone): a rank that tore its connections down while another was still in
    the group made that one abort now and then (gloo, "terminate called without an active exception").
    keep: a sweep's run, whose processes go on to its next run: they stay in the group (the group joined
    again in the same process, through torchrun's store, hung now and then) until leave_group() or exit.
    Its objects are freed here first, on every rank: the trainer sits in a reference cycle, so its model,
    optimizer and DistributedDataParallel otherwise lived on into the next run, until a collection at
    some moment of it, another on each rank."""
    if keep:
        gc.collect()
    if d.enabled and dist.is_initialized():
        if finished:
            dist.barrier()
        if keep:
            _leave_at_exit()
        else:
            dist.destroy_process_group()


def leave_group() -> None:
    """After a sweep's last run: every process leaves the group together (at exit, one left while another
    was still reporting)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


@functools.cache
def _leave_at_exit() -> None:
    """A sweep that stopped on an error never reaches leave_group()."""
    atexit.register(lambda: dist.is_initialized() and dist.destroy_process_group())
