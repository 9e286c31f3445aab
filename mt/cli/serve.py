"""mt-serve: load a model once, then answer HTTP requests until stopped (Ctrl-C).

mt-serve --checkpoint runs/multi30k.de-en/smoke/checkpoints/final.pt
curl -s localhost:8000/translate -H 'Content-Type: application/json' -d '{"lines": ["Ein Hund."]}'
"""

from __future__ import annotations

import errno
import logging
import re
import sys

from mt.cli.decoding_options import check_glossary_args
from mt.decoding.settings import DEFAULT_BEAM, MBR_FIELDS, RULE_FIELDS
from mt.errors import MTError
from mt.languages import languages_label
from mt.serve.glossary_file import GlossaryFile
from mt.serve.limits import ServeLimits

ORIGIN = re.compile(r"https?://[^/\s]+")  # what a browser sends as Origin: scheme://host[:port], no path


def import_server():
    """(uvicorn, create_app), or a one-line error saying how to install them (an optional extra)."""
    try:
        import uvicorn

        from mt.serve.app import create_app
    except ImportError as err:
        raise MTError(
            f"mt-serve needs FastAPI and uvicorn ({err.name} is missing): pip install -e '.[serve]'"
        ) from None
    return uvicorn, create_app


def check_args(args) -> None:
    check_glossary_args(args)
    for flag, value, least in (
        ("--port", args.port, 0),
        ("--beam", args.beam, 1),
        ("--alpha", args.alpha, 0),
        ("--max-lines", args.max_lines, 1),
        ("--max-line-chars", args.max_line_chars, 1),
        ("--max-bytes", args.max_bytes, 64),
        ("--max-document-bytes", args.max_document_bytes, 64),
        ("--max-beam", args.max_beam, 1),
        ("--max-wait-ms", args.max_wait_ms, 0),
        ("--batch-tokens", args.batch_tokens, 1),
        ("--decoding-threads", args.decoding_threads, 1),
        ("--min-len", args.min_len, 0),
        ("--no-repeat-ngram", args.no_repeat_ngram, 0),
    ):
        if value is not None and value < least:
            raise MTError(f"{flag} must be >= {least}")
    if args.port > 65535:
        raise MTError("--port must be <= 65535")
    if args.glossary and args.export:
        raise MTError("--glossary needs a checkpoint (CTranslate2 has no lexically constrained search)")
    if args.glossary and args.beam == 1:
        raise MTError("--glossary needs beam search, which places the terms: not --beam 1")
    if args.reverse and (args.beam == 1 or args.mbr):
        raise MTError("--reverse reranks a beam's candidates: not --beam 1 or --mbr")
    if args.reverse_weight is not None and not args.reverse:
        raise MTError("--reverse-weight weighs the reverse model: give --reverse")
    if args.reverse_weight is not None and args.reverse_weight < 0:
        raise MTError("--reverse-weight must be >= 0")
    for origin in args.cors_origin or ():
        if origin != "*" and not ORIGIN.fullmatch(origin):
            raise MTError(f"--cors-origin {origin}: an origin is scheme://host[:port] (https://example.com), or *")


def check_address(host: str, port: int) -> None:
    """Bind and let go of host:port as the server will, so that an address in use (another server) is one
    line before the model loads, not uvicorn's report after the start-up message."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a closing socket is no obstacle
        try:
            probe.bind((host, port))
        except OSError as err:
            said = (err.strerror or str(err)).lower()
            if err.errno == errno.EADDRINUSE:
                said += " (another server there? choose another --port)"
            raise MTError(f"--host {host} --port {port}: {said}") from None


def load(args):
    """The translator (reranked by the --reverse model, where given), what /health says of it, and how many
    threads decode."""
    translator, about = load_forward(args)
    if not args.reverse:
        return translator, about
    from mt.inference import load_translator

    if translator.settings.beam == 1:  # a checkpoint that decodes greedily
        translator = translator.with_settings(translator.settings.updated(beam=DEFAULT_BEAM))
    translator = translator.with_reverse(load_translator(args.reverse, about["device"]), args.reverse_weight)
    return translator, {**about, "reverse_model": args.reverse}


def load_forward(args):
    """The translator of --checkpoint or --export, what /health says of it, and how many threads decode."""
    choices = dict(
        beam=args.beam,
        alpha=args.alpha,
        batch_tokens=args.batch_tokens,
        tgt_lang=args.tgt_lang,
        **{name: getattr(args, name) for name in RULE_FIELDS + MBR_FIELDS},
    )
    if args.export:
        from mt.decoding.ctranslate2_translator import load_export_translator

        translator = load_export_translator(args.export, args.device, args.dtype, **choices)
        about = {"engine": "ctranslate2", "device": translator.device, "model": shown_name(args, args.export)}
        return translator, {**about, "decoding_threads": args.decoding_threads or 1}  # CTranslate2 has its own
    if args.dtype == "int8":
        raise MTError("--dtype int8 needs an export directory (--export; see mt-export)")
    from mt.fastpath import serving_layout
    from mt.inference import decoding_device, load_translator

    device = decoding_device(args.device)
    workers = serving_layout(device, args.decoding_threads)
    translator = load_translator(args.checkpoint, device, precision=args.dtype, **choices)
    if args.glossary and translator.settings.beam == 1:  # a checkpoint that decodes greedily
        translator = translator.with_settings(translator.settings.updated(beam=DEFAULT_BEAM))
    about = {"engine": "torch", "device": str(device), "model": " ".join(shown_name(args, c) for c in args.checkpoint)}
    return translator, {**about, "decoding_threads": workers}


def shown_name(args, path: str) -> str:
    """How the start line and /health name a model: by its Hub name where it was given one (hf:OWNER/NAME),
    else its path."""
    return args.hub_names.get(path, path)


def run(args) -> None:
    check_args(args)
    uvicorn, create_app = import_server()
    check_address(args.host, args.port)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    translator, about = load(args)
    limits = ServeLimits(
        max_lines=args.max_lines,
        max_bytes=args.max_bytes,
        max_document_bytes=args.max_document_bytes,
        max_line_chars=args.max_line_chars,
        max_beam=args.max_beam,
        max_nbest=args.max_beam,
    )
    glossary = GlossaryFile(args.glossary, translator.languages, args.glossary_ignore_case) if args.glossary else None
    wait, threads, origins = args.max_wait_ms / 1000, about["decoding_threads"], args.cors_origin or ()
    split_documents = args.split_sentences is not False  # a document's paragraphs: sentence by sentence, as translate
    app = create_app(translator, limits, about, wait, threads, glossary, origins, split_documents)
    reranked = f", reranked by {args.reverse} at weight {translator.reverse_weight:g}" if args.reverse else ""
    print(
        f"mt-serve: {about['model']} ({languages_label(translator.languages)}, {about['engine']} on {about['device']}"
        f"{reranked}) at http://{args.host}:{args.port}/ (Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
