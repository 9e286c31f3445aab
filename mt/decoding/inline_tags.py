"""Inline codes through translation: a segment's formatting (XLIFF's <g>, <x/>, <ph>, <pc>, ...) carried from
its source into its translation.

The model translates the segment's words alone. Each code then goes where its words went: a code that wraps
text (<g>bold words</g>) wraps the target words aligned to the words it wrapped, and a code that stands alone
(<x/>, <ph>...</ph>) stands before the target word aligned to the word after it. The alignment is the
model's own cross-attention (each target piece to its most-attended source piece, as `translate
--alignments` gives it), taken to whole words. Codes keep their order, so the translation's formatting stays
well formed and each closing code follows its opening one; where aligned words have moved past each other,
the codes take the nearest positions in order (isotonic regression by pooling adjacent violators). Without
an alignment, each code keeps its relative place in the text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass
from xml.dom import Node

WORD = re.compile(r"\S+")
TEXT_NODES = (Node.TEXT_NODE, Node.CDATA_SECTION_NODE)


@dataclass
class Code:
    kind: str  # "open" and "close" around the text an element wraps; "point" for one copied whole
    node: Node
    boundary: int  # where it stands among the source's words: 0 before the first, n after the last
    sticks: bool = False  # a point written right after text (word<x/>): it stays before the space that follows

    def before_space(self) -> bool:
        """Whether the code goes before the space at its place (after the word before), not after it."""
        return self.kind == "close" or (self.kind == "point" and self.sticks)


@dataclass
class Flattened:
    """A segment's content as the model reads it: its words one space apart, and its codes between them."""

    text: str
    words: int
    codes: list[Code]


def flatten(element: Node, wraps_text: Callable[[Node], bool]) -> Flattened:
    """element's text and inline codes. wraps_text(child): whether an element holds text to translate (its
    codes open and close around it); any other element (and a comment) is a code copied whole."""
    parts: list[str] = []
    marks: list[tuple[int, str, Node]] = []  # (character offset, kind, node)
    length = 0

    def walk(node: Node) -> None:
        nonlocal length
        for child in node.childNodes:
            if child.nodeType in TEXT_NODES:
                parts.append(child.data)
                length += len(child.data)
            elif child.nodeType == Node.ELEMENT_NODE and wraps_text(child):
                marks.append((length, "open", child))
                walk(child)
                marks.append((length, "close", child))
            else:
                marks.append((length, "point", child))

    walk(element)
    raw = "".join(parts)
    spans = [m.span() for m in WORD.finditer(raw)]
    middles = [(a + b) / 2 for a, b in spans]  # a code inside a word goes to its nearer edge
    codes = [
        Code(kind, node, bisect.bisect_left(middles, offset), offset > 0 and not raw[offset - 1].isspace())
        for offset, kind, node in marks
    ]
    return Flattened(" ".join(raw[a:b] for a, b in spans), len(spans), codes)


def piece_words(pieces: list[str]) -> list[int]:
    """The word each sentencepiece piece belongs to (a piece starting with ▁ starts a word)."""
    words, word = [], -1
    for piece in pieces:
        if piece.startswith("\u2581") or word < 0:
            word += 1
        words.append(word)
    return words


def word_alignment(
    attention, src_pieces: list[str], tgt_pieces: list[str], src_words: int, tgt_words: int
) -> list[set[int]] | None:
    """For each source word, the target words whose pieces attend most to one of its pieces; None where the
    pieces (EOS last on both sides, left out) do not make up the two texts' words."""
    src_of, tgt_of = piece_words(src_pieces[:-1]), piece_words(tgt_pieces[:-1])
    if len(set(src_of)) != src_words or len(set(tgt_of)) != tgt_words:
        return None
    aligned: list[set[int]] = [set() for _ in range(src_words)]
    for t, s in enumerate(attention[: len(tgt_of), : len(src_of)].argmax(dim=-1).tolist()):
        aligned[src_of[s]].add(tgt_of[t])
    return aligned


def wanted_places(codes: list[Code], n: int, m: int, aligned: list[set[int]] | None) -> list[float]:
    """Where each code would go among the m target words, by itself: a wrapping code around the target words
    aligned to the words it wraps, one standing alone before the word aligned to the next source word."""

    def point(i: int) -> float:
        if aligned is not None and i < n and aligned[i]:
            return min(aligned[i])
        if aligned is not None and i > 0 and aligned[i - 1]:
            return max(aligned[i - 1]) + 1
        return i * m / n if n else 0

    places: list[float] = []
    opened: dict[int, int] = {}  # id of an open code's node -> its index
    for k, code in enumerate(codes):
        places.append(point(code.boundary))
        if code.kind == "open":
            opened[id(code.node)] = k
        elif code.kind == "close" and aligned is not None:
            start = opened.pop(id(code.node))
            inside = set().union(*aligned[codes[start].boundary : code.boundary])
            if inside:
                places[start], places[k] = min(inside), max(inside) + 1
    return places


def in_order(values: list[float]) -> list[float]:
    """The non-decreasing sequence nearest to values in squared distance (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (a, i), (b, j) = blocks.pop(-2), blocks.pop()
            blocks.append([(a * i + b * j) / (i + j), i + j])
    return [mean for mean, count in blocks for _ in range(count)]


def place(flat: Flattened, translation: str, aligned: list[set[int]] | None) -> list[int]:
    """The target word boundary (0..m) of each code, in order."""
    m = len(WORD.findall(translation))
    wanted = wanted_places(flat.codes, flat.words, m, aligned)
    return [min(m, max(0, round(p))) for p in in_order(wanted)]


def render(target: Node, flat: Flattened, translation: str, places: list[int]) -> None:
    """Fill the empty element target with the translation's words and the codes at their places: closing
    codes, and points that stuck to the word before them, before the space at their place; the others after."""
    doc = target.ownerDocument
    words = WORD.findall(translation)
    open_elements = [target]

    def put(code: Code) -> None:
        if code.kind == "close":
            open_elements.pop()
        elif code.kind == "open":
            open_elements.append(open_elements[-1].appendChild(code.node.cloneNode(False)))
        else:
            open_elements[-1].appendChild(code.node.cloneNode(True))

    k = 0
    for boundary in range(len(words) + 1):
        here = []
        while k < len(places) and places[k] == boundary:
            here.append(flat.codes[k])
            k += 1
        before = 0  # the codes that go before the space
        while before < len(here) and here[before].before_space():
            before += 1
        for code in here[:before]:
            put(code)
        if 0 < boundary < len(words):
            open_elements[-1].appendChild(doc.createTextNode(" "))
        for code in here[before:]:
            put(code)
        if boundary < len(words):
            open_elements[-1].appendChild(doc.createTextNode(words[boundary]))
    target.normalize()  # adjacent text nodes joined
