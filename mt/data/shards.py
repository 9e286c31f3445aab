"""The training pairs encoded shard by shard: each shard of SHARD_LINES lines tokenized, filtered and
stored in the cache (memory-mapped by every run on the same text, tokenizer and filters), by a
background process that works ahead of training, so that the first update waits for one pool of
shards, not for the whole corpus."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from mt.data.batching import EncodedCorpus, FilterReport, Ragged, filter_pairs
from mt.data.duplicates import lines_of, without
from mt.data.overlap import held_out_mask, pairs_digest
from mt.errors import MTError
from mt.host import start_background_worker

log = logging.getLogger(__name__)

FORMAT = 2  # of the cached shards: part of their key
POLL_SECONDS = 0.02


def encode_shard(
    tokenizer,
    corpus,
    index: int,
    max_len: int,
    max_ratio: float,
    held_out: frozenset | None = None,
    verdicts: np.ndarray | None = None,
) -> tuple[EncodedCorpus, FilterReport]:
    """One shard's pairs tokenized and filtered (held_out: pairs to leave out, data.drop_held_out; verdicts:
    one a corpus line, data.drop_duplicates and data.drop_copies); line numbers count from the corpus's
    first line."""
    src_lines, tgt_lines = corpus.shard(index)
    src = Ragged.from_lists(tokenizer.encode_src(src_lines))
    tgt = Ragged.from_lists(tokenizer.encode_tgt(tgt_lines))
    held = held_out_mask(src_lines, tgt_lines, held_out)
    verdicts = lines_of(verdicts, index * corpus.shard_lines, len(src_lines))
    encoded, report = filter_pairs(src, tgt, max_len, max_ratio, held, verdicts)
    encoded.line_numbers += index * corpus.shard_lines
    return encoded, report


class EncodedShards:
    """A corpus's shards, encoded: read from the cache (cache_dir/KEY/shardNNNNN/), encoded there by a
    background process (start), or, without a cache, encoded in this process and held in memory."""

    def __init__(
        self,
        tokenizer,
        corpus,
        max_len: int,
        max_ratio: float,
        cache_dir: str | None,
        held_out: frozenset | None = None,
        verdicts: np.ndarray | None = None,
    ):
        self.tokenizer, self.corpus, self.max_len, self.max_ratio = tokenizer, corpus, max_len, max_ratio
        self.held_out, self.verdicts = held_out, verdicts
        self.count = corpus.shards
        key = repr((tokenizer.state_dict(), corpus.digest(), max_len, max_ratio, corpus.shard_lines, FORMAT))
        if held_out:
            key += pairs_digest(held_out)
        if verdicts is not None:
            key += without(verdicts)
        self.folder = Path(cache_dir) / hashlib.sha256(key.encode()).hexdigest()[:24] if cache_dir else None
        self._memory: dict[int, tuple[EncodedCorpus, FilterReport]] = {}
        self._encoder: multiprocessing.Process | None = None
        self._errors = None  # the encoder's end of a pipe: a one-line error, if it fails

    # ---- encoding ------------------------------------------------------------------------------

    def start(self, order: list[int]) -> None:
        """Encode the shards not in the cache yet, in this order, in a background process (forked: it
        only runs sentencepiece); without a cache, or off Linux, encode them here and now instead."""
        missing = [i for i in order if not self.ready(i)]
        if not missing:
            return
        if self.folder is None or sys.platform != "linux":
            self.encode_all(order)
            return
        ctx = multiprocessing.get_context("fork")
        self._errors, child_end = ctx.Pipe(duplex=False)
        self._encoder = ctx.Process(target=self._encode_in_child, args=(missing, child_end, os.getpid()), daemon=True)
        self._encoder.start()
        child_end.close()

    def encode_all(self, order: list[int] | None = None) -> None:
        """Every shard not cached yet, encoded in this process."""
        for index in order if order is not None else range(self.count):
            if not self.ready(index):
                self._encode(index)

    def _encode(self, index: int) -> None:
        encoded, report = encode_shard(
            self.tokenizer, self.corpus, index, self.max_len, self.max_ratio, self.held_out, self.verdicts
        )
        if self.folder is None:
            self._memory[index] = (encoded, report)
        else:
            _store(self._path(index), encoded, report)

    def _encode_in_child(self, order: list[int], errors, parent: int) -> None:
        start_background_worker(parent)
        start = time.perf_counter()
        try:
            for index in order:
                self._encode(index)
        except MTError as err:
            errors.send(str(err))
            os._exit(1)
        except BaseException as err:  # noqa: BLE001 - whatever it was, the trainer must hear of it in one line
            errors.send(f"{self.corpus.origin}: encoding failed ({type(err).__name__}: {err})")
            os._exit(1)
        log.info(
            "train: all %d shards encoded (%.0fs in the background); filter: %s",
            self.count,
            time.perf_counter() - start,
            self.report(),
        )
        os._exit(0)  # not the parent's exit handlers (logging, tensorboard, ...): they are not this process's

    def close(self) -> None:
        """Stop the background encoder (a shard it was writing is never half-stored; the next run goes on)."""
        if self._encoder is not None and self._encoder.is_alive():
            self._encoder.terminate()
            self._encoder.join()
        self._encoder = None

    # ---- reading -------------------------------------------------------------------------------

    def _path(self, index: int) -> Path:
        return self.folder / f"shard{index:05d}"

    def ready(self, index: int) -> bool:
        if self.folder is None:
            return index in self._memory
        return (self._path(index) / "report.json").exists()

    @property
    def encoded_in_background(self) -> bool:
        """Whether a background encoder was started (it logs the filter's report when it ends)."""
        return self._encoder is not None

    @property
    def complete(self) -> bool:
        return all(self.ready(i) for i in range(self.count))

    def get(self, index: int) -> tuple[EncodedCorpus, FilterReport]:
        """Shard index, encoded and filtered: waits for the background encoder to store it."""
        while not self.ready(index):
            self._check_encoder()
            time.sleep(POLL_SECONDS)
        if self.folder is None:
            return self._memory[index]
        return _load(self._path(index))

    def _check_encoder(self) -> None:
        if self._errors is not None and self._errors.poll():
            try:
                message = self._errors.recv()
            except EOFError:  # it died without a word: said below, with its exit code
                message = None
            if message is not None:
                self.close()
                raise MTError(message)
        if self._encoder is None or not self._encoder.is_alive():
            code = None if self._encoder is None else self._encoder.exitcode
            raise MTError(f"{self.corpus.origin}: the encoder of the training data stopped (exit code {code})")

    def report(self) -> FilterReport:
        """What the length filters kept and dropped, summed over the shards encoded so far."""
        total = FilterReport()
        for index in range(self.count):
            if self.ready(index):
                part = self._memory[index][1] if self.folder is None else _load_report(self._path(index))
                for name, value in asdict(part).items():
                    setattr(total, name, getattr(total, name) + value)
        return total


def _store(folder: Path, encoded: EncodedCorpus, report: FilterReport) -> None:
    """Into the cache atomically (written aside, then renamed): a half-written shard is never read."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    encoded.src.save(tmp / "src")
    encoded.tgt.save(tmp / "tgt")
    np.save(tmp / "lines.npy", encoded.line_numbers)
    (tmp / "report.json").write_text(json.dumps(asdict(report)))
    try:
        os.replace(tmp, folder)
    except OSError:  # another process stored it first
        shutil.rmtree(tmp, ignore_errors=True)


def _load_report(folder: Path) -> FilterReport:
    return FilterReport(**json.loads((folder / "report.json").read_text()))


def _load(folder: Path) -> tuple[EncodedCorpus, FilterReport]:
    report = _load_report(folder)
    encoded = EncodedCorpus(
        Ragged.load(folder / "src"), Ragged.load(folder / "tgt"), np.load(folder / "lines.npy", mmap_mode="r")
    )
    return encoded, report
