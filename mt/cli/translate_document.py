"""translate -i doc.xlf -o doc.en.xlf, -i app.pot -o de.po, -i page.html -o page.en.html, -i film.srt -o film.en.srt,
-i README.md -o README.en.md, -i bericht.docx -o report.docx: a document read whole, translated and written whole,
in place of a file of lines: a CAT tool's XLIFF with its targets filled in (mt/decoding/xliff_translation.py), a
gettext catalogue with its messages (mt/decoding/po_translation.py), an HTML page with its text
(mt/decoding/html_translation.py), subtitles with their cues (mt/decoding/subtitle_translation.py), a Markdown
document with its text (mt/decoding/markdown_translation.py), an Office document (Word, PowerPoint, Excel;
OpenDocument's .odt, .odp, .ods) with its paragraphs (mt/decoding/office_translation.py), an EPUB book with its
chapters (mt/decoding/epub_translation.py)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from mt.cli.translate_folder import check_folder_args, is_folder, run_folder
from mt.data.epub import is_epub_name
from mt.data.html_document import is_html_name
from mt.data.markdown_document import is_markdown_name
from mt.data.office_markup import (
    EXCEL,
    OFFICE_KINDS,
    OPEN_PRESENTATION,
    OPEN_SPREADSHEET,
    OPEN_TEXT,
    POWERPOINT,
    WORD,
    Markup,
    office_markup,
)
from mt.data.po import is_po_name
from mt.data.subtitles import FORMATS, is_subtitle_name, subtitle_format
from mt.data.xliff import is_xliff_name
from mt.decoding.glossary import load_glossary
from mt.errors import MTError, terms_missed_warning, truncation_warning


@dataclass(frozen=True)
class Kind:
    """A kind of document translate takes whole."""

    named: Callable[[str | None], bool]  # whether a file named so is one
    document: str  # "an XLIFF document"
    format: str  # "XLIFF"
    article: str
    suffixes: str  # the output names it takes
    example: str  # an input to give
    unit: str  # what the warnings count


def office(markup: Markup, document: str, example: str) -> Kind:
    """The Kind of an Office format: Word, PowerPoint, Excel."""

    def named(path: str | None) -> bool:
        return office_markup(path) is markup

    return Kind(named, document, markup.name, markup.article, markup.suffix, example, markup.unit)


KINDS = {
    "xliff": Kind(is_xliff_name, "an XLIFF document", "XLIFF", "an", ".xlf or .xliff", "-i doc.xlf", "segment"),
    "po": Kind(is_po_name, "a PO catalogue", "PO", "a", ".po", "-i app.pot", "message line"),
    "html": Kind(is_html_name, "an HTML page", "HTML", "an", ".html or .htm", "-i page.html", "segment"),
    "subtitles": Kind(
        is_subtitle_name, "a subtitle file", "subtitle", "a", ".srt, .vtt, .ass or .ssa", "-i film.srt", "cue"
    ),
    "markdown": Kind(is_markdown_name, "a Markdown document", "Markdown", "a", ".md", "-i README.md", "segment"),
    "docx": office(WORD, "a Word document", "-i bericht.docx"),
    "pptx": office(POWERPOINT, "a PowerPoint presentation", "-i folien.pptx"),
    "xlsx": office(EXCEL, "an Excel workbook", "-i tabelle.xlsx"),
    "odt": office(OPEN_TEXT, "an OpenDocument text", "-i bericht.odt"),
    "odp": office(OPEN_PRESENTATION, "an OpenDocument presentation", "-i folien.odp"),
    "ods": office(OPEN_SPREADSHEET, "an OpenDocument spreadsheet", "-i tabelle.ods"),
    "epub": Kind(is_epub_name, "an EPUB book", "EPUB", "an", ".epub", "-i buch.epub", "segment"),
}
BINARY = (*OFFICE_KINDS, "epub")  # written to a file, never to stdout


def document_kind(path: str | None) -> str | None:
    """The kind of document a file named so is ("folder" for a folder, mt/cli/translate_folder.py), None for a
    file of lines."""
    if is_folder(path):
        return "folder"
    return next((name for name, kind in KINDS.items() if kind.named(path)), None)


def line_flags(args) -> dict:
    """The flags that go with a file of lines alone, and whether each is given."""
    return {
        "--prefix": args.prefix,
        "--terms": args.terms,
        "--nbest": args.nbest > 1,
        "--alignments": args.alignments,
        "--attention-dir": args.attention_dir,
        "--interactive": args.interactive,
    }


def check_document_args(args) -> None:
    """The flags that go with a document input or output, or a one-line error. A document's paragraphs are
    translated sentence by sentence unless --no-split-sentences says otherwise: a model trained on sentences
    drops whole sentences of a paragraph translated at once."""
    kind, output_kind = document_kind(args.input), document_kind(args.output)
    if kind is not None and args.split_sentences is None:
        args.split_sentences = True
    if kind == "folder":
        return check_folder_args(args, line_flags(args))
    if output_kind == "folder":
        raise MTError(f"--output {args.output}: a folder, the output of a folder input (-i FOLDER); name a file")
    if output_kind and output_kind != kind:
        out = KINDS[output_kind]
        raise MTError(
            f"--output {args.output}: {out.article} {out.format} output is {out.article} {out.format} input "
            f"translated: give {out.example}"
        )
    if kind is None:
        return
    doc = KINDS[kind]
    if kind == "subtitles" and args.output and subtitle_format(args.output) != subtitle_format(args.input):
        written = subtitle_format(args.input)
        names = " or ".join(suffix for suffix, name in FORMATS.items() if name == written)
        raise MTError(f"--output {args.output}: a {written} input is written as {written}: name the output {names}")
    if kind in BINARY and not args.output:
        raise MTError(f"--input {args.input}: {doc.document} is written to a file, not stdout: -o out{doc.suffixes}")
    if args.output and output_kind is None:
        raise MTError(
            f"--output {args.output}: {doc.article} {doc.format} input is written as {doc.format}: name the output "
            f"{doc.suffixes}"
        )
    given = [flag for flag, value in line_flags(args).items() if value]
    if given:
        raise MTError(f"--input {args.input}: {given[0]} goes with a file of lines, not {doc.document}")


def translate_function(kind: str):
    """The function that translates a document of this kind (imported when first asked for)."""
    if kind == "xliff":
        from mt.decoding.xliff_translation import translate_xliff as translate_document
    elif kind == "po":
        from mt.decoding.po_translation import translate_po as translate_document
    elif kind == "html":
        from mt.decoding.html_translation import translate_html as translate_document
    elif kind == "subtitles":
        from mt.decoding.subtitle_translation import translate_subtitles as translate_document
    elif kind == "markdown":
        from mt.decoding.markdown_translation import translate_markdown as translate_document
    elif kind == "epub":
        from mt.decoding.epub_translation import translate_epub as translate_document
    else:
        from mt.decoding.office_translation import translate_office as translate_document
    return translate_document


def run_document(args, translator, how: str) -> None:
    """translate's run for a document input: read whole, translated, written whole (how: the decoding, in
    a few words, for the summary line); or a folder's documents."""
    kind = document_kind(args.input)
    if kind == "folder":
        return run_folder(args, translator, how, document_kind, translate_function)
    translate_document = translate_function(kind)
    start = time.perf_counter()
    glossary = load_glossary(args.glossary, translator.languages, args.glossary_ignore_case)
    shown = not args.quiet and sys.stderr.isatty()
    split = args.split_sentences is not False
    report = translate_document(
        translator, args.input, args.output, glossary=glossary, progress=shown, split_sentences=split
    )
    unit = KINDS[kind].unit
    if not args.quiet:
        seconds = time.perf_counter() - start
        where = f" into {args.output}" if args.output else ""
        print(f"translated {args.input}{where} in {seconds:.1f}s ({how}): {report.summary()}", file=sys.stderr)
    if translator.truncated:
        print(truncation_warning(translator.truncated, unit, args.max_src_len), file=sys.stderr)
    if translator.terms_missed:
        print(terms_missed_warning(translator.terms_missed, unit), file=sys.stderr)
