"""Decoding across requests: requests wait in one queue and a decoding thread takes every request that
is waiting (up to a token budget, after a few milliseconds for more to arrive), decodes their lines in
one call to the translator, and hands each request its own lines back. Under load a batch holds many
requests' lines, as `translate` batches a file's; alone, a request waits only those few milliseconds.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, replace

from mt.decoding.settings import DecodeSettings, LineTranslator

log = logging.getLogger(__name__)


@dataclass
class Job:
    """One request's lines, how to decode them, and where the answer goes."""

    lines: list[str]
    settings: DecodeSettings
    prefixes: list[str] | None
    seeds: list[int] | None  # sampling: each line's seed
    pieces: int  # source pieces, against the batch budget
    future: Future

    @property
    def group(self) -> DecodeSettings:
        """Jobs with equal settings decode in one call (each line's seed travels with it)."""
        return replace(self.settings, seed=0)


class Batcher:
    def __init__(self, translator: LineTranslator, max_wait: float = 0.005, budget_pieces: int = 16000):
        """max_wait: seconds the first waiting request waits for others; budget_pieces: source pieces a
        batch takes at most (a request bigger than that is decoded alone)."""
        self.translator = translator
        self.max_wait, self.budget = max_wait, budget_pieces
        self.waiting: queue.Queue[Job | None] = queue.Queue()
        self.held: Job | None = None  # taken from the queue, over the last batch's budget: first in the next
        self.batches = self.lines_decoded = 0
        self.thread = threading.Thread(target=self._run, name="mt-decoder", daemon=True)
        self.thread.start()

    def submit(self, lines, settings, prefixes=None, seeds=None, pieces: int = 0) -> Future:
        future: Future = Future()
        self.waiting.put(Job(lines, settings, prefixes, seeds, pieces, future))
        return future

    def close(self) -> None:
        self.waiting.put(None)
        self.thread.join(timeout=60)

    def _run(self) -> None:
        while True:
            jobs = self._next_batch()
            if jobs is None:
                return
            groups: dict[DecodeSettings, list[Job]] = {}
            for job in jobs:
                groups.setdefault(job.group, []).append(job)
            for settings, group in groups.items():
                self._decode(settings, group)

    def _next_batch(self) -> list[Job] | None:
        """The jobs of the next batch (None: closed): the first to arrive, then every one arriving
        within max_wait of it, up to the budget. Jobs whose client has gone are dropped unseen."""
        first = self.held or self.waiting.get()
        self.held = None
        if first is None:
            return None
        jobs, pieces = [], 0
        deadline = time.monotonic() + self.max_wait
        job = first
        while True:
            if job is None:  # closing: decode what was taken, then stop
                self.waiting.put(None)
                break
            if jobs and pieces + job.pieces > self.budget:
                self.held = job
                break
            if job.future.set_running_or_notify_cancel():  # False: its request was cancelled
                jobs.append(job)
                pieces += job.pieces
            try:
                job = self.waiting.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
        return jobs

    def _decode(self, settings: DecodeSettings, jobs: list[Job]) -> None:
        lines = [line for job in jobs for line in job.lines]
        prefixes = None
        if any(job.prefixes for job in jobs):
            prefixes = [p for job in jobs for p in (job.prefixes or [""] * len(job.lines))]
        seeds = [s for job in jobs for s in job.seeds] if settings.sampling else None
        try:
            results = self.translator.with_settings(settings).translate_nbest(lines, prefixes=prefixes, seeds=seeds)
        except Exception as err:  # noqa: BLE001 - every waiting request learns of it; the server goes on
            log.exception("decoding a batch of %d lines failed", len(lines))
            for job in jobs:
                job.future.set_exception(err)
            return
        self.batches += 1
        self.lines_decoded += len(lines)
        start = 0
        for job in jobs:
            job.future.set_result(results[start : start + len(job.lines)])
            start += len(job.lines)
