"""Office documents: `translate -i bericht.docx -o report.docx` (Word), `-i folien.pptx -o slides.pptx`
(PowerPoint), `-i tabelle.xlsx -o table.xlsx` (Excel) translate the text and keep its formatting.

An Office file is a zip of XML parts, its text in paragraphs of runs, each run's formatting in its own
properties: Word's <w:p> of <w:r> (<w:rPr>, <w:t>) in word/document.xml, the headers, footers and notes;
PowerPoint's <a:p> of <a:r> (<a:rPr>, <a:t>) in the slides and their speaker notes, and in any of the
three the charts' titles and SmartArt diagrams' text; Excel's shared strings (<si> of <r>, <rPr>, <t>: every
text a cell shows). Each paragraph is a segment: the formatting most of its
text has is the paragraph's own, any other run's formatting wraps its text as a tag (<w-1>fett</w-1>), a
hyperlink wraps what it links, and what is not text (a tab, a line break, a picture, a field, a bookmark)
stands as a point (<w-2/>). The translation's tags become runs again, marked with the target language
(mt/data/office_language.py). Everything else is written back as it was: the other parts, in their order and
compression, a paragraph's properties, a paragraph without words.
"""

from __future__ import annotations

import html
import io
import os
import re
import zipfile
from dataclasses import dataclass

from mt.data.lines import document_bytes, write_document_bytes
from mt.data.office_language import marked_drawing, marked_open, marked_word
from mt.data.office_markup import CHART_TITLE, DRAWING, EXCEL, OPEN_CHART, WORD, Markup, office_markup
from mt.data.paragraph_spans import TOKEN, paragraph_spans, rendered, tag_name
from mt.errors import MTError

TAG = re.compile(r"<(/?)w-(\d+)(/?)>")
FIELD_MARK = re.compile(r'w:fldCharType="(begin|end)"')  # Word's fields: begin ... end, over several runs
SPACE_COUNT = re.compile(r'\bc="(\d+)"')  # OpenDocument's <text:s text:c="3"/>: three spaces
# a tab or a line break: between two words, a space to the model
SEPARATOR = re.compile(r"<\w+:(?:tab|br|cr|line-break)\b")


@dataclass
class Element:
    """An element of a paragraph's XML: its name, start tag, what it holds, and its end tag ("" if empty)."""

    name: str
    start: str
    inner: str = ""
    end: str = ""

    @property
    def xml(self) -> str:
        return self.start + self.inner + self.end


def elements(xml: str, text_too: bool = False) -> list[Element]:
    """The elements at the top level of xml, in order (the text between them dropped, or with text_too kept
    as elements named "")."""
    found, depth, start, inner_at = [], 0, "", 0
    for token in TOKEN.finditer(xml):
        text = token.group()
        if not text.startswith("<") or text.startswith(("<?", "<!")):
            if text_too and depth == 0 and not text.startswith("<"):
                found.append(Element("", text))
            continue
        if text.startswith("</"):
            depth -= 1
            if depth == 0:
                found.append(Element(tag_name(start), start, xml[inner_at : token.start()], text))
        elif text.endswith("/>"):
            if depth == 0:
                found.append(Element(tag_name(text), text))
        else:
            if depth == 0:
                start, inner_at = text, token.end()
            depth += 1
    return found


@dataclass
class Code:
    """What a tag of a segment stands for: formatting (a run's <w:rPr>), a wrapper (its start and end
    tags) or a point (its XML, written as it was)."""

    kind: str  # format, wrapper, point
    xml: str = ""
    end: str = ""
    separator: bool = False  # a point that parts words (a tab, a line break): a space after it in the segment


@dataclass
class Paragraph:
    """A paragraph read into a segment: what stays before and after its text, its formatting, its codes."""

    markup: Markup
    head: str  # its start tag, its properties, and any points before the text
    tail: str  # points after the text
    base: str  # the formatting of most of its text (run properties, or "")
    segment: str
    codes: dict[int, Code]


def read_paragraph(markup: Markup, start: str, inner: str) -> Paragraph | None:
    """The paragraph of this start tag and content as a segment; None where it holds no word."""
    children = elements(inner, markup.inline_text)
    properties = bool(children and markup.properties) and children[0].name == markup.properties  # its style: kept
    head = start + (children[0].xml if properties else "")
    # ("text", properties, text), ("point", xml), ("open", start tag, end tag), ("close", end tag)
    atoms = atoms_of(markup, children[properties:])
    texts = [a for a in atoms if a[0] == "text" and a[2].strip()]
    if not any(ch.isalpha() for a in texts for ch in a[2]):
        return None
    first = next(i for i, a in enumerate(atoms) if a[0] != "point")
    last = max(i for i, a in enumerate(atoms) if a[0] != "point")
    head += "".join(a[1] for a in atoms[:first])
    tail = "".join(a[1] for a in atoms[last + 1 :])
    weight: dict[str, int] = {}
    for a in texts:
        weight[a[1]] = weight.get(a[1], 0) + len(a[2])
    base = max(weight, key=weight.get)
    return Paragraph(markup, head, tail, base, *tagged(atoms[first : last + 1], base))


def tagged(atoms: list[tuple], base: str) -> tuple[str, dict[int, Code]]:
    """The atoms as a segment: text, formatting other than base as tags around it, wrappers as tags, points
    as tags of their own; and what each tag stands for."""
    parts, codes, opened, previous = [], {}, [], None  # opened: wrapper codes open, innermost last
    for atom in atoms:
        if previous is not None and (atom[0] != "text" or atom[1] != previous[1]):
            parts.append(f"</w-{previous[0]}>")
            previous = None
        n = len(codes) + 1
        if atom[0] == "text":
            if atom[1] != base and previous is None:
                codes[n] = Code("format", atom[1])
                parts.append(f"<w-{n}>")
                previous = (n, atom[1])
            parts.append(" ".join(html.unescape(atom[2]).splitlines()))  # a line break in XML text: a space
        elif atom[0] == "point":
            codes[n] = Code("point", atom[1], separator=bool(SEPARATOR.search(atom[1])))
            parts.append(f"<w-{n}/>" + (" " if codes[n].separator else ""))
        elif atom[0] == "open":
            codes[n] = Code("wrapper", atom[1], atom[2])
            parts.append(f"<w-{n}>")
            opened.append(n)
        elif opened:
            parts.append(f"</w-{opened.pop()}>")
    if previous is not None:
        parts.append(f"</w-{previous[0]}>")
    return "".join(parts + [f"</w-{n}>" for n in reversed(opened)]), codes


def paragraph_atoms(markup: Markup, element: Element) -> list[tuple]:
    """What an element of a paragraph holds, as text with its formatting, points and wrappers."""
    if element.name in markup.dropped:
        return []
    if element.name == "":  # text in the paragraph itself (OpenDocument)
        return [("text", "", element.start)]
    if element.name == markup.spaces:
        count = SPACE_COUNT.search(element.start)
        return [("text", "", " " * (int(count[1]) if count else 1))]
    if element.name == markup.run:
        return run_atoms(markup, element)
    if element.name == markup.text and markup.bare_text:
        return [("text", "", element.inner)]
    if element.name in markup.wrappers and element.end:
        inner = atoms_of(markup, elements(element.inner, markup.inline_text))
        return [("open", element.start, element.end), *inner, ("close", element.end)]
    if element.name == markup.control[0] and element.end:
        return control_atoms(markup, element)
    return [("point", element.xml)]


def control_atoms(markup: Markup, control: Element) -> list[tuple]:
    """A content control in a paragraph (Word's <w:sdt>) as a wrapper: what its content shows is translated,
    its properties go with its start tag. Without content it is a point, written as it was."""
    children = elements(control.inner)
    at = next((i for i, child in enumerate(children) if child.name == markup.control[1] and child.end), None)
    if at is None:
        return [("point", control.xml)]
    content = children[at]
    start = control.start + "".join(child.xml for child in children[:at]) + content.start
    end = content.end + "".join(child.xml for child in children[at + 1 :]) + control.end
    inner = atoms_of(markup, elements(content.inner, markup.inline_text))
    return [("open", start, end), *inner, ("close", end)]


def run_atoms(markup: Markup, run: Element) -> list[tuple]:
    """A run's text, with its formatting; what else it holds (a tab, a break, a picture) as points."""
    children = [child for child in elements(run.inner) if child.name not in markup.dropped]
    formatting = next((child.xml for child in children if child.name == markup.run_properties), "")
    atoms = []
    for child in children:
        if child.name == markup.text:
            atoms.append(("text", formatting, child.inner))
        elif child.name != markup.run_properties:
            atoms.append(("point", f"{run.start}{formatting}{child.xml}{run.end}"))
    return atoms


def atoms_of(markup: Markup, children: list[Element]) -> list[tuple]:
    """What a paragraph's (or a wrapper's) elements hold, as text with its formatting, points and wrappers;
    a Word field (from the run that begins it to the run that ends it: its code and what it shows) is one
    point, written as it was, so that its parts stay in order; what it shows is not translated."""
    atoms, field, depth = [], [], 0
    for element in children:
        marks = FIELD_MARK.findall(element.xml) if markup.run and element.name == markup.run else []
        if not depth and "begin" not in marks:
            atoms += paragraph_atoms(markup, element)
            continue
        field.append(element.xml)
        depth += marks.count("begin") - marks.count("end")
        if depth <= 0:
            atoms.append(("point", "".join(field)))
            field, depth = [], 0
    return atoms + ([("point", "".join(field))] if field else [])  # a field not ended here: as it was


def written_paragraph(paragraph: Paragraph, translation: str) -> str:
    """The paragraph with the translation in place of its text, its tags runs again, and the spaces its text
    had at its ends (before a page number); the space after a tab or a line break is the segment's, not the
    document's. A tag the translation lost or closed out of turn cannot unbalance the XML: wrappers are
    closed in order, and a point never written is written at the end."""
    segment, markup = paragraph.segment, paragraph.markup
    translation = segment[: len(segment) - len(segment.lstrip())] + translation.strip()
    translation += segment[len(segment.rstrip()) :]
    end = f"</{tag_name(paragraph.head)}>"
    if markup.bare_text and not paragraph.codes and not paragraph.base:  # text alone, as it stood
        return f"{paragraph.head}{text_element(markup, translation)}{paragraph.tail}{end}"
    parts, stack, written = [paragraph.head], [], set()
    tags, wrote = list(TAG.finditer(translation)), False
    for k, tag in enumerate([*tags, None]):
        text = translation[tags[k - 1].end() if k else 0 : tag.start() if tag else len(translation)]
        if k and separates(paragraph, tags[k - 1]):
            text = text.removeprefix(" ")  # the segment's space after a tab or a line break
        if text:
            formats = [paragraph.codes[n].xml for n in stack if paragraph.codes[n].kind == "format"]
            rpr = formats[-1] if formats else paragraph.base
            run, wrote = text_element(markup, text, first=not wrote), True
            parts.append(run if markup.inline_text else f"<{markup.run}>{rpr}{run}</{markup.run}>")
        if tag is None:
            break
        n = int(tag.group(2))
        code = paragraph.codes.get(n)
        if code is None or n in written and code.kind == "point":
            continue
        if code.kind == "point":
            parts.append(code.xml)
            written.add(n)
        elif tag.group(1) == "" and n not in stack:
            stack.append(n)
            parts.append(code.xml if code.kind == "wrapper" else "")
        elif tag.group(1) and n in stack:
            while stack:
                top = stack.pop()
                parts.append(paragraph.codes[top].end)
                if top == n:
                    break
    parts += [paragraph.codes[n].end for n in reversed(stack)]
    parts += [code.xml for n, code in paragraph.codes.items() if code.kind == "point" and n not in written]
    return "".join(parts) + paragraph.tail + end


def separates(paragraph: Paragraph, tag: re.Match) -> bool:
    """Whether the tag stands for a tab or a line break."""
    code = paragraph.codes.get(int(tag.group(2)))
    return code is not None and code.separator


def text_element(markup: Markup, text: str, first: bool = False) -> str:
    """Text as its format's text element holds it, its spaces kept: in OpenDocument, where text stands alone
    and spaces collapse, a space after another is its spaces element, and so are those that start a paragraph
    (first: the paragraph's first text)."""
    escaped = html.escape(text, quote=False)
    if not markup.inline_text:
        return f"<{markup.text}{markup.space}>{escaped}</{markup.text}>"
    lead = len(escaped) - len(escaped.lstrip(" ")) if first else 0
    body = re.sub(r"  +", lambda m: " " + spaces_element(markup, len(m[0]) - 1), escaped[lead:])
    return spaces_element(markup, lead) + body


def spaces_element(markup: Markup, count: int) -> str:
    """OpenDocument's element for count spaces (<text:s/>, <text:s text:c="3"/>)."""
    return "" if not count else f"<{markup.spaces}/>" if count == 1 else f'<{markup.spaces} text:c="{count}"/>'


class OfficeDocument:
    """An Office file read whole: its paragraphs as segments, and written back with their translations."""

    def __init__(self, path: str | os.PathLike, data: bytes | None = None, markup: Markup | None = None):
        self.path = str(path)
        self.data = document_bytes(path, data)
        self.markup = markup or office_markup(self.path) or WORD
        kind, suffix, legacy = self.markup.name, self.markup.suffix, self.markup.legacy
        try:
            with zipfile.ZipFile(io.BytesIO(self.data)) as archive:
                found = archive.namelist()
                names = [name for name in found if self.markup.parts.fullmatch(name) or self.beside(name)]
                parts = {name: archive.read(name).decode("utf-8") for name in names}
                self.parts = {
                    name: xml
                    for name, xml in parts.items()
                    if self.beside(name) is not OPEN_CHART or "<office:chart" in xml  # of its objects, the charts
                }
        except zipfile.BadZipFile:
            raise MTError(
                f"{self.path}: not {self.markup.article} {kind} file (a {suffix} is a zip; save a {legacy} as {suffix})"
            ) from None
        except UnicodeDecodeError as err:
            raise MTError(f"{self.path}: a part of it is not UTF-8 ({err.reason})") from None
        if self.markup.main not in found:
            raise MTError(f"{self.path}: not {self.markup.article} {kind} file: it holds no {self.markup.main}")
        self.paragraphs: list[tuple[str, int, int, Paragraph]] = []  # part, start, end, paragraph
        for name, xml in self.parts.items():
            markup = self.beside(name) or self.markup
            titles = [m.span() for m in CHART_TITLE.finditer(xml)] if markup is OPEN_CHART else None
            for start, end, tag, inner in paragraph_spans(markup, xml):
                if titles is not None and not any(a <= start < b for a, b in titles):
                    continue  # a chart's data
                paragraph = read_paragraph(markup, tag, inner)
                if paragraph is not None:
                    self.paragraphs.append((name, start, end, paragraph))
        self.segments = [paragraph.segment for *_, paragraph in self.paragraphs]
        self.translations: dict[int, str] = {}  # a segment's index -> its translation, tags and all
        self.language = ""  # the target language, that translated text is marked with (set by the caller)

    def beside(self, name: str) -> Markup | None:
        """The markup of a part with text beside the document's own: a chart or a SmartArt diagram of an Office
        Open XML file (DrawingML paragraphs), an object of an OpenDocument file (a chart's titles); else None."""
        markup = OPEN_CHART if self.markup.inline_text else DRAWING
        return markup if markup.parts.fullmatch(name) else None

    def marked(self, xml: str, markup: Markup | None = None) -> str:
        """Translated XML (of markup's format: by default the document's) marked with the target language for
        spelling checks (mt/data/office_language.py)."""
        markup = markup or self.markup
        if not self.language or markup is EXCEL or not self.translations:  # a cell's text names no language
            return xml
        if markup.inline_text:  # OpenDocument: the styles name the language
            return marked_open(xml, self.language)
        return (marked_word if markup is WORD else marked_drawing)(xml, self.language)

    def written_paragraph(self, span: tuple) -> str:
        """A translated paragraph as written back, marked with the target language (OpenDocument: its styles)."""
        i = span[2]
        paragraph = self.paragraphs[i][3]
        written = written_paragraph(paragraph, self.translations[i])
        return written if self.markup.inline_text else self.marked(written, paragraph.markup)

    def output(self) -> bytes:
        """The document with each translated paragraph in place of its own, marked with the target language
        (and Word's styles), every other byte of the parts as it was."""
        written = {}
        for name, xml in self.parts.items():
            spans = [(start, end, i) for i, (part, start, end, _) in enumerate(self.paragraphs) if part == name]
            spans = [span for span in spans if span[2] in self.translations]
            text = rendered(xml, spans, self.written_paragraph)
            written[name] = (self.marked(text) if self.markup.inline_text else text).encode("utf-8")
        buffer = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(self.data)) as source, zipfile.ZipFile(buffer, "w") as target:
            defaults = self.markup.defaults
            if self.translations and defaults in source.namelist() and defaults not in written:
                written[defaults] = self.marked(source.read(defaults).decode("utf-8")).encode("utf-8")
            for info in source.infolist():
                target.writestr(info, written.get(info.filename) or source.read(info))
        return buffer.getvalue()

    def write(self, path: str) -> None:
        """The translated document, to path (written aside, then renamed: a whole document or none)."""
        write_document_bytes(path, self.output())
