"""What one request may ask of the server, and the request's checks: every way a request can be wrong
is one line that names the field, answered with a 4xx, before anything is decoded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


@dataclass(frozen=True)
class ServeLimits:
    max_lines: int = 64  # lines per request
    max_bytes: int = 256 * 1024  # request body
    max_line_chars: int = 2000  # characters per line (and per prefix)
    max_beam: int = 8
    max_nbest: int = 8
    max_temperature: float = 10.0
    max_glossary_entries: int = 1000  # a request's own glossary
    max_document_bytes: int = 10 * 1024 * 1024  # an XLIFF document (POST /xliff)


class DecodingChoices(BaseModel):
    """How a request asks to decode, beyond the server's settings: every field optional."""

    model_config = ConfigDict(extra="forbid", strict=True)

    glossary: dict[str, str] | None = Field(
        None,
        description="source -> target entries: a line (or sentence) holding a source entry must translate it as its "
        "target (beam search); added to the server's glossary, replacing its entry for the same source",
    )
    strategy: Literal["greedy", "beam", "sample"] | None = None
    beam: int | None = Field(None, ge=1)
    alpha: float | None = Field(None, ge=0, le=5)
    temperature: float | None = Field(None, ge=0)
    topk: int | None = Field(None, ge=0)
    topp: float | None = Field(None, gt=0, le=1)
    epsilon: float | None = Field(None, ge=0, lt=1)
    seed: int | None = Field(None, ge=0, lt=2**32)
    min_len: int | None = Field(None, ge=0, description="no end of sentence before this many pieces (0: off)")
    no_repeat_ngram: int | None = Field(None, ge=0, description="no n-gram of this many pieces twice (0: off)")
    tgt_lang: str | None = Field(None, description="the language to translate into, for a model of several")
    split_sentences: bool | None = Field(None, description="translate each line's sentences apart, joined back")
    protect: str | None = Field(
        None,
        description="spans carried through untranslated: comma-separated url, email, tag, subtitle, placeholder, "
        "code, printf, or none",
    )
    mbr: int | None = Field(None, ge=0, description="minimum Bayes risk over this many candidates a line (0: off)")
    mbr_utility: Literal["chrf", "bleu"] | None = Field(None, description="how MBR compares two candidates")
    reverse_weight: float | None = Field(
        None, ge=0, le=100, description="a server started with --reverse: the reverse model's weight in reranking"
    )


class TranslateRequest(DecodingChoices):
    """POST /translate's body. Every field but lines is optional: the server's settings stand in."""

    lines: list[str] = Field(description="source lines; one translation comes back for each, in order")
    prefixes: list[str] | None = Field(None, description="a target prefix per line (empty: none), kept verbatim")
    terms: list[list[str]] | None = Field(
        None, description="the phrases each line's translation must hold (beam search), a list per line"
    )
    nbest: int | None = Field(None, ge=1)
    scores: bool = Field(False, description="also return each line's hypotheses with their scores")
    alignments: bool = Field(
        False, description="also return each line's word alignment: [source word, target word] index pairs"
    )


class DocumentRequest(DecodingChoices):
    """A document route's body as JSON (the document alone may be the body): the document, and how to
    decode."""

    document: str = Field(
        description="the document, as the path says: XLIFF, a PO catalogue, an HTML page, subtitles, Markdown; "
        "a Word document in base64"
    )


class ScoreRequest(BaseModel):
    """POST /score's body: translations to score, one target per source line."""

    model_config = ConfigDict(extra="forbid", strict=True)

    lines: list[str] = Field(description="source lines")
    targets: list[str] = Field(description="a translation per line; its log-probability comes back, in order")
    tgt_lang: str | None = Field(None, description="the targets' language, for a model of several")
    pieces: bool = Field(False, description="also return each target's pieces and their log-probabilities")


class RequestError(Exception):
    """A request the server refuses: its HTTP status and the one line that says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_request(body: bytes, limits: ServeLimits, kind: type[BaseModel] = TranslateRequest):
    """The request in body (a TranslateRequest, or what kind names), or a RequestError naming what is wrong."""
    most = limits.max_document_bytes if kind is DocumentRequest else limits.max_bytes
    if len(body) > most:
        raise RequestError(413, f"request body is {len(body)} bytes; the limit is {most}")
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestError(400, f"invalid JSON: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise RequestError(422, 'the body must be a JSON object, e.g. {"lines": ["Guten Morgen."]}')
    try:
        request = kind.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise RequestError(422, f"{where}: {first['msg']}") from None
    check_limits(request, limits)
    return request


def check_limits(request: TranslateRequest | ScoreRequest | DocumentRequest, limits: ServeLimits) -> None:
    if isinstance(request, DocumentRequest):
        return check_choices(request, limits)
    if len(request.lines) > limits.max_lines:
        raise RequestError(422, f"lines: {len(request.lines)} lines; the limit is {limits.max_lines} a request")
    per_line = "targets" if isinstance(request, ScoreRequest) else "prefixes"  # one per line, or none
    values = getattr(request, per_line)
    if values is not None and len(values) != len(request.lines):
        raise RequestError(422, f"{per_line}: {len(values)} for {len(request.lines)} lines (one per line)")
    for field in ("lines", per_line):
        for i, text in enumerate(getattr(request, field) or []):
            if len(text) > limits.max_line_chars:
                raise RequestError(
                    422, f"{field}.{i}: {len(text)} characters; the limit is {limits.max_line_chars} a line"
                )
    if isinstance(request, ScoreRequest):
        return
    if request.terms is not None:
        if len(request.terms) != len(request.lines):
            raise RequestError(422, f"terms: {len(request.terms)} for {len(request.lines)} lines (one list per line)")
        for i, line_terms in enumerate(request.terms):
            if sum(map(len, line_terms)) > limits.max_line_chars:
                raise RequestError(
                    422, f"terms.{i}: over this server's limit of {limits.max_line_chars} characters a line"
                )
    if request.nbest is not None and request.nbest > limits.max_nbest:
        raise RequestError(422, f"nbest: {request.nbest} is over this server's limit of {limits.max_nbest}")
    check_choices(request, limits)


def check_choices(request: DecodingChoices, limits: ServeLimits) -> None:
    """A request's glossary and settings within the server's limits, or a RequestError."""
    if request.glossary is not None:
        check_glossary(request.glossary, limits)
    for field, most in (
        ("beam", limits.max_beam),
        ("mbr", limits.max_beam),  # a beam of that many, or that many samples
        ("temperature", limits.max_temperature),
    ):
        value = getattr(request, field)
        if value is not None and value > most:
            raise RequestError(422, f"{field}: {value} is over this server's limit of {most}")


def check_glossary(entries: dict[str, str], limits: ServeLimits) -> None:
    """A request's glossary: at most limits.max_glossary_entries entries, none empty or over a line's length."""
    if len(entries) > limits.max_glossary_entries:
        raise RequestError(
            422, f"glossary: {len(entries)} entries; the limit is {limits.max_glossary_entries} a request"
        )
    for source, target in entries.items():
        if not source.strip() or not target.strip():
            raise RequestError(422, f"glossary: the entry {source!r}: {target!r} has an empty side")
        if len(source) + len(target) > limits.max_line_chars:
            raise RequestError(422, f"glossary: the entry {source[:40]!r} is over {limits.max_line_chars} characters")
