"""The HTTP application: POST /translate, POST /score, GET /health, GET /metrics (for Prometheus) and the web
page at GET /, over one translator (either engine) and the batcher that decodes requests together."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from dataclasses import asdict
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from mt.data.office_markup import MARKUPS
from mt.decoding.attention_maps import word_alignment
from mt.decoding.glossary import Glossary
from mt.decoding.line_translator import LineTranslator
from mt.decoding.settings import line_seed
from mt.serve.batcher import Batcher
from mt.serve.documents import MEDIA_TYPES, document_bytes_of, document_work, filled, media_type
from mt.serve.glossary_file import GlossaryFile
from mt.serve.limits import (
    DocumentRequest,
    RequestError,
    ScoreRequest,
    ServeLimits,
    TranslateRequest,
    parse_request,
)
from mt.serve.metrics import Metrics, RecordRequests
from mt.serve.request_checks import alignment_usable, known_language, request_settings, rerank_usable, terms_usable

log = logging.getLogger(__name__)

DOCUMENT_ROUTES = {  # what each document route answers, for its page of the API docs
    "xliff": "The XLIFF document of the body with its targets filled in, as `translate -i doc.xlf` fills them.",
    "po": "The PO catalogue of the body with its untranslated messages translated, as `translate -i app.pot` does.",
    "html": "The HTML page of the body with its text translated, its markup kept, as `translate -i page.html` does.",
    "subtitles": "The subtitles of the body (SubRip, WebVTT, SubStation Alpha) translated, timing kept, as "
    "`translate -i film.srt` does.",
    "markdown": "The Markdown document of the body translated, its markup kept, as `translate -i README.md` does.",
    **{
        kind: f"The {name} file of the body translated, its formatting kept, as `translate -i a.{kind}` does "
        "(in JSON: base64)."
        for kind, name in [*((suffix[1:], markup.name) for suffix, markup in MARKUPS.items()), ("epub", "EPUB")]
    },
}


class RequestGlossaries:
    """A request's own glossary: its entries on top of the server's (replacing those of the same source), or
    alone. The last `size` are kept, so that requests bringing the same entries share one Glossary (made once,
    in a thread: only the request's entries are compiled, the server's pattern is searched as it is) and are
    decoded in one batch."""

    def __init__(self, size: int = 64):
        self.size, self.kept = size, OrderedDict()
        self.merging: dict[tuple, asyncio.Future] = {}  # merges under way: requests with the same entries wait for one

    async def __call__(self, server: Glossary | None, entries: dict[str, str] | None, src_lang) -> Glossary | None:
        """None where the request names no entries (the server's applies)."""
        if not entries:
            return None
        key = (id(server), frozenset(entries.items()))
        kept = self.kept.get(key)
        if kept is not None and kept[0] is server:  # the server's glossary as it was (not one read since)
            self.kept.move_to_end(key)
            return kept[1]
        base = server or Glossary({}, src_lang if isinstance(src_lang, str) else "")
        merging = self.merging.get(key)
        if merging is None:
            merging = self.merging[key] = asyncio.ensure_future(asyncio.to_thread(base.with_entries, entries))
        try:
            merged = await merging
        finally:
            self.merging.pop(key, None)
        self.kept[key] = (server, merged)
        if len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return merged


async def answer_or_hang_up(request: Request, future, every: float = 0.05):
    """The future's result, or None once the client has disconnected: a request still waiting is then
    withdrawn from the queue (the batcher skips cancelled requests), so a client that leaves costs no
    decoding unless its batch had already started."""
    waiting = asyncio.wrap_future(future)
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=every)
        if done:
            return waiting.result()
        if await request.is_disconnected():
            future.cancel()
            return None


def create_app(
    translator: LineTranslator,
    limits: ServeLimits,
    about: dict,
    max_wait: float = 0.005,
    workers: int = 1,
    glossary: Glossary | GlossaryFile | None = None,
    cors_origins: tuple[str, ...] | list[str] = (),
    split_documents: bool = True,
) -> FastAPI:
    """about: what /health reports of the model (engine, device, checkpoint); workers: decoding threads; glossary: the
    target each line's source entries must get (required terms), added to a request's own (a GlossaryFile: read again
    when it changes); cors_origins: the origins whose pages may call the API from a browser ("*": any); split_documents:
    a document's paragraphs sentence by sentence, where its request does not say (the translator's split_sentences is
    for lines). A translator with a reverse model (with_reverse) reranks every request's beam, and refuses other
    searches."""
    batcher = Batcher(translator, max_wait, translator.settings.batch_tokens, workers)
    request_glossaries = RequestGlossaries()

    async def server_glossary() -> Glossary | None:
        """The server's glossary; its file, where changed, read again in a thread (not on the event loop)."""
        if isinstance(glossary, GlossaryFile):
            return await asyncio.to_thread(glossary.current) if glossary.due() else glossary.current()
        return glossary

    async def glossary_entries() -> int:
        return len((await server_glossary()).entries) if glossary is not None else 0

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        batcher.close()

    app = FastAPI(title="mt-serve", summary="Machine translation", docs_url="/docs", redoc_url=None, lifespan=lifespan)
    app.state.batcher = batcher
    metrics = Metrics()
    app.add_middleware(RecordRequests, metrics=metrics)
    if cors_origins:  # pages of other origins may call the API from a browser (CORS); the page here needs none
        app.add_middleware(
            CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
            allow_headers=["Content-Type"], max_age=600,
        )  # fmt: skip
    source, target = translator.languages
    page = resources.files("mt.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException):
        return JSONResponse({"error": str(err.detail)}, status_code=err.status_code)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return page

    @app.get("/health")
    async def health():
        return {
            "status": "ok",
            "languages": {"source": source, "target": target},
            **about,
            "settings": asdict(translator.settings),
            "limits": asdict(limits),
            "cors_origins": list(cors_origins),
            "glossary_entries": await glossary_entries(),
            "glossary_error": glossary.error if isinstance(glossary, GlossaryFile) else None,
            "reverse_weight": translator.reverse_weight if translator.reverse is not None else None,
            "batches": batcher.batches,
            "lines_translated": batcher.lines_decoded,
            "pairs_scored": batcher.pairs_scored,
        }

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus_metrics():
        exposition = metrics.exposition(batcher, await glossary_entries())
        return PlainTextResponse(exposition, media_type="text/plain; version=0.0.4")

    @app.post(
        "/translate",
        openapi_extra={
            "requestBody": {"content": {"application/json": {"schema": TranslateRequest.model_json_schema()}}}
        },
    )
    async def translate(request: Request):
        try:
            body = await request.body()
        except ClientDisconnect:  # gone before its request was whole: nothing to answer
            return Response(status_code=499)
        try:
            ask = parse_request(body, limits)
            settings = request_settings(translator.settings, ask, ask.nbest)
            known_language(settings.tgt_lang, translator.languages)
            rerank_usable(translator, settings, ask.reverse_weight)
            current = await server_glossary()
            in_use = await request_glossaries(current, ask.glossary, source) or current
            terms_usable(translator.with_settings(settings), ask, in_use)
            layer = alignment_usable(translator, settings) if ask.alignments else None
            pieces = sum(len(ids) + 1 for ids in translator.tokenizer.encode_src(ask.lines))
        except RequestError as err:
            return JSONResponse({"error": str(err)}, status_code=err.status)
        seeds = [line_seed(settings.seed, i) for i in range(len(ask.lines))] if settings.sampling else None
        future = batcher.submit(
            ask.lines, settings, pieces, prefixes=ask.prefixes, seeds=seeds, terms=ask.terms, glossary=in_use,
            reverse_weight=ask.reverse_weight, attention_layer=layer,
        )  # fmt: skip
        try:
            results = await answer_or_hang_up(request, future)
        except Exception as err:  # noqa: BLE001 - one request fails, the server goes on
            return JSONResponse({"error": f"decoding failed: {str(err).splitlines()[0][:300]}"}, status_code=500)
        if results is None:
            return Response(status_code=499)  # the client left; nobody reads this
        answer = {"translations": [found[0].text for found in results], "settings": asdict(settings)}
        if translator.reverse is not None:
            answer["reverse_weight"] = translator.reverse_weight if ask.reverse_weight is None else ask.reverse_weight
        if ask.scores or settings.nbest > 1:
            answer["hypotheses"] = [[{"text": t.text, "score": t.score} for t in found] for found in results]
        if ask.alignments:
            answer["alignments"] = [
                [list(pair) for pair in word_alignment(found[0], line)] if found[0].attention is not None else []
                for found, line in zip(results, ask.lines)
            ]
        return answer

    @app.post(
        "/score",
        openapi_extra={"requestBody": {"content": {"application/json": {"schema": ScoreRequest.model_json_schema()}}}},
    )
    async def score(request: Request):
        """log P(target | source) of each given translation, as mt-score computes it."""
        try:
            body = await request.body()
        except ClientDisconnect:
            return Response(status_code=499)
        try:
            ask = parse_request(body, limits, ScoreRequest)
            known_language(ask.tgt_lang or "", translator.languages)
            tok = translator.tokenizer
            pieces = sum(len(ids) + 1 for ids in tok.encode_src(ask.lines) + tok.encode_tgt(ask.targets))
        except RequestError as err:
            return JSONResponse({"error": str(err)}, status_code=err.status)
        try:
            job = batcher.submit_scoring(ask.lines, ask.targets, pieces, ask.tgt_lang or "")
            results = await answer_or_hang_up(request, job)
        except Exception as err:  # noqa: BLE001 - one request fails, the server goes on
            return JSONResponse({"error": f"scoring failed: {str(err).splitlines()[0][:300]}"}, status_code=500)
        if results is None:
            return Response(status_code=499)
        scores = [{"log_prob": round(r.log_prob, 4), "mean_log_prob": round(r.mean_log_prob, 4)} for r in results]
        if ask.pieces:
            for entry, r in zip(scores, results):
                entry.update(pieces=r.pieces, piece_log_probs=[round(lp, 4) for lp in r.piece_log_probs])
        return {"scores": scores}

    def document_route(kind: str):
        async def translate_document(request: Request):
            return await document_answer(kind, request)

        translate_document.__doc__ = DOCUMENT_ROUTES[kind]
        body = {MEDIA_TYPES[kind]: {}, "application/json": {"schema": DocumentRequest.model_json_schema()}}
        app.post(f"/{kind}", response_class=Response, openapi_extra={"requestBody": {"content": body}})(
            translate_document
        )

    async def document_answer(kind: str, request: Request):
        """The document of the body translated, as `translate -i` translates it: the body is the document,
        with the server's settings and glossary, or JSON with the document and the request's own choices (as
        /translate takes them); what was done in the X-MT-Report header, as JSON."""
        try:
            body = await request.body()
        except ClientDisconnect:
            return Response(status_code=499)
        settings, entries, weight, split = translator.settings, None, None, split_documents
        try:
            if request.headers.get("content-type", "").split(";")[0].strip() == "application/json":
                ask = parse_request(body, limits, DocumentRequest)
                settings, entries, weight = request_settings(translator.settings, ask), ask.glossary, ask.reverse_weight
                split = split if ask.split_sentences is None else ask.split_sentences
                known_language(settings.tgt_lang, translator.languages)
                rerank_usable(translator, settings, weight)
                body = document_bytes_of(kind, ask.document)
            elif len(body) > limits.max_document_bytes:
                size = f"{len(body):,} bytes, over the server's limit of {limits.max_document_bytes:,}"
                raise RequestError(413, f"the document is {size} (--max-document-bytes)")
            current = await server_glossary()
            in_use = await request_glossaries(current, entries, source) or current
            # reading it, and its lines' pieces, in a thread: the event loop goes on answering
            work, chunks = await asyncio.to_thread(
                document_work, kind, body, translator.with_settings(settings), in_use, limits.max_lines, split
            )
        except RequestError as err:
            return JSONResponse({"error": str(err)}, status_code=err.status)
        futures = [
            batcher.submit(part.lines, chunk_settings, pieces, glossary=in_use, attention_layer=layer, seeds=seeds,
                           reverse_weight=weight)
            for part, chunk_settings, pieces, layer, seeds in chunks
        ]  # fmt: skip
        results = []
        try:
            for future in futures:
                found = await answer_or_hang_up(request, future)
                if found is None:
                    return Response(status_code=499)  # the client left; nobody reads this
                results.append(found)
        except Exception as err:  # noqa: BLE001 - one request fails, the server goes on
            return JSONResponse({"error": f"decoding failed: {str(err).splitlines()[0][:300]}"}, status_code=500)
        finally:
            for other in futures[len(results) :]:  # stopped part-way: the rest of the document is not decoded
                other.cancel()
        text, report = await asyncio.to_thread(filled, kind, work, chunks, results)
        return Response(text, media_type=media_type(kind, work), headers={"X-MT-Report": json.dumps(report)})

    for kind in DOCUMENT_ROUTES:
        document_route(kind)

    return app
