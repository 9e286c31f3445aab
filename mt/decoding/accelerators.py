"""Accelerator markers in user-interface strings: the `_` of GTK's "_Open" and the `&` of Qt's "&File" name
the key that opens a menu item with Alt. A model would read "_Open" as a strange word and lose the marker,
so it reads "Open", and the marker goes back into the translation: before the same letter where a word of
the translation begins with it, else before the translation's first letter ("_Open" -> "_Öffnen").
Every translation of a message with one marker has one, as `msgfmt --check-accelerators` wants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKERS = "_&"  # where a catalogue does not say (its header's X-Accelerator-Marker)
EMPHASIS_END = re.compile(r"[^\W_]_(?!\w)")  # "word_" closing Markdown's _emphasis_
ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z]\w*);")


@dataclass(frozen=True)
class Accelerator:
    """A marker taken out of a line, and the letter it stood before."""

    marker: str
    letter: str


def marker_places(line: str, markers: str) -> list[int]:
    """Where markers stand in the line: before a letter, at a word's start ("_Open", "Save &As"); an `&`
    also inside a word before a small letter ("E&xit"). Not in an identifier (file_name, __init__), an
    abbreviation (AT&T), doubled (Qt's "&&" writes one "&"), beginning a character reference (&amp;), or
    opening an emphasis that a `_` closes (Markdown's _word_)."""
    found = []
    emphasis = EMPHASIS_END.search(line)
    for i, char in enumerate(line):
        if char not in markers or (char == "_" and emphasis) or i + 1 == len(line) or not line[i + 1].isalpha():
            continue
        before = line[i - 1] if i else " "
        inside = before.isalnum() or before == "_"
        if before in markers or (char == "&" and ENTITY.match(line, i)):
            continue
        if not inside or (char == "&" and line[i + 1].islower()):
            found.append(i)
    return found


def take_accelerator(line: str, markers: str, spans: re.Pattern | None = None) -> tuple[str, Accelerator | None]:
    """The line without its marker, and the marker; the line as it is where it has none, or more than one
    (outside protected spans: %(file_name)s)."""
    kept = span_places(line, spans)
    found = [i for i in marker_places(line, markers) if not any(a <= i < b for a, b in kept)]
    if len(found) != 1:
        return line, None
    at = found[0]
    return line[:at] + line[at + 1 :], Accelerator(line[at], line[at + 1])


def put_accelerator(translation: str, accelerator: Accelerator | None, spans: re.Pattern | None = None) -> str:
    """The translation with the marker back: before a word beginning with the same letter (either case),
    else before its first letter, never inside a protected span ({file}); left as it is without a letter."""
    if accelerator is None:
        return translation
    kept = span_places(translation, spans)
    letters = [m.start() for m in re.finditer(r"[^\W\d_]", translation) if not any(a <= m.start() < b for a, b in kept)]
    starting = [i for i in letters if i == 0 or not (translation[i - 1].isalnum() or translation[i - 1] == "_")]
    same = [i for i in starting if translation[i].lower() == accelerator.letter.lower()]
    if not letters:
        return translation
    at = (same or letters)[0]
    return translation[:at] + accelerator.marker + translation[at:]


def span_places(text: str, spans: re.Pattern | None) -> list[tuple[int, int]]:
    """Where text's protected spans stand (start, end), which no marker goes into or comes out of."""
    return [m.span() for m in spans.finditer(text)] if spans else []
