"""translate -i doc.xlf -o doc.en.xlf: a CAT tool's XLIFF document with its targets filled in
(mt/decoding/xliff_translation.py), in place of a file of lines."""

from __future__ import annotations

import sys
import time

from mt.data.xliff import is_xliff_name
from mt.decoding.glossary import load_glossary
from mt.errors import MTError, terms_missed_warning, truncation_warning


def check_xliff_args(args) -> None:
    """The flags that go with an XLIFF input or output, or a one-line error."""
    if args.output and is_xliff_name(args.output) and not is_xliff_name(args.input):
        raise MTError(f"--output {args.output}: an XLIFF output is an XLIFF input with its targets: give -i doc.xlf")
    if not is_xliff_name(args.input):
        return
    if args.output and not is_xliff_name(args.output):
        raise MTError(f"--output {args.output}: an XLIFF input is written as XLIFF: name the output .xlf or .xliff")
    line_flags = {
        "--prefix": args.prefix,
        "--terms": args.terms,
        "--nbest": args.nbest > 1,
        "--alignments": args.alignments,
        "--attention-dir": args.attention_dir,
        "--interactive": args.interactive,
    }
    given = [flag for flag, value in line_flags.items() if value]
    if given:
        raise MTError(f"--input {args.input}: {given[0]} goes with a file of lines, not an XLIFF document")


def run_xliff(args, translator, how: str) -> None:
    """translate's run for an XLIFF input: the document read whole, translated, written whole (how: the
    decoding, in a few words, for the summary line)."""
    from mt.decoding.xliff_translation import translate_xliff

    start = time.perf_counter()
    glossary = load_glossary(args.glossary, translator.languages, args.glossary_ignore_case)
    shown = not args.quiet and sys.stderr.isatty()
    report = translate_xliff(translator, args.input, args.output, glossary=glossary, progress=shown)
    if not args.quiet:
        seconds = time.perf_counter() - start
        where = f" into {args.output}" if args.output else ""
        print(f"translated {args.input}{where} in {seconds:.1f}s ({how}): {report.summary()}", file=sys.stderr)
    if translator.truncated:
        print(truncation_warning(translator.truncated, "segment", args.max_src_len), file=sys.stderr)
    if translator.terms_missed:
        print(terms_missed_warning(translator.terms_missed, "segment"), file=sys.stderr)
