"""Documents served (POST /xliff, /po, /html, /subtitles, /markdown, /docx, /pptx, /xlsx, /odt, /odp, /ods, /epub): a
document read and its lines cut into the batcher's chunks, off the event loop, and filled in with their
translations; the routes themselves are in app.py."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import asdict, dataclass

from mt.data.epub import Epub
from mt.data.html_document import HtmlPage
from mt.data.markdown_document import MarkdownDocument
from mt.data.office_document import OfficeDocument
from mt.data.office_markup import MARKUPS, OFFICE_KINDS
from mt.data.po import Catalogue
from mt.data.subtitles import read_subtitles
from mt.data.xliff import Xliff
from mt.decoding.epub_translation import EpubTranslation
from mt.decoding.glossary import Glossary
from mt.decoding.html_translation import HtmlTranslation
from mt.decoding.line_translator import LineTranslator, check_terms_use, document_changes
from mt.decoding.markdown_translation import MarkdownTranslation
from mt.decoding.office_translation import OfficeTranslation
from mt.decoding.po_translation import PoTranslation
from mt.decoding.settings import line_seed
from mt.decoding.subtitle_translation import SubtitleTranslation
from mt.decoding.xliff_translation import Batch, XliffTranslation, batch_settings
from mt.errors import MTError
from mt.serve.limits import RequestError

MEDIA_TYPES = {
    "xliff": "application/xliff+xml",
    "po": "text/x-gettext-translation",
    "html": "text/html",
    "subtitles": "text/vtt",  # or SubRip's, application/x-subrip, or SubStation's, text/x-ssa (media_type)
    "markdown": "text/markdown",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "odt": "application/vnd.oasis.opendocument.text",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "epub": "application/epub+zip",
}
BINARY = (*OFFICE_KINDS, "epub")  # base64 in JSON
DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def without_declaration(document: str) -> str:
    """A document given as text, without the XML declaration that names the encoding it was in."""
    return DECLARATION.sub("", document, count=1)


def document_bytes_of(kind: str, document: str) -> bytes:
    """A document given in JSON as its bytes: a binary one's (Office, EPUB) base64 decoded, a text's UTF-8 (an
    XLIFF document without the declaration naming the encoding it was in: decoded already)."""
    if kind not in BINARY:
        return (without_declaration(document) if kind == "xliff" else document).encode("utf-8")
    try:
        return base64.b64decode(document, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(422, "document: not base64 (an Office document or a book goes in JSON as base64)") from None


@dataclass
class Lines:
    """A run of a document's lines (but XLIFF's), as the batcher takes them."""

    lines: list[str]


def document_work(
    kind: str, body: bytes, translator: LineTranslator, glossary: Glossary | None, max_lines: int, split_sentences=True
):
    """A document's lines to translate (an Xliff-, Po-, Html-, Subtitle- or MarkdownTranslation), and its lines in
    chunks for the batcher: (a part of a batch, its settings, source pieces, attention layer or None, sampling seeds or
    None), in order, its paragraphs sentence by sentence unless split_sentences is False; a RequestError where the
    document cannot be read or its glossary terms not placed."""
    try:
        if kind == "xliff":
            work = XliffTranslation(Xliff("the document", body), translator)
        elif kind == "po":
            work = PoTranslation(Catalogue("the document", body.decode("utf-8")), translator)
        elif kind == "html":
            work = HtmlTranslation(HtmlPage("the document", body), translator)
        elif kind == "subtitles":
            work = SubtitleTranslation(read_subtitles("the document", body), translator)
        elif kind == "epub":
            work = EpubTranslation(Epub("the document", body), translator)
        elif kind in BINARY:
            work = OfficeTranslation(OfficeDocument("the document", body, MARKUPS[f".{kind}"]), translator)
        else:
            work = MarkdownTranslation(MarkdownDocument("the document", body), translator)
    except (MTError, UnicodeDecodeError) as err:
        raise RequestError(422, str(err) if isinstance(err, MTError) else "the document: not UTF-8") from None
    if kind == "xliff":  # per target language, with an alignment or without
        batches = [(batch, *batch_settings(translator, batch)) for batch in work.batches]
    elif kind == "subtitles":  # single cues, then sentences over several cues with an alignment
        plain, joined = work.changes()
        batches = [(Lines(work.plain), plain, None), (Lines(work.joined), joined, work.layer)]
    else:
        batches = [(Lines(work.lines), work.changes, None)]
    chunks = []
    for batch, changes, layer in batches:  # a batch's lines seeded by their place in it, as its call seeds them
        settings = translator.settings.updated(**document_changes(changes, split_sentences))
        if glossary is not None:
            try:
                found = {"terms": glossary.terms(batch.lines)}
                check_terms_use(translator.with_settings(settings), found, by_sentence=settings.split_sentences)
            except MTError as err:
                raise RequestError(422, str(err)) from None
        for start in range(0, len(batch.lines), max_lines):
            if kind == "xliff":
                part = Batch(batch.tgt_lang, batch.aligned, batch.items[start : start + max_lines])
            else:
                part = Lines(batch.lines[start : start + max_lines])
            pieces = sum(len(ids) + 1 for ids in translator.tokenizer.encode_src(part.lines))
            seeds = [line_seed(settings.seed, start + i) for i in range(len(part.lines))] if settings.sampling else None
            chunks.append((part, settings, pieces, layer, seeds))
    return work, chunks


def filled(kind: str, work, chunks: list, results: list) -> tuple[str, dict]:
    """The document with the chunks' translations (results: each chunk's n-best lists) written in, and
    what was done (the X-MT-Report header)."""
    if kind == "xliff":
        for (batch, *_), found in zip(chunks, results):
            work.fill(batch, [hyps[0] for hyps in found])
        named = [language for _, language, _ in work.doc.languages() if language]
        return work.doc.text(), {"target_language": named[0] if named else "", **asdict(work.report)}
    best = [hyps[0] for found in results for hyps in found]
    if kind == "subtitles":
        work.fill(best[: len(work.plain)], best[len(work.plain) :])
        return work.subtitles.output(), {"target_language": work.language, **asdict(work.report)}
    work.fill(best)
    language = work.page.target_language if kind == "html" else work.language
    return work.output() if kind in BINARY else work.text(), {"target_language": language, **asdict(work.report)}


def media_type(kind: str, work) -> str:
    """The answer's media type: the document kind's; for subtitles, their format's."""
    return work.subtitles.media_type if kind == "subtitles" else MEDIA_TYPES[kind]
