"""XLIFF documents: the files CAT tools (Trados, memoQ, Phrase, OmegaT, Okapi, ...) hand a document over in
for translation, and take it back from. `translate -i doc.xlf -o doc.de.xlf` fills in their targets.

XLIFF 1.2 (and 1.1): each <trans-unit> is a segment, or, where it has a <seg-source>, each <mrk
mtype="seg"> in it is one and the target mirrors it. XLIFF 2.x: each <segment> of a <unit>. A segment is
translated unless it is marked translate="no" (on it or a group or file around it) or its target already
holds text (a translator's work is kept; in 1.2, a target whose state is "new" or "needs-translation" is
translated anew). Inline codes wrapping text (<g>, <mrk>, <pc>) are translated with it; the others (<x/>,
<ph>, <bpt>, <sc/>, ...) are copied whole (mt/decoding/inline_tags.py places both). A new 1.2 target is
marked state="needs-review-translation" state-qualifier="mt-suggestion" (machine translation, for review);
in a Trados .sdlxliff, the segment's <sdl:seg> gets conf="Draft" origin="mt", as Trados marks its own.

The rest of the document is written back as it was read: other elements, attributes, comments and
namespace prefixes (as the XML parser reads them: entities expanded, attribute quoting normalised).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.dom import Node, minidom
from xml.parsers.expat import ExpatError

from mt.data.lines import write_document
from mt.data.tmx import same_language
from mt.errors import MTError

XLIFF_SUFFIXES = (".xlf", ".xliff", ".sdlxliff", ".mqxliff")
WRAPS_TEXT = {"g", "mrk", "pc"}  # inline elements whose content is text to translate
TO_TRANSLATE_AGAIN = {"new", "needs-translation"}  # 1.2 target states that hold no translation yet
XML_NS = "http://www.w3.org/XML/1998/namespace"
SDL_NS = "http://sdl.com/FileTypes/SdlXliff/1.0"  # Trados Studio's extensions (.sdlxliff)


def is_xliff_name(path: str | None) -> bool:
    """Whether a file named so is an XLIFF document (.xlf, .xliff, Trados' .sdlxliff, memoQ's .mqxliff)."""
    return bool(path) and Path(path).name.lower().endswith(XLIFF_SUFFIXES)


def wraps_text(node: Node) -> bool:
    """Whether an inline element holds text to translate, else it is a code copied whole: a <mrk> marked
    translate="no" (2.x) or mtype="protected" (1.2) keeps its text as it is."""
    if node.localName == "mrk" and (
        node.getAttribute("translate") == "no" or node.getAttribute("mtype") == "protected"
    ):
        return False
    return node.localName in WRAPS_TEXT


@dataclass
class Segment:
    """A source to translate and where its translation goes: fill() empties (or makes) the target element,
    marks it as machine translated, and returns it."""

    source: Node
    fill: Callable[[], Node]
    target_language: str  # as the document names it ("" where it names none)


class Xliff:
    """An XLIFF document read whole, its segments to translate, and written back with their targets."""

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        """The document at path, or (data given) the document data, named path in messages."""
        self.path = str(path)
        try:
            self.doc = minidom.parse(self.path) if data is None else minidom.parseString(data)
        except ExpatError as err:
            reason = err.args[0].split(":")[0]
            raise MTError(f"{path}:{err.lineno}:{err.offset}: not well-formed XML ({reason})") from None
        except OSError as err:
            raise MTError(f"{path}: cannot be read ({err.strerror or err})") from None
        root = self.doc.documentElement
        self.version = root.getAttribute("version")
        if root.localName != "xliff" or self.version[:1] not in ("1", "2"):
            raise MTError(f"{path}: not an XLIFF document (its root is <{root.tagName}>, version {self.version!r})")
        self.ns = root.namespaceURI
        self.kept = self.not_translated = 0  # segments left as they were, for the summary

    def languages(self) -> list[tuple[str, str, Node]]:
        """(source language, target language, element naming them) of each <file> (1.x) or of the document (2.x)."""
        root = self.doc.documentElement
        if self.version.startswith("2"):
            return [(root.getAttribute("srcLang"), root.getAttribute("trgLang"), root)]
        files = self._children(root, "file")
        return [(f.getAttribute("source-language"), f.getAttribute("target-language"), f) for f in files]

    def check_languages(self, src_lang, tgt_lang) -> None:
        """A one-line error where the document is in other languages than the model's (a code it does not name
        passes: a model of several languages checks the target itself); a target language the document
        leaves out is written in."""
        for source, target, element in self.languages():
            if isinstance(src_lang, str) and src_lang and source and not same_language(source, src_lang):
                raise MTError(f"{self.path}: its source language is {source}; the model translates from {src_lang}")
            if isinstance(tgt_lang, str) and tgt_lang and target and not same_language(target, tgt_lang):
                raise MTError(f"{self.path}: its target language is {target}; the model translates into {tgt_lang}")
            if not target and isinstance(tgt_lang, str) and tgt_lang:
                element.setAttribute("trgLang" if self.version.startswith("2") else "target-language", tgt_lang)

    def segments(self) -> list[Segment]:
        """The segments to translate, in document order."""
        self.kept = self.not_translated = 0
        found: list[Segment] = []
        two = self.version.startswith("2")
        for _, target_language, scope in self.languages():
            for unit in scope.getElementsByTagNameNS(self.ns, "unit" if two else "trans-unit"):
                if not self._translatable(unit):
                    self.not_translated += 1
                    continue
                found += self._segments_2(unit, target_language) if two else self._segments_1(unit, target_language)
        return found

    def text(self) -> str:
        """The document as it is now, declared as UTF-8."""
        text = self.doc.toxml(encoding="utf-8").decode("utf-8")
        text = text.replace("?>", "?>\n", 1) if text.startswith("<?xml") else text
        return text + ("" if text.endswith("\n") else "\n")

    def write(self, path: str | None, out=None) -> None:
        """The document as UTF-8, to path (written aside, then renamed: a whole document or none) or to out."""
        write_document(path, self.text(), out)

    def _segments_1(self, unit: Node, target_language: str) -> list[Segment]:
        """A 1.x <trans-unit>'s segments: its <source>, or each <mrk mtype="seg"> of its <seg-source>."""
        source = self._child(unit, "source")
        seg_source = self._child(unit, "seg-source")
        target = self._child(unit, "target")
        if source is None:
            return []
        if seg_source is None or not segment_marks(seg_source):  # not segmented: the source is one segment
            if target is not None and has_text(target) and target.getAttribute("state") not in TO_TRANSLATE_AGAIN:
                self.kept += 1
                return []
            return [Segment(source, lambda: self._new_target_1(unit, target_language), target_language)]
        again = target is not None and target.getAttribute("state") in TO_TRANSLATE_AGAIN
        if target is None or not segment_marks(target) and (again or not has_text(target)):
            # a target mirroring the seg-source, its segments emptied to be filled in below
            target = self._new_target_1(unit, target_language)
            for child in seg_source.childNodes:
                target.appendChild(child.cloneNode(True))
            for mark in segment_marks(target):
                emptied(mark)
        by_mid = {m.getAttribute("mid"): m for m in segment_marks(target)}
        found = []
        for mark in segment_marks(seg_source):
            place = by_mid.get(mark.getAttribute("mid"))
            if place is None or (has_text(place) and not again):
                self.kept += 1
                continue
            found.append(Segment(mark, self._filler_1(unit, target, place), target_language))
        return found

    def _filler_1(self, unit: Node, target: Node, place: Node) -> Callable[[], Node]:
        def fill() -> Node:
            emptied(place)
            mark_machine_translated(target)
            for definition in unit.getElementsByTagNameNS(SDL_NS, "seg"):  # Trados' own record of the segment
                if definition.getAttribute("id") == place.getAttribute("mid"):
                    definition.setAttribute("conf", "Draft")
                    definition.setAttribute("origin", "mt")
            return place

        return fill

    def _new_target_1(self, unit: Node, target_language: str) -> Node:
        """unit's <target>, emptied (or made, after its <source> or <seg-source>), marked as machine
        translation for review."""
        target = self._child(unit, "target")
        if target is None:
            before = self._child(unit, "seg-source")
            before = self._child(unit, "source") if before is None else before
            target = self.doc.createElementNS(self.ns, prefixed(before, "target"))
            if target_language:
                target.setAttributeNS(XML_NS, "xml:lang", target_language)
            insert_after(before, target)
        emptied(target)
        mark_machine_translated(target)
        return target

    def _segments_2(self, unit: Node, target_language: str) -> list[Segment]:
        """A 2.x <unit>'s <segment>s."""
        found = []
        for segment in self._children(unit, "segment"):
            source, target = self._child(segment, "source"), self._child(segment, "target")
            if source is None:
                continue
            if target is not None and has_text(target):
                self.kept += 1
                continue
            found.append(Segment(source, self._filler_2(segment, source), target_language))
        return found

    def _filler_2(self, segment: Node, source: Node) -> Callable[[], Node]:
        def fill() -> Node:
            target = self._child(segment, "target")
            if target is None:
                target = self.doc.createElementNS(self.ns, prefixed(source, "target"))
                insert_after(source, target)
            return emptied(target)

        return fill

    def _translatable(self, unit: Node) -> bool:
        """translate="no" on the unit, or on the nearest group or file around it that says, keeps it as it is."""
        node = unit
        while node is not None and node.nodeType == Node.ELEMENT_NODE:
            if node.hasAttribute("translate"):
                return node.getAttribute("translate") != "no"
            node = node.parentNode
        return True

    def _children(self, element: Node, name: str) -> list[Node]:
        return [c for c in element.childNodes if c.nodeType == Node.ELEMENT_NODE and c.localName == name]

    def _child(self, element: Node, name: str) -> Node | None:
        children = self._children(element, name)
        return children[0] if children else None


def segment_marks(element: Node) -> list[Node]:
    """The <mrk mtype="seg"> elements inside element (at any depth: a <g> may hold them), in order."""
    return [m for m in element.getElementsByTagNameNS("*", "mrk") if m.getAttribute("mtype") == "seg"]


def has_text(element: Node) -> bool:
    """Whether element holds any text other than whitespace (in it or in its children)."""
    if element.nodeType in (Node.TEXT_NODE, Node.CDATA_SECTION_NODE):
        return bool(element.data.strip())
    return any(has_text(child) for child in element.childNodes)


def insert_after(anchor: Node, element: Node) -> None:
    """element put after anchor, on a line of its own where anchor is (indented as it is)."""
    parent, indent = anchor.parentNode, anchor.previousSibling
    parent.insertBefore(element, anchor.nextSibling)
    if indent is not None and indent.nodeType == Node.TEXT_NODE and not indent.data.strip():
        parent.insertBefore(anchor.ownerDocument.createTextNode(indent.data), element)


def emptied(element: Node) -> Node:
    while element.firstChild is not None:
        element.removeChild(element.firstChild)
    return element


def mark_machine_translated(target: Node) -> None:
    target.setAttribute("state", "needs-review-translation")
    target.setAttribute("state-qualifier", "mt-suggestion")


def prefixed(sibling: Node, name: str) -> str:
    """name with the namespace prefix its sibling is written with (xliff:target beside xliff:source)."""
    return f"{sibling.prefix}:{name}" if sibling.prefix else name
