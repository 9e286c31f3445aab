"""What a request may ask, checked before it is queued: its decoding choices on top of the server's settings,
and whether its terms, alignments and reranking go with them; each refusal a RequestError naming the field."""

from __future__ import annotations

from mt.decoding.glossary import Glossary
from mt.decoding.inline_tags import alignment_layer
from mt.decoding.line_translator import LineTranslator, check_terms_use
from mt.decoding.settings import DEFAULT_BEAM, MBR_FIELDS, RULE_FIELDS, DecodeSettings
from mt.errors import MTError
from mt.languages import into
from mt.serve.limits import DecodingChoices, RequestError, TranslateRequest

SAMPLING_FIELDS = ("temperature", "topk", "topp", "epsilon", "seed")


def request_settings(base: DecodeSettings, request: DecodingChoices, nbest: int | None = None) -> DecodeSettings:
    """The server's settings with the request's choices (nbest: a /translate request's) on top, or a
    RequestError."""
    sampling = request.strategy == "sample" or (request.strategy is None and base.sampling)
    for name in SAMPLING_FIELDS:
        if getattr(request, name) is not None and not sampling:
            raise RequestError(422, f'{name}: a sampling setting; add "strategy": "sample"')
    choices = dict(
        alpha=request.alpha,
        nbest=nbest,
        tgt_lang=request.tgt_lang,
        **{n: getattr(request, n) for n in RULE_FIELDS + MBR_FIELDS + SAMPLING_FIELDS},
    )
    if request.strategy == "greedy":
        if request.beam not in (None, 1):
            raise RequestError(422, 'beam: greedy decodes with beam 1; use "strategy": "beam"')
        choices.update(strategy="search", beam=1)
    elif request.strategy == "beam":
        choices.update(strategy="search", beam=request.beam or max(base.beam, DEFAULT_BEAM, nbest or 1))
    elif request.strategy == "sample":
        choices.update(strategy="sample")
    else:
        choices.update(beam=request.beam)
    if not sampling and choices.get("beam") is None and (nbest or 1) > base.beam:
        choices["beam"] = nbest  # "nbest": 3 alone asks for a beam that can hold 3
    try:
        return base.updated(**choices)
    except MTError as err:
        raise RequestError(422, str(err).removeprefix("decode setting ")) from None


def terms_usable(translator: LineTranslator, request: TranslateRequest, glossary: Glossary | None) -> None:
    """A RequestError (422) unless the request's terms, and those the glossary finds in its lines, can be
    placed as it asks to decode (the glossary's sentence by sentence too)."""
    try:
        if request.terms is not None:
            check_terms_use(translator, {"terms": request.terms})
        if glossary is not None:
            found = {"terms": glossary.terms(request.lines)}
            check_terms_use(translator, found, by_sentence=translator.settings.split_sentences)
    except MTError as err:
        raise RequestError(422, str(err)) from None


def alignment_usable(translator: LineTranslator, settings: DecodeSettings) -> int:
    """The decoder layer a request's word alignments come from (as translate --alignments'), or a
    RequestError (422) where the request decodes in a way that shows no single attention."""
    layer = alignment_layer(translator.with_settings(settings))
    if layer is None:
        raise RequestError(422, "alignments come from one model's attention: not with mbr, an ensemble or an export")
    if settings.split_sentences:
        raise RequestError(422, "alignments take one sentence a line: not with split_sentences")
    return layer


def rerank_usable(translator: LineTranslator, settings: DecodeSettings, weight: float | None = None) -> None:
    """A RequestError (422) unless a server that reranks with a reverse model can rerank as the request asks
    to decode: a beam's candidates, not a greedy search's, samples or MBR's choice; a request's reverse weight
    (weight) only where there is a reverse model."""
    if weight is not None and translator.reverse is None:
        raise RequestError(422, "reverse_weight: this server does not rerank (it was started without --reverse)")
    if translator.reverse is not None and (settings.sampling or settings.beam < 2 or settings.mbr):
        raise RequestError(
            422, "this server reranks a beam's candidates with a reverse model: beam search with a beam of 2 or "
            "more, no mbr",
        )  # fmt: skip


def known_language(tgt_lang: str, languages: tuple) -> None:
    """A RequestError (422) unless the model translates into tgt_lang ("": its only target language)."""
    try:
        into([], tgt_lang, languages)
    except MTError as err:
        raise RequestError(422, f"tgt_lang: {err}") from None
