"""Inline codes through translation: a segment's formatting (XLIFF's <g>, <x/>, <ph>, <pc>, ...) carried from
its source into its translation.

The model translates the segment's words alone. Each code then goes where its words went: a code that wraps
text (<g>bold words</g>) wraps the target words aligned to the words it wrapped, and a code that stands alone
(<x/>, <ph>...</ph>) stands before the target word aligned to the word after it. Words here are tokens: a
word, or a run of punctuation, so that <g>Haus</g>. gives <g>house</g>. The alignment comes from the model's
own cross-attention (token_alignment). Codes keep their order, so the translation's formatting stays well
formed and each closing code follows its opening one; where aligned words have moved past each other, the
codes take the nearest positions in order (isotonic regression by pooling adjacent violators, a wrapping
code weighing more than one standing alone). Without an alignment, each code keeps its relative place.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from xml.dom import Node

TOKEN = re.compile(r"\w+|[^\w\s]+")  # a word, or a run of punctuation: where codes may stand
TEXT_NODES = (Node.TEXT_NODE, Node.CDATA_SECTION_NODE)
CODE_END = ">"  # what arranged takes a point to end in: neither a space nor a letter
CLOSING = frozenset(".,;:!?)]}»”’…")  # punctuation written against the word before it, no space between
# where codes must move to stay in order, a wrapping code keeps to its words before a point keeps its place
WRAPPING_WEIGHT = 4.0


@dataclass
class Code:
    kind: str  # "open" and "close" around the text an element wraps; "point" for one copied whole
    node: Node | object  # the element or comment it copies; what text protection copies (protected_spans.py)
    boundary: int  # where it stands among the source's tokens: 0 before the first, n after the last
    sticks: bool = False  # a point written right after text (word<x/>): it stays before the space that follows
    space_before: bool = False  # a point with a space before it (word <x/>), or after it (<x/> word), in the source
    space_after: bool = False
    word_before: bool = False  # a point written against a word's letters or digits on that side (word<x/>)
    word_after: bool = False

    def before_space(self) -> bool:
        """Whether the code goes before the space at its place (after the word before), not after it."""
        return self.kind == "close" or (self.kind == "point" and self.sticks)


@dataclass
class Flattened:
    """A segment's content as the model reads it (its words one space apart), and its codes between its tokens."""

    text: str
    tokens: int
    codes: list[Code]
    lead: str = ""  # the source's whitespace before its first code or word, and after its last: kept
    trail: str = ""


def flatten(element: Node, wraps_text: Callable[[Node], bool], spans: re.Pattern | None = None) -> Flattened:
    """element's text and inline codes. wraps_text(child): whether an element holds text to translate (its
    codes open and close around it); any other element (and a comment) is a code copied whole. spans: text
    to copy as it is (protected spans: a URL, a placeholder), each a code of its own where no code stands
    inside it."""
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
    found = list(spans.finditer(raw)) if spans else []
    found = [m for m in found if not any(m.start() < offset < m.end() for offset, _, _ in marks)]
    if not found:
        return flattened(raw, marks)
    doc = element.ownerDocument
    keyed = [(offset, offset, kind, node) for offset, kind, node in marks]  # (place in raw, offset, ...)
    keyed += [(m.start() + 0.5, m.start(), "point", doc.createTextNode(m.group())) for m in found]
    removed = [(m.end(), m.end() - m.start()) for m in found]  # a mark after a span moves back by its length
    keyed.sort(key=lambda k: k[0])  # stable: codes at one place keep their order
    moved = [(o - sum(n for end, n in removed if end <= o), kind, node) for _, o, kind, node in keyed]
    kept, at = [], 0
    for m in found:
        kept.append(raw[at : m.start()])
        at = m.end()
    return flattened("".join(kept) + raw[at:], moved)


def flattened(raw: str, marks: list[tuple[int, str, object]]) -> Flattened:
    """raw text and its codes, each (character offset, kind, payload) in order, as the model reads the text
    (its words one space apart) and the codes between its tokens."""
    middles = [(m.start() + m.end()) / 2 for m in TOKEN.finditer(raw)]  # a code inside a token: its nearer edge
    codes = []
    for offset, kind, node in marks:
        before, after = offset > 0 and raw[offset - 1].isspace(), offset < len(raw) and raw[offset].isspace()
        boundary = bisect.bisect_left(middles, offset)
        word_before, word_after = offset > 0 and raw[offset - 1].isalnum(), offset < len(raw) and raw[offset].isalnum()
        codes.append(Code(kind, node, boundary, offset > 0 and not before, before, after, word_before, word_after))
    first, last = (marks[0][0], marks[-1][0]) if marks else (len(raw), 0)
    lead = raw[: min(len(raw) - len(raw.lstrip()), first)]
    trail = raw[max(len(raw.rstrip()), last) :] if raw.strip() else ""
    return Flattened(" ".join(raw.split()), len(middles), codes, lead, trail)


def piece_tokens(pieces: list[str], text: str, token: re.Pattern = TOKEN) -> list[int]:
    """The token of text (TOKEN, or another tokenization) each sentencepiece piece starts in, found by walking
    the two together: a piece the tokenizer normalised (NFKC: "…" as "...") is taken where the walk stands."""
    spans = [m.span() for m in token.finditer(text)]
    owner = [-1] * len(text)
    for k, (a, b) in enumerate(spans):
        owner[a:b] = [k] * (b - a)
    found, at = [], 0
    for piece in pieces:
        core = piece.replace("\u2581", "")
        where = text.find(core, at) if core else -1
        at = where if 0 <= where <= at + 1 else at  # found at once, or past the one space between words
        while at < len(text) and text[at].isspace():
            at += 1
        found.append(owner[at] if at < len(text) else len(spans) - 1)
        at += len(core)
    return found


def token_alignment(
    attention, src_pieces: list[str], tgt_pieces: list[str], src: str, tgt: str, token: re.Pattern = TOKEN
) -> list[set[int]]:
    """For each source token (TOKEN, or another tokenization), the target tokens aligned to it. attention
    (target pieces x source pieces, EOS last on both sides) is summed over a source token's pieces and
    averaged over a target token's. Each source token is aligned to the target token that attends to it
    most; a target token no source token chose (the second word of a translation in two) to the source token
    it attends to most. Tried on Multi30k, this wrapped a word's translation exactly more often than either
    direction alone or their union."""
    n, m = len(token.findall(src)), len(token.findall(tgt))
    weights = [[0.0] * n for _ in range(m)]
    pieces = [0] * m
    src_of, tgt_of = piece_tokens(src_pieces[:-1], src, token), piece_tokens(tgt_pieces[:-1], tgt, token)
    for t, row in zip(tgt_of, attention[: len(tgt_of), : len(src_of)].tolist()):
        pieces[t] += 1
        for s, weight in zip(src_of, row):
            weights[t][s] += weight
    aligned: list[set[int]] = [set() for _ in range(n)]
    heard = [t for t in range(m) if pieces[t]]  # a token without a piece of its own has no attention to go by
    for s in range(n) if heard else ():
        aligned[s].add(max(heard, key=lambda t: weights[t][s] / pieces[t]))
    chosen = set().union(*aligned)
    for t in heard:
        if t not in chosen:
            aligned[max(range(n), key=weights[t].__getitem__)].add(t)
    return aligned


def wanted_places(codes: list[Code], n: int, m: int, aligned: list[set[int]] | None) -> list[float]:
    """Where each code would go among the m target tokens, by itself: a wrapping code around the target
    tokens aligned to the tokens it wraps; one standing alone after the token aligned to the source token it
    follows without a space (word<x/>), else before the token aligned to the source token after it."""

    def point(i: int, after_previous: bool) -> float:
        if aligned is not None and after_previous and i > 0 and aligned[i - 1]:
            return max(aligned[i - 1]) + 1
        if aligned is not None and i < n and aligned[i]:
            return min(aligned[i])
        if aligned is not None and i > 0 and aligned[i - 1]:
            return max(aligned[i - 1]) + 1
        return i * m / n if n else 0

    places: list[float] = []
    opened: dict[int, int] = {}  # id of an open code's node -> its index
    for k, code in enumerate(codes):
        places.append(point(code.boundary, code.before_space()))
        if code.kind == "open":
            opened[id(code.node)] = k
        elif code.kind == "close" and aligned is not None:
            start = opened.pop(id(code.node))
            inside = set().union(*aligned[codes[start].boundary : code.boundary])
            if inside:
                places[start], places[k] = min(inside), max(inside) + 1
            elif codes[start].boundary == code.boundary:  # it wraps no token (codes alone): it stays whole
                places[k] = places[start]
    return places


def in_order(values: list[float], weights: list[float] | None = None) -> list[float]:
    """The non-decreasing sequence nearest to values in weighted squared distance (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values, weights or [1.0] * len(values)):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (a, i, k), (b, j, n) = blocks.pop(-2), blocks.pop()
            blocks.append([(a * i + b * j) / (i + j), i + j, k + n])
    return [mean for mean, _, count in blocks for _ in range(count)]


def place(flat: Flattened, translation: str, aligned: list[set[int]] | None) -> list[int]:
    """The target token boundary (0..m) of each code, in order. A point the source set apart by a space
    goes to the nearest boundary where the translation has a space, an end, or punctuation that closes
    (never inside a hyphenated word: cold-s)."""
    spans = [m.span() for m in TOKEN.finditer(translation)]
    m = len(spans)
    wanted = wanted_places(flat.codes, flat.tokens, m, aligned)
    free = [0, *(b for b in range(1, m) if spans[b - 1][1] < spans[b][0] or translation[spans[b][0]] in CLOSING), m]
    for k, code in enumerate(flat.codes):
        if code.kind == "point" and (code.space_before or code.space_after):
            wanted[k] = min(free, key=lambda b, w=wanted[k]: (abs(b - w), -b))
    weights = [WRAPPING_WEIGHT if code.kind != "point" else 1.0 for code in flat.codes]
    return [min(m, max(0, round(p))) for p in in_order(wanted, weights)]


def arranged(flat: Flattened, translation: str, places: list[int]) -> Iterator[str | Code]:
    """The translation's text and the codes at their places, in writing order: closing codes, and points
    that stuck to the text before them, before the space at their place; the others after it, with the
    space the source had on their far side from the gap (where the translation has none there, before one);
    a point the source set apart by a space on one side is set apart from a word it meets on the other, unless
    it was written against a word there.
    The source's leading and trailing whitespace (a segment's space before the next) comes first and last."""
    spans = [m.span() for m in TOKEN.finditer(translation)]
    last = flat.lead[-1:]  # the last character written, for the spaces around points

    def text(piece: str) -> Iterator[str]:
        nonlocal last
        if piece:
            last = piece[-1]
            yield piece

    yield from text(flat.lead)
    k = 0
    for boundary in range(len(spans) + 1):
        here = []
        while k < len(places) and places[k] == boundary:
            here.append(flat.codes[k])
            k += 1
        before = 0  # the codes that go before the space
        while before < len(here) and here[before].before_space():
            before += 1
        for code in here[:before]:
            last = CODE_END if code.kind == "point" else last  # a wrapping code is no neighbour for spacing
            yield code
        if 0 < boundary < len(spans):
            yield from text(translation[spans[boundary - 1][1] : spans[boundary][0]])  # the space between, or none
        space = False  # a space owed after a point: after the codes closing right after it (<g>url</g> word)
        for code in here[before:]:
            if space and code.kind != "close":
                yield from text(" ")
                space = False
            point = code.kind == "point"
            apart = point and (code.space_before or code.space_after)  # kept apart from a word it now meets
            meets = apart and last.isalnum() and not code.word_before
            if boundary > 0 and not last.isspace() and (point and code.space_before or meets):
                yield from text(" ")
            last = CODE_END if point else last
            yield code
            following = translation[spans[boundary][0]] if boundary < len(spans) else ""
            meets = apart and following.isalnum() and not code.word_after
            space = space or point and code.space_after and following and following not in CLOSING or meets
        if space:
            yield from text(" ")
        if boundary < len(spans):
            yield from text(translation[slice(*spans[boundary])])
    yield from text(flat.trail)


def render(target: Node, flat: Flattened, translation: str, places: list[int]) -> None:
    """Fill the empty element target with the translation and the codes at their places (arranged)."""
    doc = target.ownerDocument
    open_elements = [target]
    for item in arranged(flat, translation, places):
        if isinstance(item, str):
            open_elements[-1].appendChild(doc.createTextNode(item))
        elif item.kind == "close":
            open_elements.pop()
        elif item.kind == "open":
            open_elements.append(open_elements[-1].appendChild(item.node.cloneNode(False)))
        else:
            open_elements[-1].appendChild(item.node.cloneNode(True))
    target.normalize()  # adjacent text nodes joined


def alignment_layer(translator) -> int | None:
    """The decoder layer whose cross-attention places codes: the one before the last, which placed them best
    of the last three on Multi30k in both directions (docs/benchmarks.md); None where the translator gives no
    attention (the CTranslate2 engine, an ensemble, minimum Bayes risk)."""
    model = getattr(translator, "model", None)  # the torch engine's; CTranslate2 exports no attention
    if translator.settings.mbr or not hasattr(model, "attention_maps"):
        return None
    layers, _ = translator.model.attention_maps()
    return -2 if layers > 1 else -1
