"""What a monitoring system scrapes from mt-serve: GET /metrics in Prometheus's text format (version 0.0.4),
the format Prometheus, Grafana Agent, Datadog and most others read. Requests by path and status, their
latency as a histogram, lines translated, pairs scored, batches, and what waits in the queue: enough to
chart a server's traffic and alert on errors or a growing queue. The format is a few lines of text, written
here rather than through a client library.
"""

from __future__ import annotations

import time
from collections import Counter

# Upper bounds (seconds) of the latency histogram's buckets: a one-line request on a CPU takes ~10-50 ms,
# a full batch under load a few seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PATHS = ("/translate", "/score", "/xliff", "/health", "/")  # the routes counted (others would only add noise)


class Latencies:
    """One histogram: how many observations fell at or below each bucket's bound, their sum and count."""

    def __init__(self):
        self.counts, self.sum, self.count = [0] * len(BUCKETS), 0.0, 0

    def observe(self, seconds: float) -> None:
        self.sum += seconds
        self.count += 1
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.counts[i] += 1


class Metrics:
    """Requests answered by (path, status) and their latencies by path, recorded by RecordRequests on the
    event loop (one thread: no lock)."""

    def __init__(self):
        self.answered: Counter[tuple[str, int]] = Counter()
        self.latency: dict[str, Latencies] = {}

    def record(self, path: str, status: int, seconds: float) -> None:
        self.answered[path, status] += 1
        self.latency.setdefault(path, Latencies()).observe(seconds)

    def exposition(self, batcher, glossary_entries: int) -> str:
        """The metrics as Prometheus's text format: a HELP and a TYPE line per metric, then its samples."""
        out: list[str] = []

        def family(name: str, kind: str, about: str, samples: list[tuple[str, float]]) -> None:
            out.extend([f"# HELP {name} {about}", f"# TYPE {name} {kind}"])
            out.extend(f"{name}{labels} {number(value)}" for labels, value in samples)

        answered = sorted(self.answered.items())
        family(
            "mt_requests_total", "counter", "HTTP requests answered, by path and status code.",
            [(f'{{path="{path}",code="{status}"}}', n) for (path, status), n in answered],
        )  # fmt: skip
        out.extend([
            "# HELP mt_request_duration_seconds Time from a request's arrival to its answer, by path.",
            "# TYPE mt_request_duration_seconds histogram",
        ])  # fmt: skip
        for path, hist in sorted(self.latency.items()):
            for bound, n in zip(BUCKETS, hist.counts):
                out.append(f'mt_request_duration_seconds_bucket{{path="{path}",le="{bound}"}} {n}')
            out.append(f'mt_request_duration_seconds_bucket{{path="{path}",le="+Inf"}} {hist.count}')
            out.append(f'mt_request_duration_seconds_sum{{path="{path}"}} {number(hist.sum)}')
            out.append(f'mt_request_duration_seconds_count{{path="{path}"}} {hist.count}')
        family("mt_lines_translated_total", "counter", "Lines translated.", [("", batcher.lines_decoded)])
        family("mt_pairs_scored_total", "counter", "Sentence pairs scored (POST /score).", [("", batcher.pairs_scored)])
        family("mt_batches_total", "counter", "Batches decoded or scored.", [("", batcher.batches)])
        family("mt_waiting_requests", "gauge", "Requests queued, not yet decoding.", [("", batcher.waiting_requests)])
        family("mt_busy_decoding_threads", "gauge", "Decoding threads at work.", [("", batcher.busy_threads)])
        family("mt_decoding_threads", "gauge", "Decoding threads in all.", [("", len(batcher.threads))])
        family("mt_glossary_entries", "gauge", "Entries of the server's --glossary.", [("", glossary_entries)])
        return "\n".join(out) + "\n"


def number(value: float) -> str:
    """A sample value as Prometheus writes one: integers without a decimal point."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class RecordRequests:
    """ASGI middleware: the status and time of every answer to PATHS, into metrics. A plain ASGI wrapper, as
    it adds microseconds a request (Starlette's BaseHTTPMiddleware would add a task and a stream)."""

    def __init__(self, app, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] not in PATHS:
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500  # an exception before any answer: the server's error

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.record(scope["path"], status, time.perf_counter() - start)
