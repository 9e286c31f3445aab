"""HTML pages: `translate -i page.html -o page.en.html` translates their text and keeps their markup.

A page is cut into segments at block elements (<p>, <li>, <h1>, <td>, <div>, <title>, ...): a segment is
the text between two of them, with its inline elements (<b>, <a href="...">, <br>, ...), which the
translation keeps around the words they wrapped (protected spans, mt/decoding/protected_spans.py). What
holds no text to translate is left as it is: <script>, <style>, <pre>, <textarea>, <svg>, <math>,
<template>, and any element marked translate="no" or with the class notranslate, as HTML and web
translators agree; inline code (<code>, <kbd>, ...) is copied within its sentence, and so is an <svg> holding
no text (an icon among words). The text of alt, title, placeholder and aria-label attributes is translated
too, and a <meta> description's. The page is written
back as it was read, each segment and attribute value replaced by its translation, and <html lang> (and
XHTML's xml:lang) set to the target language.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mt.data.lines import decode_utf8, document_bytes, write_document
from mt.data.tmx import same_language
from mt.errors import MTError

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
# A tag, its attribute values quoted or not; a comment; a declaration (<!DOCTYPE ...>) or processing instruction.
TOKEN = re.compile(
    r"<!--.*?-->|<![^>]*>|<\?.*?\?>"
    r"|<(/?)([A-Za-z][\w:.-]*)((?:\s+[^\s\"'>/=]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?)*)\s*/?>",
    re.DOTALL,
)
BLOCKS = frozenset(
    """address article aside blockquote body caption center dd details dialog div dl dt fieldset
    figcaption figure footer form br h1 h2 h3 h4 h5 h6 head header hgroup hr html legend li main menu nav ol
    optgroup option p section summary table tbody td tfoot th thead title tr ul select button label meta link
    iframe video audio canvas object noscript""".split()
)
VOID_TAGS = frozenset("area base br col embed hr img input link meta source track wbr".split())  # never closed
SVG_END = re.compile(r"</svg\s*>", re.IGNORECASE)
SKIPPED = frozenset("script style pre textarea svg math template".split())  # their content is not text to translate
NO_TRANSLATE = re.compile(r"""\btranslate\s*=\s*["']?no\b|\bclass\s*=\s*["'][^"']*\bnotranslate\b""", re.IGNORECASE)
LANG = re.compile(r"""(\blang\s*=\s*)(["']?)([\w-]*)\2""", re.IGNORECASE)
CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.-]+)""", re.IGNORECASE)
# Attribute text a reader sees (an image's description, a tooltip, a field's hint), translated too.
ATTRIBUTE = re.compile(r"""\s(?:alt|title|placeholder|aria-label)\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
# and a page's description, as search engines and link previews show it
DESCRIBING = re.compile(
    r"""<meta\s[^>]*\b(?:name|property)\s*=\s*["']?(?:description|og:title|og:description)\b""", re.I
)
CONTENT = re.compile(r"""\scontent\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
KEPT_ENTITIES = re.compile(r"&(?:lt|gt);")  # left as they are: read, they would look like markup
HTML_SPACE = re.compile(r"[ \t\n\r\f]+")  # what a browser shows as one space (a no-break space it keeps)
NBSP = "\u00a0"


def textless(text: str, at: int) -> bool:
    """Whether the <svg> element whose start tag ends at `at` holds no text (an icon, not a diagram)."""
    end = SVG_END.search(text, at)
    return end is not None and not re.sub(r"<[^>]*>", "", text[at : end.start()]).strip()


def is_html_name(path: str | None) -> bool:
    """Whether a file named so is an HTML page (.html, .htm, .xhtml)."""
    return bool(path) and Path(path).name.lower().endswith(HTML_SUFFIXES)


@dataclass
class Segment:
    """A run of text and inline elements between two block elements: where it stands in the page, and
    what the translator reads (its text's character references read, its tags as they are)."""

    start: int
    end: int
    source: str
    lead: str = ""  # the whitespace before and after it in the page, kept around its translation
    trail: str = ""


@dataclass
class Attribute:
    """An attribute value to translate: its tag's place in the page, its value's place in the tag, and
    what the translator reads (references read, whitespace runs one space)."""

    tag_start: int
    tag_end: int
    value_start: int  # in the tag
    value_end: int
    source: str


class HtmlPage:
    """An HTML page read whole, its segments to translate, and written back with their translations."""

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = str(path)
        raw = document_bytes(path, data)
        declared = CHARSET.search(raw[:4096])
        if declared and declared.group(1).decode("ascii", "replace").replace("_", "-").lower() not in ("utf-8", "utf8"):
            raise MTError(f"{path}: its charset is {declared.group(1).decode()}; save it as UTF-8 first")
        self.text = decode_utf8(raw.removeprefix(b"\xef\xbb\xbf"), self.path)
        self.bom = raw.startswith(b"\xef\xbb\xbf")
        self.xhtml = self.text.lstrip().startswith("<?xml")  # XML: no &nbsp; without a DTD naming it
        self.attributes: list[Attribute] = []  # found with the segments
        self.segments = self._segments()
        self.translations: dict[int, str] = {}  # a segment's index -> its translation
        self.attribute_translations: dict[int, str] = {}  # an attribute's index -> its translation
        self.target_language = ""  # written into <html lang> (check_language sets it)

    def _segments(self) -> list[Segment]:
        """The page's segments in order: the runs of text, inline elements and comments between block
        elements and declarations, outside the elements whose content is left as it is."""
        text, found, skipping, at = self.text, [], [], 0
        start = None  # where the segment being gathered began
        icons = 0  # <svg> elements open that hold no text: pictures among a sentence's words, as <img> is

        def close(end: int) -> None:
            nonlocal start
            if start is not None:
                found.append(self._segment(start, end))
                start = None

        for match in TOKEN.finditer(text):
            if not skipping and start is None and text[at : match.start()].strip():
                start = at
            at = match.end()
            closing, name = match.group(1) == "/", (match.group(2) or "").lower()
            if skipping:  # only the element being skipped, and the same nested in it, count
                if name == skipping[-1]:
                    skipping.pop() if closing else skipping.append(name)
            elif not name:  # a declaration ends a segment; a comment within one stays there, as a tag does
                if not match.group(0).startswith("<!--"):
                    close(match.start())
            elif name == "svg" and (icons if closing else match.group(0).endswith("/>") or textless(text, at)):
                icons += (-1 if closing else 1) if not match.group(0).endswith("/>") else 0
                start = match.start() if start is None else start
            elif name in BLOCKS or name in SKIPPED:
                close(match.start())
                marked = name in SKIPPED or NO_TRANSLATE.search(match.group(0))
                if not closing and marked and name not in VOID_TAGS and not match.group(0).endswith("/>"):
                    skipping.append(name)
            elif start is None:  # an inline element begins the segment (one marked translate="no" is copied)
                start = match.start()
            if name and not skipping and not closing and not NO_TRANSLATE.search(match.group(0)):
                self.attributes += attributes_of(match.group(0), match.start())
        if not skipping and start is None and text[at:].strip():
            start = at
        if not skipping:
            close(len(text))
        return [segment for segment in found if segment is not None]

    def _segment(self, start: int, end: int) -> Segment | None:
        """The page's text from start to end as a segment, None where it has no word outside its tags. Its
        text's whitespace runs are one space each (as a browser shows them); the segment's own leading and
        trailing whitespace stays around its translation."""
        parts, at = [], start
        for match in TOKEN.finditer(self.text, start, end):
            parts += [self.text[at : match.start()], match.group(0)]
            at = match.end()
        parts.append(self.text[at:end])
        words = "".join(parts[::2])
        if not any(char.isalpha() for char in words):
            return None
        raw = "".join(part if i % 2 else HTML_SPACE.sub(" ", read_references(part)) for i, part in enumerate(parts))
        whole = self.text[start:end]
        lead, trail = whole[: len(whole) - len(whole.lstrip())], whole[len(whole.rstrip()) :]
        return Segment(start, end, raw.strip(" "), lead, trail)

    def check_language(self, src_lang, tgt_lang) -> None:
        """A one-line error where <html lang> names another language than the model's source; the target
        language (a str: the model's one, or the one chosen) written into it."""
        html_tag = re.search(r"<html\b[^>]*>", self.text, re.IGNORECASE)
        lang = LANG.search(html_tag.group(0)) if html_tag else None
        if lang and lang.group(3) and isinstance(src_lang, str) and src_lang:
            if not same_language(lang.group(3), src_lang):
                raise MTError(f"{self.path}: its language is {lang.group(3)}; the model translates from {src_lang}")
        self.target_language = tgt_lang if isinstance(tgt_lang, str) else ""

    def output(self) -> str:
        """The page with each translated segment and attribute replaced, and <html lang> naming the target
        language. A tag inside a segment is copied into its translation as it was: its translated attributes
        are written there."""
        tags: dict[tuple[int, int], str] = {}  # a tag's place -> the tag with its attributes translated
        last_first = sorted(enumerate(self.attributes), key=lambda found: -found[1].value_start)
        for i, attribute in last_first:  # a tag's later values first: an earlier one's offsets then still hold
            if i in self.attribute_translations:
                where = attribute.tag_start, attribute.tag_end
                tag = tags.get(where, self.text[slice(*where)])
                value = html.escape(self.attribute_translations[i], quote=True)
                tags[where] = tag[: attribute.value_start] + value + tag[attribute.value_end :]
        changes = []  # (start, end, new text), in the page's order
        for i, segment in enumerate(self.segments):
            inside = {where: tag for where, tag in tags.items() if segment.start <= where[0] < segment.end}
            if i in self.translations or inside:
                translation = self.translations.get(i, self.text[segment.start : segment.end].strip())
                translation = (
                    with_no_break_spaces(segment.source, translation) if i in self.translations else translation
                )
                for (start, end), tag in inside.items():
                    translation = translation.replace(self.text[start:end], tag)
                    del tags[start, end]
                text = escape_text(translation, self.xhtml)
                changes.append((segment.start, segment.end, segment.lead + text + segment.trail))
        changes += [(start, end, tag) for (start, end), tag in tags.items()]
        parts, at = [], 0
        for start, end, new in sorted(changes):
            parts += [self.text[at:start], new]
            at = end
        page = "".join(parts) + self.text[at:]
        if self.target_language:
            page = re.sub(
                r"<html\b[^>]*>",
                lambda m: LANG.sub(lambda n: f"{n.group(1)}{n.group(2)}{self.target_language}{n.group(2)}", m[0]),
                page,
                count=1,
                flags=re.IGNORECASE,
            )
        return ("\ufeff" if self.bom else "") + page

    def write(self, path: str | None, out=None) -> None:
        write_document(path, self.output(), out)


def attributes_of(tag: str, tag_start: int) -> list[Attribute]:
    """A tag's attribute values to translate (alt, title, ..., a describing <meta>'s content): those holding a
    word."""
    found = []
    for match in [*ATTRIBUTE.finditer(tag), *(CONTENT.finditer(tag) if DESCRIBING.match(tag) else [])]:
        group = 1 if match.group(1) is not None else 2
        value = " ".join(html.unescape(match.group(group)).split())
        if any(char.isalpha() for char in value):
            found.append(Attribute(tag_start, tag_start + len(tag), match.start(group), match.end(group), value))
    return found


def read_references(text: str) -> str:
    """Text with its character references read (&amp; &nbsp; &uuml; &#233;), but &lt; and &gt; kept."""
    kept = KEPT_ENTITIES.split(text)
    marks = KEPT_ENTITIES.findall(text)
    return "".join(html.unescape(part) + (marks[i] if i < len(marks) else "") for i, part in enumerate(kept))


def escape_text(text: str, xhtml: bool = False) -> str:
    """A translation as page text: an ampersand that begins no reference written &amp;, a no-break space
    &nbsp; (in XHTML &#160;, which XML knows without a DTD)."""
    return re.sub(r"&(?!#?\w+;)", "&amp;", text).replace(NBSP, "&#160;" if xhtml else "&nbsp;")


def with_no_break_spaces(source: str, translation: str) -> str:
    """The translation with the source's no-break spaces where it keeps what they joined (10&nbsp;km, Dr.&nbsp;Rossi
    as "10 km", "Dr. Rossi": the model reads and writes them as spaces), and at its ends where the source
    had them there."""
    if NBSP not in source:
        return translation
    for joined in re.finditer(rf"(\S+){NBSP}(?=(\S+))", source):
        translation = translation.replace(
            f"{joined.group(1)} {joined.group(2)}", f"{joined.group(1)}{NBSP}{joined.group(2)}"
        )
    lead, trail = source[: len(source) - len(source.lstrip(NBSP))], source[len(source.rstrip(NBSP)) :]
    return lead + translation.strip(NBSP) + trail
