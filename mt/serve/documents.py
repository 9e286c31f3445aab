"""XLIFF documents served (POST /xliff): a document's segments read and its lines cut into the batcher's
chunks, off the event loop; the route itself is in app.py."""

from __future__ import annotations

import re

from mt.data.xliff import Xliff
from mt.decoding.glossary import Glossary
from mt.decoding.line_translator import LineTranslator, check_terms_use
from mt.decoding.settings import line_seed
from mt.decoding.xliff_translation import Batch, XliffTranslation, batch_settings
from mt.errors import MTError
from mt.serve.limits import RequestError

XLIFF_TYPE = "application/xliff+xml"
DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def without_declaration(document: str) -> str:
    """A document given as text, without the XML declaration that names the encoding it was in."""
    return DECLARATION.sub("", document, count=1)


def document_work(body: bytes, translator: LineTranslator, glossary: Glossary | None, max_lines: int):
    """An XLIFF document's segments to translate (an XliffTranslation), and its lines in chunks for the
    batcher: (a part of a batch, its settings, source pieces, attention layer or None, sampling seeds or None),
    in the batches' order; a RequestError where the document cannot be read or its glossary terms not placed."""
    try:
        work = XliffTranslation(Xliff("the document", body), translator)
    except MTError as err:
        raise RequestError(422, str(err)) from None
    chunks = []
    for batch in work.batches:  # a batch's lines seeded by their place in it, as translate_xliff's call seeds them
        changes, layer = batch_settings(translator, batch)
        settings = translator.settings.updated(**changes)
        if glossary is not None:
            try:
                found = {"terms": glossary.terms(batch.lines)}
                check_terms_use(translator.with_settings(settings), found, by_sentence=settings.split_sentences)
            except MTError as err:
                raise RequestError(422, str(err)) from None
        done = 0
        for start in range(0, len(batch.lines), max_lines):
            part = Batch(batch.tgt_lang, batch.aligned, batch.items[start : start + max_lines])
            pieces = sum(len(ids) + 1 for ids in translator.tokenizer.encode_src(part.lines))
            seeds = [line_seed(settings.seed, done + i) for i in range(len(part.lines))] if settings.sampling else None
            chunks.append((part, settings, pieces, layer, seeds))
            done += len(part.lines)
    return work, chunks
