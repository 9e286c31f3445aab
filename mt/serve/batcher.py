"""Decoding across requests: requests wait in one queue and decoding threads take what is waiting (a few
milliseconds after the first arrived, so that requests sent together are decoded together), decode
their lines in one call to the translator, and hand each request its own lines back. Under load a batch
holds many requests' lines, as `translate` batches a file's. Scoring requests (given translations)
queue alike, and those taken together are scored in one call.

With several decoding threads (fastpath.serving_layout), an idle thread takes its share of what waits,
the rest is left to the others, and their batches decode side by side.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from mt.decoding.glossary import Glossary
from mt.decoding.line_translator import LineTranslator
from mt.decoding.settings import DecodeSettings

log = logging.getLogger(__name__)


SCORING = "score"  # the group of scoring jobs, beside the decode settings that group decoding jobs


@dataclass
class Job:
    """One request's lines, how to decode them, and where the answer goes."""

    lines: list[str]
    settings: DecodeSettings
    prefixes: list[str] | None = None
    seeds: list[int] | None = None  # sampling: each line's seed
    pieces: int = 0  # source pieces (and target pieces, to score), against the budget and for sharing work out
    targets: list[str] | None = None  # a scoring job: the translations to score, one per line
    terms: list[list[str]] | None = None  # the phrases each line's translation must hold
    glossary: Glossary | None = None  # whose entries' targets the lines (or sentences) holding them must hold
    reverse_weight: float | None = None  # reranking with the translator's reverse model: its weight (None: its own)
    attention_layer: int | None = None  # a document's lines whose inline codes need the model's alignment
    future: Future = field(default_factory=Future)
    arrived: float = field(default_factory=time.monotonic)

    @property
    def group(self) -> tuple:
        """Jobs with equal settings, one glossary (the server's, as it stood) and one reverse weight decode in
        one call (each line's seed travels with it; a request's own glossary decodes apart), and so do a
        document's lines that need an alignment; scoring jobs into one target language are scored in one call."""
        if self.targets is not None:
            return (SCORING, self.settings.tgt_lang)
        return (replace(self.settings, seed=0), id(self.glossary), self.reverse_weight, self.attention_layer)


class Batcher:
    def __init__(
        self,
        translator: LineTranslator,
        max_wait: float = 0.005,
        budget_pieces: int = 16000,
        workers: int = 1,
    ):
        """max_wait: seconds the first waiting request waits for others; budget_pieces: source pieces a
        batch takes at most (a bigger request is decoded alone); workers: decoding threads."""
        self.translator = translator
        self.max_wait, self.budget = max_wait, budget_pieces
        self.changed = threading.Condition()
        self.waiting: deque[Job] = deque()
        self.idle = workers
        self.closed = False
        self.batches = self.lines_decoded = self.pairs_scored = 0
        self.threads = [threading.Thread(target=self._run, name=f"mt-decoder-{i}", daemon=True) for i in range(workers)]
        for thread in self.threads:
            thread.start()

    @property
    def waiting_requests(self) -> int:
        return len(self.waiting)

    @property
    def busy_threads(self) -> int:
        return len(self.threads) - self.idle

    def submit(self, lines: list[str], settings: DecodeSettings, pieces: int = 0, **request) -> Future:
        """A translation job's future. request: the Job's other fields as the request gives them (prefixes,
        seeds, terms; glossary: the one its lines, or sentences, are held to: the server's, or the request's
        own on top of it; reverse_weight: the reverse model's weight, where the request names one)."""
        return self._queue(Job(lines, settings, pieces=pieces, **request))

    def submit_scoring(self, lines: list[str], targets: list[str], pieces: int = 0, tgt_lang: str = "") -> Future:
        """A future of the pairs' PairScores (pieces: source and target pieces, against the budget; tgt_lang:
        the targets' language, for a model of several)."""
        settings = self.translator.settings.updated(tgt_lang=tgt_lang)
        return self._queue(Job(lines, settings, pieces=pieces, targets=targets))

    def _queue(self, job: Job) -> Future:
        with self.changed:
            if self.closed:
                raise RuntimeError("the server is shutting down")
            self.waiting.append(job)
            self.changed.notify()
        return job.future

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()
        for thread in self.threads:
            thread.join(timeout=60)

    def _run(self) -> None:
        while (jobs := self._take()) is not None:
            try:
                groups: dict[tuple, list[Job]] = {}
                for job in jobs:
                    groups.setdefault(job.group, []).append(job)
                for key, group in groups.items():
                    if key[0] == SCORING:
                        self._score(group)
                    else:
                        self._decode(key[0], group, key[2], key[3])
            finally:
                with self.changed:
                    self.idle += 1
                    self.changed.notify()

    def _take(self) -> list[Job] | None:
        """This thread's next batch (None: closed), once the oldest waiting job has waited max_wait: its
        share of the waiting pieces among the idle threads, up to the budget, oldest first. Jobs whose
        client has gone are dropped unseen."""
        with self.changed:
            while True:
                if not self.waiting:
                    if self.closed:
                        return None
                    self.changed.wait()
                    continue
                remaining = self.waiting[0].arrived + self.max_wait - time.monotonic()
                if remaining > 0 and not self.closed:
                    self.changed.wait(remaining)
                    continue
                share = min(self.budget, math.ceil(sum(job.pieces for job in self.waiting) / self.idle))
                jobs, pieces = [], 0
                while self.waiting and (not jobs or pieces + self.waiting[0].pieces <= share):
                    job = self.waiting.popleft()
                    if job.future.set_running_or_notify_cancel():  # False: its request was cancelled
                        jobs.append(job)
                        pieces += job.pieces
                if jobs:
                    self.idle -= 1
                    if self.waiting:
                        self.changed.notify()  # what is left is another thread's
                    return jobs

    def _decode(
        self, settings: DecodeSettings, jobs: list[Job], reverse_weight: float | None = None, attention_layer=None
    ) -> None:
        lines = [line for job in jobs for line in job.lines]
        prefixes = None
        if any(job.prefixes for job in jobs):
            prefixes = [p for job in jobs for p in (job.prefixes or [""] * len(job.lines))]
        terms = None
        if any(job.terms for job in jobs):
            terms = [t for job in jobs for t in (job.terms or [[]] * len(job.lines))]
        seeds = [s for job in jobs for s in job.seeds] if settings.sampling else None
        translator = self.translator.with_settings(settings)
        if reverse_weight is not None:
            translator = translator.with_reverse(translator.reverse, reverse_weight)
        self._answer(
            jobs,
            lambda: translator.translate_nbest(
                lines,
                prefixes=prefixes,
                seeds=seeds,
                terms=terms,
                glossary=jobs[0].glossary,
                **({"attention_layer": attention_layer} if attention_layer is not None else {}),  # where asked
            ),
        )

    def _score(self, jobs: list[Job]) -> None:
        lines = [line for job in jobs for line in job.lines]
        targets = [t for job in jobs for t in job.targets]
        self._answer(jobs, lambda: self.translator.with_settings(jobs[0].settings).score(lines, targets))

    def _answer(self, jobs: list[Job], work) -> None:
        """Run work (a call giving one result per line of the jobs, in order) and hand each job its own."""
        try:
            results = work()
        except Exception as err:  # noqa: BLE001 - every request of the batch learns of it; the server goes on
            log.exception("a batch of %d lines failed", sum(len(job.lines) for job in jobs))
            for job in jobs:
                job.future.set_exception(err)
            return
        with self.changed:
            self.batches += 1
            if jobs[0].targets is None:
                self.lines_decoded += len(results)
            else:
                self.pairs_scored += len(results)
        start = 0
        for job in jobs:
            job.future.set_result(results[start : start + len(job.lines)])
            start += len(job.lines)
