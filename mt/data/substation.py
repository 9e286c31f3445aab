"""SubStation Alpha subtitles (.ass, and the older .ssa), as Aegisub and most fansubs write them: sections
in brackets, the cues in [Events] as Dialogue lines whose fields its Format line names, the text last:

    [Events]
    Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text
    Dialogue: 0,0:00:01.00,0:00:03.50,Default,Anna,0,0,0,,{\\i1}Ich habe{\\i0} gestern\\Neinen Hund gesehen.

A cue's lines are its text cut at \\N; its override blocks ({\\i1}) and \\h stay as protected spans (the
subtitle kind). Written back as it was read but for the text of the cues translated. A drawing ({\\p1}) or a
karaoke line ({\\k20}, timed syllable by syllable) is kept as it is.
"""

from __future__ import annotations

import os
import re

from mt.data.cues import Cue, seconds
from mt.data.lines import document_bytes, document_lines, write_document
from mt.errors import MTError

TIME = re.compile(r"^\s*\d+:\d{1,2}:\d{1,2}(?:\.\d{1,3})?\s*$")  # 0:00:01.50
KEPT = re.compile(r"\{[^{}]*\\(?:p[1-9]|[kK][fo]?\d)")  # a drawing; karaoke, which a translation cannot keep
NEEDED = ("Start", "End", "Text")  # the fields a Format line must name


class SubStation:
    """A SubStation Alpha file read whole: its Dialogue lines' cues, and written back with their translations."""

    media_type = "text/x-ssa"
    webvtt = False

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = str(path)
        self.lines, self.newline, self.bom = document_lines(self.path, document_bytes(path, data))
        if self.lines[0].strip() != "[Script Info]":
            raise MTError(f"{self.path}:1: a SubStation Alpha file starts with [Script Info]")
        self.heads: list[str] = []  # each cue's Dialogue line up to its text
        self.cues = self._cues()
        self.translations: dict[int, list[str]] = {}  # a cue's index -> its translated lines

    def _cues(self) -> list[Cue]:
        """The Dialogue lines of the [Events] section, each read by the section's Format line."""
        cues, section, fields = [], "", None
        for i, line in enumerate(self.lines):
            stripped = line.strip()
            if stripped.startswith("[") and stripped.endswith("]"):
                section, fields = stripped.lower(), None
                continue
            name, colon, value = line.partition(":")
            if section != "[events]" or not colon:
                continue
            if name.strip() == "Format":
                fields = [field.strip() for field in value.split(",")]
                missing = [field for field in NEEDED if field not in fields]
                if missing or fields[-1] != "Text":
                    raise MTError(f"{self.path}:{i + 1}: a Format line names Start and End, and Text last")
            elif name.strip() == "Dialogue":
                cues.append(self._cue(i, value, fields))
        return cues

    def _cue(self, i: int, value: str, fields: list[str] | None) -> Cue:
        """Line i's cue: its text's lines, times, and voice (its style and speaker's name)."""
        if fields is None:
            raise MTError(f"{self.path}:{i + 1}: a Dialogue line before the [Events] section's Format line")
        values = value.lstrip().split(",", len(fields) - 1)
        if len(values) < len(fields):
            raise MTError(f"{self.path}:{i + 1}: a Dialogue line of {len(values)} fields; Format names {len(fields)}")
        got = dict(zip(fields, values))
        for field in ("Start", "End"):
            if not TIME.match(got[field]):
                raise MTError(f"{self.path}:{i + 1}: {field}: not a time (0:00:01.50): {got[field].strip()[:40]!r}")
        text = got["Text"]
        self.heads.append(self.lines[i][: len(self.lines[i]) - len(text)])
        voice = f"{got.get('Style', '').strip()}/{got.get('Name', got.get('Actor', '')).strip()}"
        return Cue(i, text.split("\\N"), seconds(got["Start"]), seconds(got["End"]), voice, bool(KEPT.search(text)))

    def output(self) -> str:
        """The file with each translated cue's text in place of its own, its lines joined by \\N."""
        lines = list(self.lines)
        for i, translated in self.translations.items():
            lines[self.cues[i].first] = self.heads[i] + "\\N".join(translated)
        return ("\ufeff" if self.bom else "") + self.newline.join(lines)

    def write(self, path: str | None, out=None) -> None:
        write_document(path, self.output(), out)
