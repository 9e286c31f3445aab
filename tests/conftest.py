"""Tiny data made by the tests themselves: a word-for-word "translation" task a small model learns fast."""

import functools
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from mt.config.model import build_model
from mt.config.schema import CONFIG_DIR, register_configs
from mt.data.batching import encode_corpus
from mt.data.sources import load_split
from mt.data.tokenizer import BOS, EOS, PAD, build_tokenizer
from mt.decoding.search import length_penalty
from mt.fastpath.op_count import OpCounter  # noqa: F401 (the tests import it from here)
from mt.training.loss import label_smoothed_loss
from mt.training.trainer import Trainer


def pytest_configure(config):
    """Under pytest-xdist (`-n N`), each worker and the commands it starts get their own share of the
    cores: two workers each running torch on every core would slow each other down more than they gain."""
    worker, workers = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if worker and workers and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        share = cores[int(worker.removeprefix("gw")) % len(cores) :: int(workers)] or cores
        os.sched_setaffinity(0, share)
        torch.set_num_threads(len(share))


LEXICON = {
    "ein": "a",
    "mann": "man",
    "frau": "woman",
    "hund": "dog",
    "katze": "cat",
    "kind": "child",
    "läuft": "runs",
    "springt": "jumps",
    "sitzt": "sits",
    "schläft": "sleeps",
    "isst": "eats",
    "rot": "red",
    "blau": "blue",
    "groß": "big",
    "klein": "small",
    "hier": "here",
    "dort": "there",
    "heute": "today",
    "schnell": "quickly",
    "langsam": "slowly",
}
REPO = Path(__file__).resolve().parent.parent


def make_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    words = sorted(LEXICON)
    pairs = []
    for _ in range(n):
        src = rng.sample(words, rng.randint(2, 7))  # no repeated word: easy to learn quickly
        pairs.append((" ".join(src), " ".join(LEXICON[w] for w in src)))
    return pairs


def write_corpus(folder: Path, sizes=None) -> Path:
    """{split}.de / {split}.en files in folder."""
    sizes = sizes or {"train": 600, "valid": 30, "test": 30}
    folder.mkdir(parents=True, exist_ok=True)
    for seed, (split, n) in enumerate(sizes.items()):
        pairs = make_pairs(n, seed)
        (folder / f"{split}.de").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        (folder / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


# A tiny model and schedule: trains in seconds on CPU and learns the lexicon.
TINY_TRAIN = [
    "~experiment",
    "model=transformer_small",
    "model.d_model=64",
    "model.heads=4",
    "model.ffn_dim=128",
    "model.encoder_layers=2",
    "model.decoder_layers=2",
    "model.dropout=0.1",
    "tokenizer.vocab_size=100",
    "tokenizer.byte_fallback=false",
    "train.max_tokens=600",
    "train.lr=3e-3",
    "train.warmup=40",
    "train.precision=fp32",
    "train.log_every=10",
    "train.valid_every=100",
    "train.save_every=50",
    "decode=greedy",
    "train.threads=1",
    "data.cache_dir=null",
]


def cli_path(name: str) -> str:
    """One of our console scripts, beside the interpreter running the tests (.venv/bin); from a checkout that
    is not installed (PYTHONPATH at it), a stand-in that calls the same function of mt.cli.commands."""
    installed = Path(sys.executable).parent / name
    return str(installed if installed.exists() else console_stand_in(name))


@functools.cache
def console_stand_in(name: str) -> Path:
    scripts = re.findall(r'^"?([\w-]+)"? = "mt\.cli\.commands:(\w+)"', (REPO / "pyproject.toml").read_text(), re.M)
    function = dict(scripts)[name]
    path = Path(tempfile.mkdtemp(prefix="mt-bin-")) / name
    path.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
        f"from mt.cli.commands import {function}\nsys.exit({function}())\n"
    )
    path.chmod(0o755)
    return path


def tiny_sweep(corpus, folder, *more) -> list[str]:
    """mt-train arguments: a sweep (-m) of tiny runs on corpus in folder; more: its own settings and values."""
    return ["-m", "data=files", f"data.dir={corpus}", f"hydra.sweep.dir={folder}", *TINY_TRAIN, *more]


def run_cli(*args, check=True, input_text=None, timeout=600):
    """Run one of our console scripts and capture its output."""
    result = subprocess.run(
        [cli_path(args[0]), *args[1:]], capture_output=True, text=True, input=input_text, timeout=timeout, cwd=REPO
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{args[0]} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def sigterm_after(command: list[str], log: Path, lines: int = 15) -> str:
    """Start command, send SIGTERM once its log has `lines` lines, and return its output (exit status 130)."""
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < lines):
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    return output


def train_tiny(corpus: Path, run_dir: Path, *overrides, check=True):
    return run_cli(
        "mt-train", "data=files", f"data.dir={corpus}", f"hydra.run.dir={run_dir}", *TINY_TRAIN, *overrides, check=check
    )


def training_lines(folder: Path, run_dir: Path, *overrides) -> tuple[set[int], list, int]:
    """What a run on folder trains on in epoch 0, prepared and encoded in this process as mt-train would
    (no background encoder): the line numbers kept, the filter's reports where the data gives them per
    pool or epoch (subword sampling), and the pools."""
    from hydra import compose, initialize_config_dir

    from mt.config.schema import CONFIG_DIR, register_configs
    from mt.data.prepare import encode_splits, prepare

    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["data=files", f"data.dir={folder}", *TINY_TRAIN, *overrides])
    train, _ = encode_splits(cfg, prepare(cfg, run_dir, write_config=False), background=False)
    try:
        if not hasattr(train, "pool_count"):  # one pool, sampled anew each epoch
            taken = [train.with_report(0)]
        elif hasattr(train, "with_report"):  # pools, sampled as they come
            taken = [train.with_report(0, i) for i in range(train.pool_count)]
        else:  # encoded shards
            taken = [(train.pool(0, i), None) for i in range(train.pool_count)]
        kept = {int(n) for pool, _ in taken for n in pool.line_numbers}
        return kept, [report for _, report in taken if report is not None], getattr(train, "pool_count", 1)
    finally:
        getattr(train, "close", lambda: None)()


@pytest.fixture(scope="session")
def trained_run(tiny_corpus, tmp_path_factory) -> Path:
    """A run directory with a tiny model trained through the real `mt-train` entry point."""
    run_dir = tmp_path_factory.mktemp("run")
    train_tiny(tiny_corpus, run_dir, "train.max_steps=300")
    return run_dir


@pytest.fixture(scope="session")
def reverse_run(tiny_corpus, tmp_path_factory) -> Path:
    """A tiny model trained the other way, English into German: trained_run's reverse model for reranking."""
    run_dir = tmp_path_factory.mktemp("reverse")
    train_tiny(tiny_corpus, run_dir, "data.src_lang=en", "data.tgt_lang=de", "train.max_steps=300")
    return run_dir


def reversal_task(n: int, vocab: int, seed: int = 0, max_len: int = 8) -> list[tuple[list[int], list[int]]]:
    """(source, reversed source) pairs of 2..max_len token ids from 4..vocab-1: a task models overfit fast."""
    g = torch.Generator().manual_seed(seed)
    sources = [
        torch.randint(4, vocab, (int(torch.randint(2, max_len + 1, (1,), generator=g)),), generator=g) for _ in range(n)
    ]
    return [(s.tolist(), s.flip(0).tolist()) for s in sources]


def pad_ids(seqs, prefix=(), suffix=()) -> torch.Tensor:
    """Right-padded (B, T) tensor of prefix + seq + suffix."""
    length = max(len(s) for s in seqs) + len(prefix) + len(suffix)
    rows = [[*prefix, *s, *suffix] for s in seqs]
    return torch.tensor([row + [PAD] * (length - len(row)) for row in rows])


def overfit(model, pairs, steps: int, lr: float = 3e-3):
    """Train model on pairs, full batch, no smoothing; returns it in eval mode."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    src = pad_ids([s for s, _ in pairs], suffix=[EOS])
    tgt_in, tgt_out = pad_ids([t for _, t in pairs], prefix=[BOS]), pad_ids([t for _, t in pairs], suffix=[EOS])
    real = tgt_out != PAD
    for _ in range(steps):
        loss, _ = label_smoothed_loss(model(src, tgt_in, keep=real), tgt_out[real], 0.0)
        opt.zero_grad()
        (loss / real.sum()).backward()
        opt.step()
    return model.eval()


def tiny_trainer(corpus, run_dir, *overrides) -> Trainer:
    """A Trainer on the tiny corpus, built in this process (for tests that reach into it)."""
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["data=files", f"data.dir={corpus}", *TINY_TRAIN, *overrides])
    train, valid = load_split(cfg.data, "train"), load_split(cfg.data, "valid")
    tok = build_tokenizer(cfg.tokenizer, train, run_dir / "tokenizer")
    torch.manual_seed(0)
    return Trainer(
        cfg,
        build_model(cfg.model, tok),
        tok,
        encode_corpus(tok, train)[0],
        encode_corpus(tok, valid)[0],
        valid,
        run_dir,
        torch.device("cpu"),
    )


def ruled_out(tokens: list[int], min_len: int = 0, no_repeat_ngram: int = 0) -> set[int]:
    """The tokens mt/decoding/constraints.py forbids after `tokens`, found the slow, obvious way."""
    banned = {EOS} if len(tokens) < min_len else set()
    n = no_repeat_ngram
    if n and len(tokens) >= n:
        last = tokens[len(tokens) - (n - 1) :] if n > 1 else []
        banned |= {tokens[i + n - 1] for i in range(len(tokens) - n + 1) if tokens[i : i + n - 1] == last}
    return banned


@torch.no_grad()
def textbook_beam(
    model,
    src_ids,
    beam,
    alpha,
    max_len_a=1.2,
    max_len_b=10,
    prefix=(),
    min_len=0,
    no_repeat_ngram=0,
    nbest=1,
    stats=None,
):
    """Textbook beam search: one sentence, no cache (the whole output re-run each step), plain lists; with a
    prefix, it starts from the prefix, scored as the model scores it. min_len, no_repeat_ngram: the tokens
    `ruled_out` get -inf before the log-softmax (not inside the prefix). It stops once `nbest` hypotheses
    have finished and the best live one cannot beat the nbest-th of them; a dict `stats` gets the steps run."""
    memory, mask = model.encode(torch.tensor([src_ids + [EOS]]))

    def next_log_probs(tokens):
        logits = model.logits(model.decode(torch.tensor([[BOS] + tokens]), memory, mask))[0, -1]
        if len(tokens) >= len(prefix):
            for token in ruled_out(tokens, min_len, no_repeat_ngram):
                logits[token] = float("-inf")
        return logits.log_softmax(-1)

    prefix_lp = sum(float(next_log_probs(prefix[:i])[tok]) for i, tok in enumerate(prefix))
    limit = max(int((len(src_ids) + 1) * max_len_a) + max_len_b, len(prefix) + max_len_b)
    beams, finished = [(list(prefix), prefix_lp)], []
    for t in range(len(prefix), limit):
        candidates = []
        for tokens, lp in beams:
            top = next_log_probs(tokens).topk(2 * beam)
            candidates += [(tokens, tok, lp + v) for v, tok in zip(top.values.tolist(), top.indices.tolist())]
        candidates.sort(key=lambda c: -c[2])
        beams = []
        for rank, (tokens, tok, lp) in enumerate(candidates[: 2 * beam]):
            if tok == EOS or t + 1 >= limit:
                if rank < beam:
                    done = tokens + ([] if tok == EOS else [tok])
                    finished.append((done, lp / float(length_penalty(torch.tensor(t + 1), alpha))))
            elif len(beams) < beam:
                beams.append((tokens + [tok], lp))
        if not beams:
            break
        kept = sorted((f[1] for f in finished), reverse=True)
        to_beat = kept[nbest - 1] if len(kept) >= nbest else float("-inf")
        if beams[0][1] / float(length_penalty(torch.tensor(limit), alpha)) <= to_beat:
            break
    if stats is not None:
        stats["steps"] = t + 1 - len(prefix)
    return max(finished, key=lambda f: f[1])
