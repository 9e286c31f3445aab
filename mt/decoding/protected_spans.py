"""Spans of a line no model should translate, carried through unchanged: web addresses, e-mail addresses,
markup tags, placeholders ({name}, %(count)d), code in backticks.

A model trained on sentences breaks them (a URL loses its dots, a placeholder gets translated) or drops
them. So the model translates the line without them, and each goes back where its neighbouring words went,
by the model's own alignment, the way an XLIFF document's inline codes do (mt/decoding/inline_tags.py): a
span stands after the translation of the word it sticks to, or before that of the word after it; a tag
pair wraps the translation of the words it wrapped (<b>Speichern</b> gives <b>Save</b>).

    translator.translate("Details unter https://example.com/hilfe.")  # "Details at https://example.com/hilfe."
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from mt.data.html_document import VOID_TAGS
from mt.decoding.inline_tags import Flattened, alignment_layer, arranged, flattened, place, token_alignment
from mt.errors import MTError

# What each kind protects; an earlier kind wins where two match at one place (a URL inside a tag's attribute).
PATTERNS = {
    # <b>, </b>, <br/>, <a href="...">; a comment; &lt; and &gt;, brackets escaped as markup writes them
    "tag": r"</?[A-Za-z][\w:.-]*(?:\s+[^<>]*?)?/?>|<!--[\s\S]*?-->|&(?:lt|gt);",
    # subtitles' codes: an override block ({\an8}, {\i1}), SubStation's \n and \h, WebVTT's <00:01.500>
    "subtitle": r"\{\\[^{}]*\}|\\[nh]|<(?:\d+:)?\d{2}:\d{2}\.\d{3}>",
    "url": r"\b(?:https?://|ftp://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]}'»]",  # the sentence's period stays out
    "email": r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b",
    "code": r"`[^`\n]+`",  # `code`, as Markdown writes it
    # {name} {0} {} {{var}} ${var}; %(name)s and %1$s (Python's and positional printf's)
    "placeholder": r"\{\{[^{}\s]*\}\}|\$?\{[^{}\s]{0,40}\}|%(?:\(\w+\)|\d+\$)[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]",
    # C's %s %d %.2f %ld %%: not protected unless asked, as German writes "100%ig"
    "printf": r"%(?:%|[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t)?[diouxXeEfFgGcsp])",
}
KINDS = tuple(PATTERNS)
DEFAULT = "url,email,tag,placeholder,code"  # decode.protect, translate --protect
TAG_NAME = re.compile(r"</?([A-Za-z][\w:.-]*)")
VERBATIM_TAGS = frozenset("code kbd samp var pre script style".split())  # what they wrap is copied, not translated
NO_TRANSLATE = re.compile(r"""\btranslate\s*=\s*["']?no\b|\bclass\s*=\s*["'][^"']*\bnotranslate\b""", re.IGNORECASE)


def kinds_of(protect: str) -> list[str]:
    """The kinds a protect setting names ("url,email"; "" or "none": none), or a one-line MTError."""
    kinds = [kind.strip() for kind in protect.split(",") if kind.strip() and kind.strip() != "none"]
    for kind in kinds:
        if kind not in PATTERNS:
            raise MTError(f"protect: {kind!r} is not a kind of span (kinds: {', '.join(KINDS)}; none: off)")
    return kinds


def with_kinds(protect: str, *kinds: str) -> str:
    """The protect setting with these kinds added: a document's own markup, never the model's to write."""
    return ",".join(dict.fromkeys([*kinds_of(protect), *kinds]))


@functools.lru_cache(maxsize=16)
def pattern_of(protect: str) -> re.Pattern | None:
    """One pattern finding every kind protect names (None: none)."""
    kinds = kinds_of(protect)
    return re.compile("|".join(f"(?P<{k}>{PATTERNS[k]})" for k in KINDS if k in kinds)) if kinds else None


@dataclass(frozen=True)
class TagPair:
    """A tag and its closing tag, as one wrapping code (its open and close share it)."""

    open: str
    close: str


def flatten_line(line: str, pattern: re.Pattern) -> Flattened | None:
    """The line without its protected spans, each a code at its place; None where it has none. A tag closed
    by the next closing tag of its name, with none left open between, wraps the text between them; one
    around code or marked translate="no" is one span with what it wraps."""
    found = list(pattern.finditer(line))
    if not found:
        return None
    opened: list[int] = []  # indices in found of tags still open
    closer: dict[int, int] = {}  # an opening tag's index -> its closing tag's
    for i, match in enumerate(found):
        if match.lastgroup != "tag" or not TAG_NAME.match(match.group()) or match.group().endswith("/>"):
            continue  # a point: no element (a comment, &lt;), or one closed in itself
        name = TAG_NAME.match(match.group()).group(1).lower()
        if not match.group().startswith("</"):
            opened.extend([i] if name not in VOID_TAGS else [])
        elif opened and TAG_NAME.match(found[opened[-1]].group()).group(1).lower() == name:
            closer[opened.pop()] = i
    pairs = {i: TagPair(found[i].group(), found[j].group()) for i, j in closer.items()}
    pairs.update({j: pairs[i] for i, j in closer.items()})
    raw, marks, at = [], [], 0
    for i, match in enumerate(found):
        if match.start() < at:  # inside a pair copied whole
            continue
        raw.append(line[at : match.start()])
        offset, at = sum(map(len, raw)), match.end()
        inside = line[at : found[closer[i]].start()] if i in closer else ""
        if i in closer and (verbatim(match.group()) or not any(c.isalnum() for c in pattern.sub("", inside))):
            at = found[closer[i]].end()  # <code>, translate="no", or a pair around spans alone: one span
            marks.append((offset, "point", line[match.start() : at]))
        elif i in pairs:
            marks.append((offset, "open" if i in closer else "close", pairs[i]))
        else:
            marks.append((offset, "point", match.group()))
    raw.append(line[at:])
    return flattened("".join(raw), marks)


def verbatim(tag: str) -> bool:
    """Whether an opening tag's content is copied as it is: code (<code>, <kbd>, ...), or marked not to be
    translated (HTML's translate="no", the class notranslate)."""
    return TAG_NAME.match(tag).group(1).lower() in VERBATIM_TAGS or bool(NO_TRANSLATE.search(tag))


def render_line(flat: Flattened, translation: str, places: list[int]) -> str:
    """The translation with the protected spans written back at their places."""
    parts = []
    for item in arranged(flat, translation, places):
        if isinstance(item, str):
            parts.append(item)
        elif item.kind == "point":
            parts.append(item.node)
        else:
            parts.append(item.node.open if item.kind == "open" else item.node.close)
    return "".join(parts)


def decode_protected(decode: Callable, translator, lines: list[str], **options) -> list[list]:
    """decode(lines, **options) (an engine's n-best Translations a line), with the spans
    translator.settings.protect names taken out of each line and written back into its translations. A
    line of spans, numbers and punctuation alone is its own translation. The spans' places come from the
    cross-attention of the best translation (of each line that has spans: a forced pass over it); the
    other n-best translations, and engines without attention, place them by relative position."""
    pattern = pattern_of(translator.settings.protect)
    flats = [flatten_line(line, pattern) for line in lines] if pattern else []
    if not any(flats):
        return decode(lines, **options)
    translator.protected += sum(flat is not None for flat in flats)
    wordless = [flat is not None and not any(char.isalpha() for char in flat.text) for flat in flats]
    todo = ["" if copied else flat.text if flat else line for line, flat, copied in zip(lines, flats, wordless)]
    layer = alignment_layer(translator)
    if layer is not None:
        options.update(attention_layer=layer, attention_lines=[flat is not None for flat in flats])
    found = decode(todo, **options)
    for i, (line, flat, hyps) in enumerate(zip(lines, flats, found)):
        if wordless[i]:
            found[i] = [replace(hyp, text=line, attention=None) for hyp in hyps]
        elif flat is not None:
            found[i] = [replace(hyp, text=protected_text(flat, hyp), attention=None) for hyp in hyps]
    return found


def protected_text(flat: Flattened, hyp) -> str:
    """A translation of flat.text with flat's spans put back, where its attention aligns them (else by
    relative position)."""
    aligned = None
    if hyp.attention is not None:
        aligned = token_alignment(hyp.attention, hyp.src_pieces, hyp.tgt_pieces, flat.text, hyp.text)
    return render_line(flat, hyp.text, place(flat, hyp.text, aligned))
