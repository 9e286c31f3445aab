"""What the machine gives this process: the cores it may use, its container's CPU quota included, read from
the control-group files as Linux writes them (here written out by the tests, for cgroup v2 and v1)."""

import math
from pathlib import Path

import pytest
import torch

from mt import fastpath, host
from mt.host import cpu_quota


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def quota_of(tmp_path: Path, membership: str, files: dict[str, str]) -> float | None:
    write(tmp_path / "fs", files)
    write(tmp_path, {"cgroup": membership})
    return cpu_quota(tmp_path / "fs", tmp_path / "cgroup")


@pytest.mark.parametrize(
    "membership, files, quota",
    [
        ("0::/\n", {"cpu.max": "200000 100000\n"}, 2.0),  # a container (cgroup namespace) with --cpus=2
        ("0::/\n", {"cpu.max": "max 100000\n"}, None),  # no limit
        ("0::/\n", {}, None),  # the host's root group: no cpu.max at all
        ("0::/user.slice/job\n", {"user.slice/job/cpu.max": "150000 100000"}, 1.5),  # a group's own limit
        # a parent's limit binds its children: the smallest on the way up
        ("0::/a/b\n", {"a/cpu.max": "100000 100000", "a/b/cpu.max": "400000 100000"}, 1.0),
        # the path /proc/self/cgroup names is not under the container's mount: its root is the group
        ("0::/kubepods/pod1/c1\n", {"cpu.max": "50000 100000"}, 0.5),
        # cgroup v1: quota over period, -1 for none; the controller mounted as cpu,cpuacct
        (
            "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n",
            {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "300000", "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000"},
            3.0,
        ),
        ("3:cpu,cpuacct:/\n", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}, None),
        ("0::/\n", {"cpu.max": "garbled"}, None),
        ("0::/\n", {"cpu.max": "100000 0"}, None),
        ("no colons here\n", {"cpu.max": "100000 100000"}, None),
    ],
)
def test_the_cpu_quota_is_read_from_the_control_group_files(tmp_path, membership, files, quota):
    assert quota_of(tmp_path, membership, files) == quota


def test_no_control_group_file_means_no_quota(tmp_path):
    assert cpu_quota(tmp_path, tmp_path / "missing") is None


@pytest.mark.parametrize("quota", [None, 0.5, 1.0, 1.5, 1000.0])
def test_the_cores_a_process_may_use_are_its_affinity_capped_by_its_quota(monkeypatch, quota):
    monkeypatch.setattr(host, "usable_cores", lambda: list(range(4)))
    monkeypatch.setattr(host, "cpu_quota", lambda: quota)
    expected = 4 if quota is None else max(1, min(4, math.ceil(quota)))
    assert host.cpu_cores() == expected


def test_torch_uses_no_more_threads_than_the_process_may_use(monkeypatch):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        monkeypatch.setattr(fastpath, "cpu_cores", lambda: 1)  # a container with --cpus=1 on this machine
        fastpath.tune_process(torch.device("cpu"), training=False)
        assert torch.get_num_threads() == 1
        monkeypatch.setattr(fastpath, "cpu_cores", lambda: 8)  # more cores than threads: left as they are
        fastpath.tune_process(torch.device("meta"), training=False)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_tokenizer_uses_no_more_threads_than_the_process_may_use(monkeypatch):
    from omegaconf import OmegaConf

    from mt.config.schema import TokenizerConfig
    from mt.data import tokenizer

    from conftest import make_pairs

    settings = OmegaConf.structured(TokenizerConfig(vocab_size=60, byte_fallback=False))
    proto = tokenizer.train_sentencepiece([s for s, _ in make_pairs(100, seed=5)], settings)
    monkeypatch.setattr(tokenizer, "cpu_cores", lambda: 1)
    assert tokenizer.processor_from_proto(proto)._num_threads == 1  # what its calls on a list of lines use
    monkeypatch.setattr(tokenizer, "cpu_cores", lambda: 3)
    assert tokenizer.Tokenizer(proto).src._num_threads == 3
