"""Sides of a corpus whose lines have slipped apart: one line missing from a file, or one too many, pairs
every later source line with the translation of its neighbour. The line counts do not tell when a second
slip evens them out, or when the files were cut to the same length afterwards; the model then learns from
wrong pairs, or a test set is scored against the wrong references.

A translation is about as long as its source: over a hundred lines, the lengths of sources and their
translations correlate strongly (logarithms of characters; in the 310 windows of Multi30k's de-en files r
is 0.65-0.94, median 0.89), those of a source and its neighbour's translation hardly (there at most 0.49). So
where target line i - 1 (or i + 1, or two lines away) fits source line i far better than target line i
does, the sides have slipped there; a window whose lines hardly vary in length tells nothing and passes.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from mt.data.duplicates import base_parts

log = logging.getLogger(__name__)

WINDOW = 100  # lines compared at a time
SHIFTS = (-1, 1, -2, 2)  # the pairings tried besides the one given: target line i + shift for source line i
FIT = 0.5  # the correlation a shifted pairing must reach...
MARGIN = 0.3  # ...and by how much it must beat the pairing as given


@dataclass(frozen=True)
class Slip:
    line: int  # about where it starts (1-based)
    shift: int  # source line i pairs best with target line i + shift from there on
    fit: float  # the lengths' correlation, paired so
    given: float  # and as given
    earlier: bool = False  # slipped already where the lines looked at begin: somewhere before line

    def said(self, origin: str) -> str:
        """The warning: where, which way, and what to look for."""
        fewer = "target" if self.shift < 0 else "source"
        lines = "a line" if abs(self.shift) == 1 else f"{abs(self.shift)} lines"
        where = f"by line {self.line:,}" if self.earlier else f"from about line {self.line:,} on"
        return (
            f"data: {origin}: {where}, source line N pairs with target line N{self.shift:+d} (their lengths "
            f"correlate {self.fit:.2f}, as given {self.given:.2f}): {lines} missing from the {fewer} file "
            f"{'somewhere before' if self.earlier else 'near'} there, or one too many in the other? Later pairs are "
            "not translations of each other"
        )


def find_slip(src: list[str], tgt: list[str], first_line: int = 1) -> Slip | None:
    """The first place where the two sides pair better some lines apart than as given; None if none does.
    first_line: the line number of src[0] in its file."""
    s, t = (np.log1p(np.fromiter(map(len, side), dtype=np.float64, count=len(side))) for side in (src, tgt))
    lines_paired = min(len(s), len(t))
    starts = np.arange(0, lines_paired - WINDOW + 1, WINDOW)
    if lines_paired > WINDOW and lines_paired % WINDOW:  # and the last WINDOW lines, where the windows end before
        starts = np.append(starts, lines_paired - WINDOW)
    lines = starts[:, None] + np.arange(WINDOW)  # one row of line indices per window
    given = _correlations(s[lines], t[lines])
    fits = np.full((len(SHIFTS), len(starts)), -np.inf)
    for row, shift in enumerate(SHIFTS):
        inside = (starts + shift >= 0) & (starts + WINDOW + shift <= len(t))
        fits[row, inside] = _correlations(s[lines[inside]], t[lines[inside] + shift])
    slipped = (fits >= FIT) & (fits - given >= MARGIN)
    if not slipped.any():
        return None
    window = int(np.flatnonzero(slipped.any(axis=0))[0])
    row = int(np.flatnonzero(slipped[:, window])[0])  # the nearest pairing first (SHIFTS' order)
    line = _where(s, t, int(starts[window]), SHIFTS[row])
    return Slip(first_line + line, SHIFTS[row], round(float(fits[row, window]), 2), round(float(given[window]), 2))


def _correlations(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of a with the same row of b; 0 where either row does not vary."""
    a, b = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
    spread = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    return np.where(spread > 0, (a * b).sum(axis=1) / np.where(spread > 0, spread, 1), 0.0)


def _where(s: np.ndarray, t: np.ndarray, start: int, shift: int) -> int:
    """The line in the window before start's or in start's where pairing as given gives way to pairing
    shift lines apart: the split that makes the lengths of the pairs differ least, both ways together."""
    low, high = max(0, start - WINDOW, -shift), min(len(s), start + WINDOW, len(t) - shift)
    lines = np.arange(low, high)
    as_given = np.abs(s[lines] - t[lines])
    shifted = np.abs(s[lines] - t[lines + shift])
    # cost of splitting before lines[j]: as given before it, shifted from it on
    cost = np.concatenate([[0.0], np.cumsum(as_given)]) + np.concatenate([np.cumsum(shifted[::-1])[::-1], [0.0]])
    return int(low + np.argmin(cost))


def slipped_parts(corpus) -> list[tuple[str, Slip]]:
    """(origin, slip) for each part of a corpus (a training split may join several) whose sides slipped:
    each part read at its first and its last shard. A slip anywhere shifts every line after it, the last
    shard's too, unless a second one evens it out; a held-out set is one shard, read whole."""
    found = []
    for part, _, _ in base_parts(corpus):
        for index in sorted({0, part.shards - 1}):
            first = index * part.shard_lines + 1
            slip = find_slip(*part.shard(index), first_line=first)
            if slip is not None:
                if index and slip.line < first + WINDOW:  # slipped where the shard begins: in the lines skipped
                    slip = dataclasses.replace(slip, line=first, earlier=True)
                found.append((part.origin, slip))
                break
    return found


def warn_if_slipped(corpus) -> None:
    for origin, slip in slipped_parts(corpus):
        log.warning("%s", slip.said(origin))
