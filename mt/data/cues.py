"""A subtitle's cue, whatever file it came from (mt/data/subtitles.py: SubRip, WebVTT; mt/data/substation.py:
SubStation Alpha): its text's lines, when it shows and who speaks it."""

from __future__ import annotations

from dataclasses import dataclass


def seconds(time: str) -> float:
    """A cue time (01:02:03,500, 02:03.500, ASS's 1:02:03.50) in seconds."""
    *hours_minutes, rest = time.strip().replace(",", ".").split(":")
    return sum(int(part) * 60 ** (len(hours_minutes) - k) for k, part in enumerate(hours_minutes)) + float(rest)


@dataclass
class Cue:
    """A cue's text: where its lines stand in the file (indices into Subtitles.lines) and what they say;
    when it shows (seconds) and who speaks it (a voice, a style) for what may join it into a sentence."""

    first: int
    lines: list[str]
    start: float = 0.0
    end: float = 0.0
    voice: str = ""
    kept: bool = False  # shown as it is, never translated (SubStation's drawings and karaoke)

    @property
    def text(self) -> str:
        """The cue's lines as one line, as a viewer reads them."""
        return " ".join(line.strip() for line in self.lines if line.strip())
