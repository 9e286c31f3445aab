"""translate: a trained checkpoint turns source lines into target lines, N lines in, N lines out.

    translate --checkpoint runs/multi30k.de-en/smoke/checkpoints/best.pt < input.de > output.en

Output formats:
  default       one translation per input line, in input order (an empty line gives an empty line)
  --nbest K     K lines per input line: "<line number, 0-based>\\t<rank>\\t<score>\\t<translation>"
  --alignments  "<translation>\\t<alignment>": source-target word index pairs ("0-0 2-1 ...", split at
                spaces); --alignments pieces: each target piece's most attended source piece (EOS included)

A document input (XLIFF, PO, HTML, subtitles, Markdown: -i doc.xlf -o doc.en.xlf) is translated whole, its
markup kept (mt/cli/translate_document.py).

Strategies: greedy, beam search, and sampling (--strategy sample --temperature T --topk K --topp P
--epsilon E --seed S; --nbest N draws N samples a line, ranked in the order drawn). --prefix FILE forces a
target prefix per line with any of them. --terms FILE names phrases each line's translation must hold,
tab-separated (beam search); --glossary FILE, source<TAB>target entries, names them for every line that holds
a source entry. --mbr N draws N candidates a line (beam search's N best, or N samples) and
writes the one that agrees most with the others (minimum Bayes risk).
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

from tqdm import tqdm

import mt
from mt.cli.decoding_options import check_glossary_args
from mt.cli.translate_document import check_document_args, document_kind, run_document
from mt.data.lines import count_lines, decode_utf8, open_for_writing, read_line_chunks, split_lines
from mt.data.tmx import TmxWriter, is_tmx_name, tmx_pair
from mt.decoding.ctranslate2_translator import load_export_translator
from mt.decoding.glossary import load_glossary, terms_of
from mt.decoding.sentences import several_sentences_note
from mt.decoding.settings import DEFAULT_BEAM, MBR_FIELDS, RULE_FIELDS
from mt.errors import MTError, StoppedAfter, check_output_file, counted, terms_missed_warning, truncation_warning

# torch, the model and the search are imported where the torch engine is picked: `--engine ctranslate2`
# translates without importing torch (about 1.4 s of start-up).


def format_results(results, nbest: int, alignments: str | None = None, first_line: int = 0, lines=()) -> list[str]:
    """The lines to write for results (each line's n-best Translations): translations, n-best rows, or
    translations with their alignment (alignments: "words", of lines and their translations, or "pieces")."""
    if alignments:
        from mt.decoding.attention_maps import format_alignment, hard_alignment, word_alignment

        def aligned(best, line: str) -> list[tuple[int, int]]:
            return hard_alignment(best.attention) if alignments == "pieces" else word_alignment(best, line)

        return [
            r[0].text + "\t" + (format_alignment(aligned(r[0], line)) if r[0].attention is not None else "")
            for r, line in zip(results, lines)
        ]
    if nbest == 1:
        return [r[0].text for r in results]
    return [
        f"{i}\t{rank}\t{t.score:.4f}\t{t.text}"
        for i, r in enumerate(results, start=first_line)
        for rank, t in enumerate(r)
    ]


def write_heatmaps(results, folder: str, first_line: int = 0) -> None:
    """One SVG per translated line, named by its 0-based line number."""
    from mt.decoding.attention_maps import heatmap_svg

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(results, start=first_line):
        t = r[0]
        if t.attention is not None:
            svg = heatmap_svg(t.attention, t.src_pieces, t.tgt_pieces, title=f"line {i}: {t.text}")
            (out / f"{i:06d}.svg").write_text(svg, encoding="utf-8")


SAMPLING_FLAGS = ("temperature", "topk", "topp", "epsilon", "seed")


def writing_failed(name: str, err: OSError) -> MTError:
    return MTError(f"{name}: writing failed ({err.strerror or err})")


def check_args(args) -> None:
    check_output_file(
        None if document_kind(args.input) == "folder" else args.output,  # a folder's: mt/cli/translate_folder.py
        "--output",
        {
            "--input": args.input,
            "--prefix": args.prefix,
            "--terms": args.terms,
            "--glossary": args.glossary,
            "--checkpoint": args.checkpoint,
        },
    )
    if args.attention_dir and Path(args.attention_dir).exists() and not Path(args.attention_dir).is_dir():
        raise MTError(f"--attention-dir {args.attention_dir}: is a file, expected a folder")
    if args.beam is not None and args.beam < 1:
        raise MTError("--beam must be >= 1")
    sampling = args.strategy == "sample"
    for name in SAMPLING_FLAGS:
        if getattr(args, name) is not None and not sampling:
            raise MTError(f"--{name} is a sampling setting: add --strategy sample")
    if args.topp is not None and not 0 < args.topp <= 1:
        raise MTError("--topp must be in (0, 1]")
    if args.epsilon is not None and not 0 <= args.epsilon < 1:
        raise MTError("--epsilon must be in [0, 1) (0: no cut)")
    check_mbr_args(args)
    if args.strategy == "greedy" and (args.beam not in (None, 1) or args.nbest > 1):
        raise MTError("--strategy greedy finds one translation a line: for --beam or --nbest use --strategy beam")
    for flag, given in (("--prefix", args.prefix), ("--terms", args.terms)):
        if given and (args.interactive or (args.input is None and sys.stdin.isatty())):
            raise MTError(f"{flag} reads a line per input line: give the input as a file or a pipe, not a terminal")
    check_terms_args(args)
    check_glossary_args(args)
    check_document_args(args)
    if args.reverse and (args.strategy in ("greedy", "sample") or args.beam == 1 or args.mbr):
        raise MTError("--reverse reranks a beam's candidates: not --strategy greedy or sample, --beam 1 or --mbr")
    if args.reverse_weight is not None and not args.reverse:
        raise MTError("--reverse-weight weighs the reverse model: give --reverse")
    for flag, value, least in (
        ("--reverse-weight", args.reverse_weight, 0),
        ("--temperature", args.temperature, 0),
        ("--topk", args.topk, 0),
        ("--seed", args.seed, 0),
        ("--alpha", args.alpha, 0),
        ("--max-len-a", args.max_len_a, 0),
        ("--max-len-b", args.max_len_b, 1),
        ("--batch-tokens", args.batch_tokens, 1),
        ("--max-src-len", args.max_src_len, 1),
        ("--chunk-lines", args.chunk_lines, 1),
        ("--min-len", args.min_len, 0),
        ("--no-repeat-ngram", args.no_repeat_ngram, 0),
    ):
        if value is not None and value < least:
            raise MTError(f"{flag} must be >= {least}")
    if args.nbest < 1 or (not sampling and args.nbest > (args.beam or args.nbest)):
        raise MTError("--nbest must be between 1 and --beam")
    check_engine_args(args)
    if args.split_sentences and (args.nbest > 1 or args.alignments or args.attention_dir):
        raise MTError(
            "--split-sentences writes one translation a line: not with --nbest, --alignments or --attention-dir"
        )
    if args.nbest > 1 and (args.alignments or args.attention_dir):
        raise MTError("--alignments and --attention-dir work with --nbest 1")
    if args.output and is_tmx_name(args.output) and (args.nbest > 1 or args.alignments):
        raise MTError(
            f"--output {args.output}: a TMX file holds one translation a unit: not with --nbest or --alignments"
        )
    if args.ensemble and (args.alignments or args.attention_dir):
        raise MTError("--alignments and --attention-dir show one model's attention: not with --ensemble")
    if args.engine == "ctranslate2" and args.ensemble:
        raise MTError("--ensemble needs --engine torch")
    if args.engine == "ctranslate2" and len(args.checkpoint) != 1:
        raise MTError("--engine ctranslate2 takes one --checkpoint: an export directory (mt-export averages)")
    if args.engine == "ctranslate2" and (args.alignments or args.attention_dir):
        raise MTError("--alignments and --attention-dir need --engine torch (CTranslate2 exports no attention)")


def check_mbr_args(args) -> None:
    """--mbr: 0 (off) or several candidates, one translation a line (no --nbest, no attention shown)."""
    if args.mbr in (None, 0):
        return
    if args.mbr < 2:
        raise MTError("--mbr must be 0 (off) or >= 2 candidates a line")
    if args.strategy == "greedy":
        raise MTError("--mbr chooses among several candidates: use --strategy beam (its N best) or sample")
    if args.nbest > 1 or args.alignments or args.attention_dir:
        raise MTError("--mbr writes one translation a line: not with --nbest, --alignments or --attention-dir")


def check_terms_args(args) -> None:
    """--terms and --glossary: placed by beam search; --terms on whole lines (a glossary's sentence by
    sentence, with --split-sentences)."""
    flag = "--terms" if args.terms else "--glossary" if args.glossary else None
    if flag is None:
        return
    if args.strategy in ("greedy", "sample") or args.beam == 1:
        raise MTError(f"{flag} needs beam search, which places the terms: not --strategy greedy or sample, or --beam 1")
    if args.terms and args.split_sentences:
        raise MTError(
            "--terms hold for a whole line: not with --split-sentences (--glossary's hold sentence by sentence)"
        )
    if args.engine == "ctranslate2":
        raise MTError(f"{flag} needs --engine torch (CTranslate2 has no lexically constrained search)")


def check_engine_args(args) -> None:
    """--device (default: CUDA when the engine sees one), --dtype and --engine, as translate and mt-score take
    them (parsers.engine_options): a one-line error for a combination that cannot run."""
    if args.device is None:
        args.device = "cuda" if cuda_available(args.engine) else "cpu"
    if args.device == "cuda" and not cuda_available(args.engine):
        raise MTError("--device cuda: no CUDA device is available")
    if args.dtype == "fp16" and args.device != "cuda":
        raise MTError("--dtype fp16 needs --device cuda; on CPU use bf16 or fp32")
    if args.engine == "torch" and args.dtype == "int8":
        raise MTError("--dtype int8 needs --engine ctranslate2 (export with mt-export)")


def models_note(args, translator) -> str:
    """The models decoding, for the summary line, where more than one: an ensemble, a reverse model."""
    models = f", an ensemble of {len(args.checkpoint)}" if args.ensemble and len(args.checkpoint) > 1 else ""
    return models + (f", reranked by the reverse model at weight {translator.reverse_weight:g}" if args.reverse else "")


def describe(settings) -> str:
    """The strategy in a few words, for the summary line."""
    rules = [f"at least {settings.min_len} pieces"] if settings.min_len else []
    rules += [f"no repeated {settings.no_repeat_ngram}-grams"] if settings.no_repeat_ngram else []
    rules += ["sentence by sentence"] if settings.split_sentences else []
    if settings.mbr:
        rules.insert(0, f"MBR over {settings.mbr} candidates by {settings.mbr_utility}")
        settings = settings.for_candidates()
    if settings.sampling:
        shape = [f"temperature {settings.temperature:g}"]
        shape += [f"top-k {settings.topk}"] if settings.topk else []
        shape += [f"top-p {settings.topp:g}"] if settings.topp < 1 else []
        shape += [f"epsilon {settings.epsilon:g}"] if settings.epsilon else []
        return ", ".join([f"sampling, {', '.join(shape)}, seed {settings.seed}", *rules])
    return ", ".join(["greedy" if settings.beam == 1 else f"beam {settings.beam}", *rules])


def cuda_available(engine: str) -> bool:
    if engine == "ctranslate2":
        from mt.decoding.ctranslate2_translator import cuda_available

        return cuda_available()
    import torch

    return torch.cuda.is_available()


def load_translator(args):
    """The engine's translator, decoding with the checkpoint's (or export's) settings and the flags on top."""
    choices = dict(
        strategy={None: None, "sample": "sample"}.get(args.strategy, "search"),  # None: the checkpoint's
        beam=1 if args.strategy == "greedy" else args.beam,
        alpha=args.alpha,
        max_len_a=args.max_len_a,
        max_len_b=args.max_len_b,
        nbest=args.nbest,
        batch_tokens=args.batch_tokens,
        tgt_lang=args.tgt_lang,
        **{name: getattr(args, name) for name in RULE_FIELDS + MBR_FIELDS},
        **{name: getattr(args, name) for name in SAMPLING_FLAGS},
    )
    if args.engine == "ctranslate2":
        translator = load_export_translator(args.checkpoint[0], args.device, args.dtype, args.max_src_len, **choices)
    else:
        from mt.inference import load_translator as load_torch_translator

        translator = load_torch_translator(
            args.checkpoint,
            args.device,
            ensemble=args.ensemble,
            max_src_len=args.max_src_len,
            precision=args.dtype,
            cuda_graphs=args.cuda_graphs,
            **choices,
        )
    searches = args.strategy == "beam" or args.terms or args.glossary or args.reverse  # these need a beam
    if searches and translator.settings.beam == 1:  # a checkpoint that decodes greedily
        translator = translator.with_settings(translator.settings.updated(beam=max(DEFAULT_BEAM, args.nbest)))
    if args.reverse:
        from mt.inference import load_translator as load_any

        translator = translator.with_reverse(load_any(args.reverse, args.device), args.reverse_weight)
    return translator


class LineFile:
    """A file of one line per input line (--prefix, --terms), read in the chunks the input comes in; a
    one-line error where it has fewer or more lines than the input."""

    def __init__(self, path: str | None, what: str, chunk_lines: int):
        self.path, self.what = path, what
        self.chunks = read_line_chunks(path, chunk_lines) if path else None

    def lines_for(self, chunk: list[str], first_line: int) -> list[str] | None:
        """The chunk's lines of this file (None without the flag)."""
        if self.chunks is None:
            return None
        lines = next(self.chunks, None)
        if lines is not None and len(lines) == len(chunk):
            return lines
        needed = first_line + len(chunk)
        if lines is not None and len(lines) > len(chunk):
            raise MTError(f"{self.path}: more {self.what} lines than the {counted(needed, 'input line')} (one each)")
        have = counted(first_line + len(lines or []), f"{self.what} line")
        raise MTError(f"{self.path}: {have} for {needed:,} or more input lines (one each)")

    def check_end(self, done: int) -> None:
        """A one-line error where the file goes on past the input's last line."""
        if self.chunks is not None and next(self.chunks, None):
            raise MTError(f"{self.path}: more {self.what} lines than the {counted(done, 'input line')} (one each)")


def run(args) -> None:
    """translate with the arguments of mt.cli.commands's parser."""
    check_args(args)
    start = time.perf_counter()
    translator = load_translator(args)
    if document_kind(args.input):
        return run_document(args, translator, describe(translator.settings) + models_note(args, translator))
    settings = translator.settings
    layer = args.attention_layer
    if layer is None and (args.alignments or args.attention_dir):  # word alignments: the layer that aligns best
        from mt.decoding.inline_tags import alignment_layer

        layer = alignment_layer(translator) if args.alignments == "words" else -1
    options = dict(attention_layer=layer, attention_head=args.attention_head)
    interactive = args.interactive or (args.input is None and sys.stdin.isatty())
    if interactive:
        chunks = (split_lines(decode_utf8(raw, "<stdin>")) or [""] for raw in sys.stdin.buffer)
    else:
        chunks = read_line_chunks(args.input, args.chunk_lines)
    first = next(chunks, None)  # a bad first chunk fails before any output exists
    prefix_file = LineFile(args.prefix, "prefix", args.chunk_lines)
    terms_file = LineFile(args.terms, "terms", args.chunk_lines)
    glossary = load_glossary(args.glossary, translator.languages, args.glossary_ignore_case)

    def per_line(chunk: list[str], first_line: int) -> dict:
        """The chunk's prefixes and terms, from their files."""
        terms = terms_of(terms_file.lines_for(chunk, first_line))
        return dict(prefixes=prefix_file.lines_for(chunk, first_line), terms=terms)

    side = per_line(first, 0) if first is not None else {}  # their first chunks, too, fail before any output
    pair = tmx_pair(translator.languages, settings.tgt_lang, args.output) if is_tmx_name(args.output) else None
    out = open_for_writing(args.output) if args.output else sys.stdout
    tmx = TmxWriter(out, *pair, mt.__version__) if pair else None
    done, noted, writing = 0, False, False
    shown = not (interactive or args.quiet) and sys.stderr.isatty()
    total = count_lines(args.input) if shown and args.input else None  # a file's size: the bar's end and ETA
    bar = tqdm(total=total, unit="line", disable=None if shown else True)
    glossed = 0  # lines that hold a glossary entry, for the summary
    try:
        for chunk in itertools.chain([first] if first is not None else [], chunks):
            side = side if done == 0 else per_line(chunk, done)
            results = translator.translate_nbest(chunk, first_line=done, glossary=glossary, **side, **options)
            glossed += sum(map(bool, glossary.terms(chunk))) if glossary is not None else 0
            if args.attention_dir:
                write_heatmaps(results, args.attention_dir, done)
            try:
                writing = True
                if tmx is not None:
                    out.write(tmx.units_of(chunk, [found[0].text for found in results]))
                else:
                    written = format_results(results, args.nbest, args.alignments, done, chunk)
                    out.write("".join(t + "\n" for t in written))
                out.flush()  # what is written stays written, whatever happens later
                writing = False
            except BrokenPipeError:
                raise
            except OSError as err:  # disk full, say: name the file (the error itself does not)
                raise writing_failed(args.output or "<stdout>", err) from None
            done += len(chunk)
            bar.update(len(chunk))
            if interactive and translator.several_sentences and not noted:  # said once, as it happens
                print(several_sentences_note(1, 1), file=sys.stderr)
                noted = True
        prefix_file.check_end(done)
        terms_file.check_end(done)
    except KeyboardInterrupt:
        raise StoppedAfter(done, "line", args.output, writing) from None
    finally:
        bar.close()
        if out is not sys.stdout:
            try:
                if tmx is not None:
                    tmx.end()  # a valid document even when stopped: the units written so far
                out.close()  # writes what is still buffered
            except OSError as err:
                raise writing_failed(args.output, err) from None
    if not args.quiet and not interactive:
        models = models_note(args, translator)
        models += f", {glossed} {'line holds' if glossed == 1 else 'lines hold'} glossary entries" if glossary else ""
        models += tmx.summary() if tmx is not None else ""
        if translator.protected:
            noun = ("sentence" if settings.split_sentences else "line") + ("" if translator.protected == 1 else "s")
            models += f", spans kept untranslated in {translator.protected} {noun}"
        seconds = time.perf_counter() - start
        lines = "line" if done == 1 else "lines"
        print(f"translated {done} {lines} in {seconds:.1f}s ({describe(settings)}{models})", file=sys.stderr)
    if translator.truncated:
        noun = "sentence" if settings.split_sentences else "line"  # what was cut: what was decoded
        print(truncation_warning(translator.truncated, noun, args.max_src_len), file=sys.stderr)
    if translator.terms_missed:
        noun = "sentence" if settings.split_sentences else "line"  # what was decoded
        print(terms_missed_warning(translator.terms_missed, noun), file=sys.stderr)
    if translator.several_sentences and not (args.quiet or interactive):
        print(several_sentences_note(translator.several_sentences, done), file=sys.stderr)
