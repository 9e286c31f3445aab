"""Subtitle files: `translate -i film.de.srt -o film.en.srt` translates their text and keeps their timing.

SubRip (.srt) is blocks of a number, a timing line (00:01:02,500 --> 00:01:04,000) and one or more lines of
text, a blank line between blocks; WebVTT (.vtt) starts with WEBVTT, may name a cue before its timing line,
put settings after it (align:start) and hold NOTE, STYLE and REGION blocks, which are not cues. A file is
read whole into cues (where each one's text lines are, when it shows, who speaks), and written back as it was
read but for the text of the cues translated: numbering, timing, blank lines, line endings and a byte-order
mark kept. SubStation Alpha (.ass, .ssa) is read by mt/data/substation.py into the same cues.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mt.data.cues import Cue, seconds
from mt.data.lines import document_bytes, document_lines, write_document
from mt.data.substation import SubStation
from mt.errors import MTError

FORMATS = {".srt": "SubRip", ".vtt": "WebVTT", ".ass": "SubStation Alpha", ".ssa": "SubStation Alpha"}
TIME = r"(?:\d+:)?\d{1,2}:\d{2}[,.]\d{3}"
TIMING = re.compile(rf"^\s*(?P<start>{TIME})\s*-->\s*(?P<end>{TIME})(?:\s.*)?$")
VOICE = re.compile(r"^\s*<v(?:\.[^\s>]*)?\s+([^>]*)>")  # WebVTT's <v Anna>, who speaks the cue
NOT_CUES = ("NOTE", "STYLE", "REGION")  # WebVTT blocks that hold no text to show


def subtitle_format(path: str | None) -> str | None:
    """The subtitle format a file named so holds (SubRip, WebVTT, SubStation Alpha), None for another file."""
    return FORMATS.get(Path(path).suffix.lower()) if path else None


def is_subtitle_name(path: str | None) -> bool:
    """Whether a file named so is a subtitle file (.srt, .vtt, .ass, .ssa)."""
    return subtitle_format(path) is not None


def read_subtitles(path: str | os.PathLike, data: bytes | None = None):
    """The subtitle file at path (or data, a request's body named path) read whole: SubStation Alpha where it
    is named or starts so ([Script Info]), else SubRip or WebVTT."""
    data = document_bytes(path, data)
    if subtitle_format(str(path)) == "SubStation Alpha" or data.removeprefix(b"\xef\xbb\xbf").startswith(b"[Script"):
        return SubStation(path, data)
    return Subtitles(path, data)


class Subtitles:
    """A subtitle file read whole: its cues, and written back with their translations."""

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = str(path)
        self.lines, self.newline, self.bom = document_lines(self.path, document_bytes(path, data))
        self.webvtt = self.lines[0].startswith("WEBVTT")
        self.media_type = "text/vtt" if self.webvtt else "application/x-subrip"
        if self.path.lower().endswith(".vtt") and not self.webvtt:
            raise MTError(f"{self.path}:1: a WebVTT file starts with WEBVTT")
        self.cues = self._cues()
        self.translations: dict[int, list[str]] = {}  # a cue's index -> its translated lines

    def _cues(self) -> list[Cue]:
        """The cues in order: in each block (lines between blank lines), the lines after its timing line."""
        cues, block = [], []
        for i, line in enumerate([*self.lines, ""]):
            if line.strip():
                block.append(i)
                continue
            if block:
                cue = self._cue(block)
                cues += [cue] if cue else []
            block = []
        return cues

    def _cue(self, block: list[int]) -> Cue | None:
        """A block's cue; None for WebVTT's header and its NOTE, STYLE and REGION blocks."""
        first = self.lines[block[0]]
        if self.webvtt and (block[0] == 0 or first.split(" ", 1)[0].split("\t", 1)[0] in NOT_CUES):
            return None
        timing = next((i for i in block[:2] if "-->" in self.lines[i]), None)
        if timing is None:
            where = "a number, then a timing line" if not self.webvtt else "a timing line"
            raise MTError(f"{self.path}:{block[0] + 1}: a cue starts with {where} (00:00:01,000 --> 00:00:02,500)")
        times = TIMING.match(self.lines[timing])
        if not times:
            raise MTError(f"{self.path}:{timing + 1}: not a timing line: {self.lines[timing].strip()[:80]!r}")
        lines = [self.lines[i] for i in block if i > timing]
        voice = VOICE.match(lines[0]) if lines and self.webvtt else None
        start, end = seconds(times["start"]), seconds(times["end"])
        return Cue(timing + 1, lines, start, end, voice.group(1).strip() if voice else "")

    def output(self) -> str:
        """The file with each translated cue's text lines in place of its own."""
        lines, at = [], 0
        for i, cue in enumerate(self.cues):
            if i in self.translations:
                lines += self.lines[at : cue.first] + self.translations[i]
                at = cue.first + len(cue.lines)
        lines += self.lines[at:]
        return ("\ufeff" if self.bom else "") + self.newline.join(lines)

    def write(self, path: str | None, out=None) -> None:
        write_document(path, self.output(), out)
