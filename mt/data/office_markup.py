"""How each Office format writes its text (a Markup): the parts that hold it and the names of its elements.
Word, PowerPoint and Excel (Office Open XML) put text in runs, each with its formatting; OpenDocument (the
format of LibreOffice and OpenOffice: .odt, .odp, .ods) puts it in paragraphs, styled by spans, and a
paragraph may hold others (a footnote, a text box): mt/data/office_document.py reads both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Markup:
    """How one Office format writes its text: which parts hold it, and the names of its elements."""

    name: str  # Word
    suffix: str  # .docx
    legacy: str  # the binary format it replaced, which is not read: .doc
    parts: re.Pattern  # the parts translated
    main: str  # the part every such file has
    paragraph: str  # its element; names with | between them where it has several (Excel's si, is)
    properties: str  # a paragraph's own (its style), first in it; "" where it has none
    run: str
    run_properties: str
    text: str
    wrappers: frozenset = frozenset()  # elements around runs: what they wrap is translated
    control: tuple[str, str] = ("", "")  # an element around runs with its properties first: its name, its content's
    dropped: frozenset = frozenset()  # marks a translation makes stale
    bare_text: bool = False  # text may stand in a paragraph outside a run
    space: str = ' xml:space="preserve"'  # what keeps a text element's spaces (DrawingML keeps them anyway)
    unit: str = "paragraph"  # what a segment is, for a summary
    inline_text: bool = False  # text stands in the paragraph itself, styled by spans (OpenDocument)
    spaces: str = ""  # the element that stands for a run of spaces (OpenDocument's text:s)
    nested: bool = False  # a paragraph may hold others (a footnote's, a text box's), each translated apart
    defaults: str = ""  # a part without text that names the language of the document's text (Word's styles)

    @property
    def article(self) -> str:
        return "an" if self.name[0] in "AEIOU" else "a"

    def paragraphs(self) -> re.Pattern:
        """A paragraph holding no other: its start tag, element name and content (where paragraphs hold none)."""
        p = "|".join(re.escape(name) for name in self.paragraph.split("|"))
        return re.compile(rf"(<({p})\b[^>]*(?<!/)>)((?:(?!<(?:{p})\b).)*?)</\2>", re.DOTALL)


WORD = Markup(
    "Word", ".docx", ".doc", re.compile(r"word/(?:document|header\d*|footer\d*|footnotes|endnotes)\.xml"),
    "word/document.xml", *"w:p w:pPr w:r w:rPr w:t".split(),
    wrappers=frozenset("w:hyperlink w:ins w:smartTag w:customXml w:fldSimple w:moveTo w:dir w:bdo".split()),
    dropped=frozenset(["w:proofErr", "w:lastRenderedPageBreak"]),  # spelling marks, a layout cache
    control=("w:sdt", "w:sdtContent"),  # a content control: a form field, a document property in the text
    nested=True, defaults="word/styles.xml",  # a text box's paragraphs: in a run of the one it is anchored in
)  # fmt: skip
POWERPOINT = Markup(
    "PowerPoint", ".pptx", ".ppt", re.compile(r"ppt/(?:slides/slide|notesSlides/notesSlide)\d+\.xml"),
    "ppt/presentation.xml", *"a:p a:pPr a:r a:rPr a:t".split(), space="",
)  # fmt: skip
EXCEL = Markup(  # the texts cells share (si), and those a cell holds itself (is)
    "Excel", ".xlsx", ".xls", re.compile(r"xl/(?:sharedStrings|worksheets/sheet\d+)\.xml"), "xl/workbook.xml",
    "si|is", "", "r", "rPr", "t", bare_text=True, unit="cell text",
)  # fmt: skip
OPEN_TEXT = Markup(  # OpenDocument: the content, and the styles' headers and footers
    "OpenDocument text", ".odt", ".sxw", re.compile(r"(?:content|styles)\.xml"), "content.xml", "text:p|text:h",
    "", "", "", "", wrappers=frozenset(["text:span", "text:a", "text:meta"]),
    dropped=frozenset(["text:soft-page-break"]), space="", inline_text=True, spaces="text:s", nested=True,
    defaults="meta.xml",  # its <dc:language>
)  # fmt: skip
OPEN_PRESENTATION = replace(OPEN_TEXT, name="OpenDocument presentation", suffix=".odp", legacy=".sxi")
OPEN_SPREADSHEET = replace(OPEN_TEXT, name="OpenDocument spreadsheet", suffix=".ods", legacy=".sxc", unit="cell text")
# DrawingML paragraphs in a Word, PowerPoint or Excel file beside its own text: a chart's title and axis titles,
# and a SmartArt diagram's text, both in its data and in the drawing of it that Office and LibreOffice show
DRAWING = replace(
    POWERPOINT,
    name="chart or diagram",
    parts=re.compile(r"(?:word|ppt|xl)/(?:charts/chart|diagrams/data|diagrams/drawing)\d+\.xml"),
    main="",
)
# A chart in an OpenDocument file, an object of its own (Object 1/content.xml): its titles, subtitle and
# footer (mt/data/office_document.py keeps the paragraphs in <chart:title> and the like); its data table's
# cells (series names, categories) are the chart's data and stay as they are, as in a DrawingML chart
OPEN_CHART = replace(
    OPEN_TEXT, name="chart", parts=re.compile(r"[^/]+/content\.xml"), main="", nested=False, defaults=""
)
CHART_TITLE = re.compile(r"<chart:(title|subtitle|footer)\b[^>]*>.*?</chart:\1>", re.DOTALL)
MARKUPS = {
    markup.suffix: markup for markup in (WORD, POWERPOINT, EXCEL, OPEN_TEXT, OPEN_PRESENTATION, OPEN_SPREADSHEET)
}


OFFICE_KINDS = tuple(suffix[1:] for suffix in MARKUPS)  # docx, pptx, ...: as translate and mt-serve name them


def office_markup(path: str | None) -> Markup | None:
    """The Office format a file named so is in (.docx, .pptx, .xlsx, .odt, .odp, .ods), None for another file."""
    return MARKUPS.get(Path(path).suffix.lower()) if path else None
