"""Process settings that measured faster on a CPU: glibc's allocator thresholds, oneDNN's kernel cache,
MKL's kernels on non-Intel CPUs; and whether the CPU has native bf16, which decides whether bf16 pays at all.

Only `mt.fastpath` calls these, and only for a CPU run.

Large tensor buffers stay in the process heap instead of fresh mmap'd pages every step: glibc
serves allocations above M_MMAP_THRESHOLD with mmap and returns freed heap tops above
M_TRIM_THRESHOLD to the kernel, so each training step re-faults (and zeroes) hundreds of MB of
logits, gradients and activations. Raising both thresholds let a transformer_small bf16 step on
Multi30k batches go from 3,780 to 4,440 target tokens/s on a 2-core CPU, with the same peak RSS.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import mmap
import os
import platform
import sys
from pathlib import Path

import torch

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # from glibc's malloc.h


def keep_large_buffers(threshold: int = 1 << 30) -> bool:
    """Raise glibc's mmap and trim thresholds; a no-op (False) where libc is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = mallopt(M_MMAP_THRESHOLD, threshold) == 1 and mallopt(M_TRIM_THRESHOLD, threshold) == 1
    log.debug("allocator thresholds raised: %s", ok)
    return ok


ONEDNN_PRIMITIVE_CACHE = 64


def limit_onednn_primitive_cache(capacity: int = ONEDNN_PRIMITIVE_CACHE) -> None:
    """Keep fewer compiled matmul kernels (oneDNN primitives, one per shape) than oneDNN's 1,024.

    bf16 matmuls on CPU run through oneDNN; batch shapes change every update, so over an epoch
    the cache fills with kernels for shapes that will not come back, while within an update the
    layers repeat the same few shapes. A 64-entry cache trained as fast as the default (paired one-thread
    runs, 168 updates: 3,047 vs 3,006 tok/s) with 0.8 GB less resident memory (2.9 vs 3.7 GB).
    Must run before the first matmul; an ONEDNN_PRIMITIVE_CACHE_CAPACITY already set wins.
    """
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))


RETURN_1 = b"\xb8\x01\x00\x00\x00\xc3"  # x86-64: mov eax, 1; ret
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4


def mkl_fast_kernels_on_amd() -> bool:
    """Let MKL's fp32 matmuls take the kernels it picks for an Intel CPU on an AMD one, where it otherwise
    takes slower generic ones. True if done; False where it does not apply or cannot be done.

    torch's Linux wheels link MKL statically. MKL chooses its kernels once, at its first call, by CPU
    vendor as well as by instruction set, through `mkl_serv_intel_cpu_true`, which libtorch_cpu
    exports. Making that function return 1 hands an AMD CPU the kernels for the instructions it has
    (AVX2 on Zen 2/3). On a 2-core AMD EPYC (Zen 3, AVX2) the forward and backward fp32 matmuls of a
    d_model 192 update ran 1.15x faster (scripts/bench_mkl.py), products within fp32 rounding; training,
    1.26x the tokens per second (docs/benchmarks.md). Must run before the first matmul (MKL keeps its
    first choice). Writes 6 bytes of libtorch_cpu's code in memory; where the system refuses writable
    code (mprotect fails) it does nothing.
    """
    if not (sys.platform == "linux" and platform.machine().lower() in ("x86_64", "amd64")):
        return False
    if cpu_vendor() != "AuthenticAMD" or not torch.backends.mkl.is_available():
        return False
    vendor_check = mkl_vendor_check()
    if vendor_check is None:
        return False
    if vendor_check() == 1:
        return True
    mprotect = ctypes.CDLL(None, use_errno=True).mprotect  # libc's, in every Linux process
    mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    address = ctypes.cast(vendor_check, ctypes.c_void_p).value
    start = address & ~(mmap.PAGESIZE - 1)
    length = address + len(RETURN_1) - start
    if mprotect(start, length, PROT_READ | PROT_WRITE | PROT_EXEC) != 0:
        log.debug("MKL left as it is: code pages not writable (errno %d)", ctypes.get_errno())
        return False
    ctypes.memmove(address, RETURN_1, len(RETURN_1))
    mprotect(start, length, PROT_READ | PROT_EXEC)
    return vendor_check() == 1


def mkl_vendor_check():
    """MKL's `mkl_serv_intel_cpu_true` in torch's libtorch_cpu (callable, returns 1 on an Intel CPU), or None
    where torch does not carry it (no MKL, or MKL linked another way)."""
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        vendor_check = lib.mkl_serv_intel_cpu_true
    except (OSError, AttributeError):
        return None
    vendor_check.restype = ctypes.c_int
    return vendor_check


def cpu_vendor() -> str | None:
    """The CPU's vendor string (GenuineIntel, AuthenticAMD, ...) from /proc/cpuinfo, or None."""
    return _cpuinfo_field("vendor_id")


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware: AVX512-BF16 or AMX on x86, the BF16 extension on Arm.

    Without it oneDNN emulates bf16, and bf16 autocast turns from the fast choice into the slow one:
    a 1024 x 1024 matmul took 2.6 s in bf16 against 0.044 s in fp32 on an AVX2-only CPU (one thread,
    torch 2.13), where AVX512-BF16 makes bf16 the faster of the two. Where it cannot tell, True.
    """
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
        if all(checks):
            return any(check() for check in checks)
    flags = cpu_flags()
    if flags is None:
        return True
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def cpu_model() -> str | None:
    """The CPU's name as /proc/cpuinfo gives it (Linux), else as the platform does, None if neither can."""
    return _cpuinfo_field("model name") or platform.processor() or None


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (Linux), or None where there is no such file."""
    flags = _cpuinfo_field("flags", "Features")
    return None if flags is None else set(flags.split())


def _cpuinfo_field(*keys: str) -> str | None:
    """The first CPU's value for the first of keys found in /proc/cpuinfo; None without such a file or key."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in keys:
            return value.strip()
    return None
