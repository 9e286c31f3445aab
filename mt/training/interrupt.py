"""Stop training cleanly on SIGTERM or Ctrl-C: the loop finishes its step, saves last.pt, and exits.

Schedulers send SIGTERM before preempting a job; a second Ctrl-C stops at once.
"""

from __future__ import annotations

import signal


class StopRequest:
    """Installs handlers for SIGINT/SIGTERM while active; `signal_name` says which one arrived."""

    def __init__(self):
        self.signal_name: str | None = None
        self._previous: dict = {}

    def __enter__(self) -> StopRequest:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame) -> None:
        if self.signal_name is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # asked twice: stop now
        self.signal_name = signal.Signals(signum).name
