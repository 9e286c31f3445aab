"""A subtitle file translated (mt/data/subtitles.py): a sentence that runs over several cues is translated
whole, and its translation split back into those cues where the model's alignment puts their boundaries.

A cue is a few seconds of a sentence, often half of one: translated alone, "Ich habe gestern" and "einen
Hund gesehen." make two poor halves. So cues are joined into sentences (until a cue ends in . ! ? or …, at
most MAX_CUES, never over a PAUSE nor from one speaker or style to another) and each boundary between them
goes through the translation as an inline code does (mt/decoding/inline_tags.py): after the translation of
the words before it. A dialogue cue (every line a speaker's, "- Hallo." / "- Tschüss.") is translated line
by line. Each translated cue keeps its number of lines (two where one would be over LINE_CHARS), the words
spread evenly over them; tags (<i>) and subtitle codes ({\\an8}, <00:01.500>) stay as protected spans.

    report = mt.translate_subtitles(translator, "film.de.srt", "film.en.srt")
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from mt.data.cues import Cue
from mt.data.subtitles import read_subtitles
from mt.decoding.inline_tags import Flattened, alignment_layer, place, token_alignment
from mt.decoding.line_translator import document_changes
from mt.decoding.protected_spans import flatten_line, pattern_of, render_line, with_kinds
from mt.errors import counted

MAX_CUES = 3  # a sentence longer than this many cues is translated in parts of this many
PAUSE = 2.0  # seconds between two cues that end a sentence, though the first has no period
BREAK = "\ue000"  # a boundary between cues, through the translation as a code (a private-use character)
SENTENCE_END = re.compile(r"[.!?…♪][\"'”’»)\]]*$")
DIALOGUE = re.compile(r"^\s*[-–—]\s*")
LINE_CHARS = 42  # the most characters a subtitle line shows, as broadcasters' and streaming guidelines have it


@dataclass
class SubtitleReport:
    """What was done to a file's cues, for the caller's summary."""

    translated: int = 0  # cues
    joined: int = 0  # of those, in sentences over several cues, split back by alignment
    by_position: int = 0  # of those, split by relative position (no attention, or a cue left without a word)
    copied: int = 0  # cues without a word (music notes, numbers), drawings and karaoke, copied as they are

    def summary(self) -> str:
        parts = [f"{counted(self.translated, 'cue')} translated"]
        if self.joined:
            how = f", {self.by_position} of them split by relative position" if self.by_position else ""
            parts.append(f"{self.joined} in sentences over several cues, split back by alignment{how}")
        if self.copied:
            parts.append(f"{self.copied} without words (or drawings, karaoke) copied")
        return "; ".join(parts)


@dataclass
class Group:
    """Cues translated as one line (a sentence over several cues), or one dialogue cue line by line."""

    cues: list[int]
    flat: Flattened | None = None  # the joined text with its cue boundaries as codes (several cues)
    lines: list[str] = field(default_factory=list)  # what the model reads of single cues (joined: flat.text)


def is_dialogue(cue: Cue) -> bool:
    """Whether every line of the cue is a speaker's, each begun with a dash."""
    said = [line for line in cue.lines if line.strip()]
    return len(said) > 1 and all(DIALOGUE.match(line) for line in said)


def continues(cue: Cue, after: Cue) -> bool:
    """Whether cue may carry on the sentence of the cue before it: the same voice, shown after it (not
    beside it) with less than a PAUSE between them."""
    return cue.voice == after.voice and after.start < cue.start < after.end + PAUSE


def has_words(text: str, spans: re.Pattern) -> bool:
    """Whether text holds a letter outside its protected spans: something for the model to translate."""
    return any(char.isalpha() for char in spans.sub("", text))


class SubtitleTranslation:
    """A subtitle file's cues as lines to translate: single ones with these setting changes, sentences over
    several cues with an alignment; fill() writes their translations in."""

    def __init__(self, subtitles, translator):
        self.subtitles = subtitles
        self.language = translator.target_language  # for the caller to name the translation by
        self.protect = with_kinds(translator.settings.protect, "tag", "subtitle")
        self.spans = pattern_of(self.protect)
        self.with_breaks = re.compile(f"(?P<cue>{BREAK})|{self.spans.pattern}")  # cue boundaries as codes too
        self.layer = alignment_layer(translator)
        self.report = SubtitleReport()
        self.groups: list[Group] = []
        running: list[int] = []
        for i, cue in enumerate(subtitles.cues):
            if cue.kept or not has_words(cue.text, self.spans):
                self.report.copied += bool(cue.text)
                continue
            if running and not continues(cue, subtitles.cues[running[-1]]):
                self._close(running)
            if is_dialogue(cue):
                self._close(running)
                said = [line for line in cue.lines if line.strip()]
                self.groups.append(Group([i], lines=[DIALOGUE.sub("", line).strip() for line in said]))
                continue
            running.append(i)
            if SENTENCE_END.search(cue.text) or len(running) == MAX_CUES:
                self._close(running)
        self._close(running)

    def _close(self, running: list[int]) -> None:
        """The cues gathered so far as a group, and none gathered after."""
        if len(running) == 1:
            self.groups.append(Group(list(running), lines=[self.subtitles.cues[running[0]].text]))
        elif running:
            joined = f" {BREAK} ".join(self.subtitles.cues[i].text for i in running)
            self.groups.append(Group(list(running), flatten_line(joined, self.with_breaks)))
        running.clear()

    @property
    def plain(self) -> list[str]:
        """The lines decoded as translate decodes lines: single cues, and dialogue lines."""
        return [line for group in self.groups if group.flat is None for line in group.lines]

    @property
    def joined(self) -> list[str]:
        """The lines decoded whole with their attention: sentences over several cues."""
        return [group.flat.text for group in self.groups if group.flat is not None]

    def changes(self) -> tuple[dict, dict]:
        """The setting changes the plain lines decode with, and the joined ones (spans are codes already)."""
        return {"protect": self.protect}, {"protect": "none", "split_sentences": False}

    def fill(self, plain: list, joined: list) -> None:
        """The Translations of self.plain and self.joined, in order, written into their cues."""
        plain, joined = iter(plain), iter(joined)
        cues = self.subtitles.cues
        for group in self.groups:
            if group.flat is None:
                found = [next(plain).text for _ in group.lines]
                if len(group.lines) > 1:  # a dialogue: each line its speaker's dash
                    dashes = [DIALOGUE.match(line).group() for line in cues[group.cues[0]].lines if line.strip()]
                    self.subtitles.translations[group.cues[0]] = [d + t for d, t in zip(dashes, found)]
                else:
                    self.subtitles.translations[group.cues[0]] = laid_out(found[0], cues[group.cues[0]])
            else:
                parts = self._split(group, next(joined))
                for i, part in zip(group.cues, parts):
                    self.subtitles.translations[i] = laid_out(part, cues[i])
                self.report.joined += len(group.cues)
            self.report.translated += len(group.cues)

    def _split(self, group: Group, translation) -> list[str]:
        """A sentence's translation cut at its cue boundaries: where the alignment puts them, else (no
        attention, or a cue left without a word) by the cues' share of the source's words."""
        aligned = None
        if translation.attention is not None:
            aligned = token_alignment(
                translation.attention, translation.src_pieces, translation.tgt_pieces, group.flat.text, translation.text
            )
        rendered = render_line(group.flat, translation.text, place(group.flat, translation.text, aligned))
        parts = [" ".join(part.split()) for part in rendered.split(BREAK)]
        if aligned is not None and all(any(c.isalpha() for c in part) for part in parts):  # no cue of "." alone
            return parts
        self.report.by_position += len(group.cues)
        text = re.sub(f" ?{BREAK}", "", rendered)  # "her \ue000." is "her."
        return by_share(text.split(), [len(self.subtitles.cues[i].text.split()) for i in group.cues])


def by_share(words: list[str], shares: list[int]) -> list[str]:
    """words cut into len(shares) runs in proportion to shares, each run a word or more where there are enough."""
    total, parts, at = sum(shares), [], 0
    for k in range(len(shares)):
        left = len(shares) - k - 1  # runs still to come, each owed a word
        end = len(words) if not left else round(len(words) * sum(shares[: k + 1]) / total)
        end = max(min(end, len(words) - left), at + (at < len(words) - left))
        parts.append(" ".join(words[at:end]))
        at = end
    return parts


def laid_out(text: str, cue: Cue) -> list[str]:
    """A cue's translation on as many lines as the cue had, or two where one would run over LINE_CHARS, its
    words spread evenly (one line where there are too few words)."""
    words = text.split()
    lines = max(1, sum(bool(line.strip()) for line in cue.lines), 2 if len(text) > LINE_CHARS else 1)
    if lines == 1 or len(words) < lines:
        return [text]
    width, found, current = len(text) / lines, [], []
    for word in words:
        after = len(" ".join([*current, word]))
        if current and len(found) < lines - 1 and after > width and after - width > width - len(" ".join(current)):
            found.append(" ".join(current))
            current = []
        current.append(word)
    return [*found, " ".join(current)]


def translate_subtitles(
    translator,
    path,
    output: str | None = None,
    glossary=None,
    progress: bool = False,
    out=None,
    split_sentences: bool = True,
) -> SubtitleReport:
    """Translate the subtitle file (.srt, .vtt, .ass, .ssa) at path into output (None: out, by default stdout): the text
    of every cue, sentences over several cues whole, as translator.translate would (its settings, sentence by sentence
    unless split_sentences=False; glossary: an mt.Glossary); numbering and timing kept."""
    work = SubtitleTranslation(read_subtitles(path), translator)
    plain_changes, joined_changes = (document_changes(changes, split_sentences) for changes in work.changes())
    plain = translator.translate_with(work.plain, plain_changes, glossary=glossary, progress=progress)
    joined = translator.translate_with(
        work.joined, joined_changes, glossary=glossary, progress=progress, attention_layer=work.layer
    )
    work.fill(plain, joined)
    work.subtitles.write(output, out or sys.stdout)
    return work.report
