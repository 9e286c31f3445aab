"""The console scripts' argument parsers, with the option groups several of them share; the entry points
in commands.py parse with them before importing torch or the model, so `--help` answers at once."""

from __future__ import annotations

import argparse
import difflib

from mt.cli.decoding_options import (
    constraint_options,
    glossary_option,
    mbr_options,
    protect_option,
    reverse_options,
    split_option,
    terms_options,
)
from mt.decoding.settings import SCORE_BATCH_TOKENS

CHECKPOINTS_HELP = (
    "checkpoint file(s), run directories (their final.pt) or Hub models (hf:OWNER/NAME); several are averaged"
)
ENSEMBLE_HELP = (
    "decode with the ensemble of the checkpoints (the mean of their next-token probabilities) instead of "
    "averaging their weights: for models trained apart (other seeds or settings) that share a tokenizer"
)


def checkpoint_options(p: argparse.ArgumentParser) -> None:
    """--checkpoint and --ensemble, as translate and mt-score take them."""
    p.add_argument(
        "--checkpoint",
        "-c",
        nargs="+",
        required=True,
        help=CHECKPOINTS_HELP,
    )
    p.add_argument("--ensemble", action="store_true", help=ENSEMBLE_HELP)


DTYPE_HELP = (
    "torch engine: fp32, bf16 or fp16 (default: what the model's run scored its test set in here: bf16 for a"
    " model trained in bf16 on a CPU with native bf16, else fp32)"
)
TGT_LANG_HELP = "the language to translate into, for a model of several target languages (e.g. fr)"


def engine_options(p: argparse.ArgumentParser) -> None:
    """--device, --dtype, --engine and --tgt-lang, as translate and mt-score take them."""
    p.add_argument("--tgt-lang", help=TGT_LANG_HELP)
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is one, else cpu")
    p.add_argument(
        "--dtype",
        choices=["fp32", "bf16", "fp16", "int8"],
        help=DTYPE_HELP + "; ctranslate2: as exported (default), or any",
    )
    p.add_argument(
        "--engine",
        choices=["torch", "ctranslate2"],
        default="torch",
        help="ctranslate2: --checkpoint is a directory written by mt-export",
    )


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, whose usage error is one line (not under translate's 25 lines of usage) that names
    the option an unknown one resembles (`--beem 5`: did you mean --beam?)."""

    def error(self, message: str):
        hint = f"see {self.prog} --help"
        if message.startswith("unrecognized arguments: "):
            options = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
            for word in message.split(": ", 1)[1].split():
                close = word.startswith("--") and difflib.get_close_matches(word.split("=")[0], options, 1, 0.7)
                if close:
                    hint = f"did you mean {close[0]}?"
                    break
        self.exit(2, f"{self.prog}: error: {message} ({hint})\n")


def command_parser(prog: str, description: str, examples: list[str], page: str) -> argparse.ArgumentParser:
    """A command's parser whose --help ends with examples and the page that tells more; every command takes
    --debug (report_errors reads it)."""
    p = CommandParser(
        prog=prog,
        description=description,
        epilog="examples:\n" + "".join(f"  {example}\n" for example in examples) + f"every option: {page}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def translate_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "translate",
        "Translate raw text with a trained checkpoint, a line at a time: N lines in, N lines out.",
        [
            "translate -c runs/multi30k.de-en/smoke < in.de > out.en      # a run directory: its final.pt",
            "translate -c model.pt -i in.de -o out.en.gz --beam 5         # beam search, written gzip-compressed",
            "translate -c model.pt --nbest 3 < in.de                      # the 3 best per line, tab-separated",
            "translate -c a.pt b.pt --ensemble --split-sentences < in.de  # two models; paragraphs a line",
            "translate -c model.pt -i film.de.srt -o film.en.srt          # subtitles, their timing kept",
            "translate -c model.pt -i bericht.docx -o report.docx         # Word (or .pptx, .odt, ...), its formatting",
            "translate -c model.pt -i docs/ -o docs.en/                   # a folder, file by file",
        ],
        "docs/translate.md",
    )
    model = p.add_argument_group("model")
    checkpoint_options(model)
    files = p.add_argument_group("input and output")
    files.add_argument(
        "--input",
        "-i",
        help="input file (default: stdin), or a folder translated file by file into -o FOLDER; a document is "
        "translated whole, its markup kept: XLIFF (.xlf, .xliff), "
        "a PO catalogue (.po, .pot), HTML (.html, .htm), subtitles (.srt, .vtt, .ass, .ssa), Markdown (.md), "
        "Word, PowerPoint, Excel (.docx, .pptx, .xlsx), OpenDocument (.odt, .odp, .ods), an EPUB book (.epub)",
    )
    files.add_argument(
        "--output",
        "-o",
        help="output file, compressed if named .gz, .xz or .bz2, a TMX memory if .tmx (default: stdout); a folder "
        "for a folder input",
    )
    search = p.add_argument_group("search")
    search.add_argument(
        "--strategy",
        choices=["greedy", "beam", "sample"],
        help="greedy, beam search, or sampling (default: the checkpoint's: beam search, greedy where its beam is 1)",
    )
    search.add_argument("--beam", type=int, help="beam size; 1 = greedy (default: the checkpoint's decode.beam)")
    search.add_argument("--alpha", type=float, help="length penalty exponent (default: the checkpoint's)")
    search.add_argument(
        "--nbest", type=int, default=1, help="hypotheses (samples, when sampling) to write per line, tab-separated"
    )
    sampling = p.add_argument_group("sampling (--strategy sample)")
    sampling.add_argument("--temperature", type=float, help="divide the logits by T (< 1 sharper; default 1)")
    sampling.add_argument("--topk", type=int, help="draw among the K most likely tokens only (default 0: all)")
    sampling.add_argument("--topp", type=float, help="draw within the top-P probability mass (default 1: all)")
    sampling.add_argument(
        "--epsilon", type=float, help="never draw a token below this probability (default 0: no cut; MBR: 0.02)"
    )
    sampling.add_argument("--seed", type=int, help="seed (default 0); each line's draws come from it and its number")
    mbr_options(p.add_argument_group("minimum Bayes risk"))
    reverse_options(p.add_argument_group("reranking"))
    rules = p.add_argument_group("what a translation may be")
    rules.add_argument("--prefix", help="file of target prefixes, one per input line: each translation's start")
    terms_options(rules, "input")
    limits = p.add_argument_group("batches and lengths")
    limits.add_argument("--batch-tokens", type=int, help="source tokens per batch (default: the checkpoint's)")
    limits.add_argument("--max-len-a", type=float, help="output at most a*|source|+b pieces")
    limits.add_argument("--max-len-b", type=int)
    limits.add_argument("--max-src-len", type=int, default=1024, help="longer inputs are truncated (and counted)")
    constraint_options(rules)
    split_option(rules)
    protect_option(rules)
    engine = p.add_argument_group("engine and device")
    engine_options(engine)
    engine.add_argument(
        "--cuda-graphs",
        action="store_true",
        default=None,
        help="torch engine, Transformer: greedy and beam search in fixed slots, each step a replayed CUDA graph "
        "on CUDA (the same translations; default: the checkpoint's decode.cuda_graphs)",
    )
    attention = p.add_argument_group("attention")
    attention.add_argument("--attention-dir", help="write a cross-attention heatmap (SVG) per input line here")
    attention.add_argument(
        "--attention-layer",
        type=int,
        help="decoder layer for heatmaps/alignments (default: the last; for word alignments the one before it)",
    )
    attention.add_argument("--attention-head", type=int, help="one head for heatmaps/alignments (default: mean)")
    attention.add_argument(
        "--alignments",
        nargs="?",
        const="words",
        choices=("words", "pieces"),
        help="append the alignment after a tab: source-target word pairs (words, the default), or each target "
        "piece's most attended source piece (pieces)",
    )
    files.add_argument(
        "--interactive",
        action="store_true",
        help="translate each line as it arrives and flush (the default when stdin is a terminal)",
    )
    files.add_argument(
        "--chunk-lines",
        type=int,
        default=4_000,
        help="read, translate and write this many lines at a time (sorted by length within)",
    )
    files.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary on stderr")
    return p


def evaluate_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "mt-evaluate",
        "Score translations with sacreBLEU (BLEU and chrF): a model's of a split or file, or given ones.",
        [
            "mt-evaluate -c runs/multi30k.de-en/smoke                  # the run's test split",
            "mt-evaluate -c model.pt --split valid --beam 1 5          # a sweep over beam sizes",
            "mt-evaluate -c model.pt --src test.de --ref test.en -o test.hyp",
            "mt-evaluate --hyp a.hyp b.hyp --ref test.en               # does b beat a beyond chance?",
        ],
        "docs/translate.md",
    )
    scored = p.add_argument_group("what to score")
    scored.add_argument("--checkpoint", "-c", nargs="+", help=CHECKPOINTS_HELP)
    scored.add_argument("--ensemble", action="store_true", help=ENSEMBLE_HELP)
    scored.add_argument(
        "--split", help="a split of the checkpoint's training data (default: its test split, e.g. test2016)"
    )
    scored.add_argument(
        "--direction",
        help="SRC-TGT, for a model of several languages: that direction's pairs (with --split; default: every "
        "direction, then their mean) or target (with --src)",
    )
    scored.add_argument("--src", help="source file to translate")
    scored.add_argument(
        "--ref",
        nargs="+",
        help="reference file; several: references of the same lines, each line scored against all (multi-reference)",
    )
    scored.add_argument(
        "--hyp",
        nargs="+",
        help="score this file of translations instead of translating; several: each against the first, by "
        "paired bootstrap resampling",
    )
    scored.add_argument(
        "--samples", type=int, default=0, help="resamples of the paired test of several --hyp (default 1,000)"
    )
    scored.add_argument(
        "--bleu-tokenize",
        metavar="TOK",
        help="how BLEU splits text into words, one of sacreBLEU's (13a, intl, char, zh, ja-mecab, ko-mecab, "
        "flores200, ...); default: the model's decode.bleu_tokenize, else by the target language (zh, ja-mecab or "
        "ko-mecab for Chinese, Japanese, Korean; with --hyp, the language of --ref's name, test.zh), else 13a",
    )
    written = p.add_argument_group("output")
    written.add_argument("--output", "-o", help="write the translations here (.gz, .xz, .bz2: compressed)")
    written.add_argument("--json", help="write the scores here as JSON")
    decoding = p.add_argument_group("decoding")
    decoding.add_argument("--beam", type=int, nargs="+", help="beam size(s) (default: the checkpoint's decode.beam)")
    decoding.add_argument(
        "--alpha", type=float, nargs="+", help="length penalty exponent(s) (default: the checkpoint's)"
    )
    decoding.add_argument(
        "--choose-on",
        metavar="SPLIT",
        help="decode this split (e.g. valid) with every --beam/--alpha, then score --split/--src once with the best",
    )
    constraint_options(decoding)
    split_option(decoding)
    protect_option(decoding)
    mbr_options(decoding)
    reverse_options(decoding, several=True)
    terms = p.add_argument_group("required terms (counted in the translations; with --hyp, give --src)")
    terms_options(terms, "source")
    device = p.add_argument_group("device")
    device.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is one, else cpu")
    device.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], help=DTYPE_HELP)
    return p


def score_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "mt-score",
        "Score given translations with a trained model: log P(target | source) per pair (forced decoding), for "
        "filtering corpora, reranking and perplexity.",
        [
            "mt-score -c runs/multi30k.de-en/smoke --src test.de --tgt test.en > scores.txt",
            "mt-score -c model.pt --src crawl.de --tgt crawl.en --normalize -o scores.txt.gz  # to filter a corpus",
        ],
        "docs/translate.md",
    )
    checkpoint_options(p)
    p.add_argument("--src", help="source file (with --tgt; default: 'source<TAB>target' lines on stdin)")
    p.add_argument("--tgt", help="target file, line-aligned with --src")
    p.add_argument("--output", "-o", help="output file, compressed if named .gz, .xz or .bz2 (default: stdout)")
    p.add_argument("--json", help="write the summary (pairs, pieces, log-probability per piece, perplexity) here")
    p.add_argument(
        "--normalize", action="store_true", help="per target piece (EOS included) instead of the sentence's sum"
    )
    p.add_argument("--pieces", action="store_true", help="append the target's pieces and each one's log-probability")
    p.add_argument(
        "--batch-tokens",
        type=int,
        default=SCORE_BATCH_TOKENS,
        help=f"padded tokens per batch (default {SCORE_BATCH_TOKENS}; its logits are tokens x vocabulary floats)",
    )
    p.add_argument("--max-src-len", type=int, default=1024, help="longer sources are truncated (and counted)")
    p.add_argument("--chunk-lines", type=int, default=2_000, help="read, score and write this many pairs at a time")
    engine_options(p)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary on stderr")
    return p


def export_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "mt-export",
        "Export a Transformer checkpoint to CTranslate2, for translate --engine ctranslate2, mt-serve --export "
        "or CTranslate2's own API.",
        [
            "mt-export -c runs/multi30k.de-en/smoke -o export/smoke            # a run directory: its final.pt",
            "mt-export -c model.pt -o export/int8 --quantization int8          # int8 weights: a quarter the size",
        ],
        "docs/deploy.md",
    )
    p.add_argument("--checkpoint", "-c", nargs="+", required=True, help=CHECKPOINTS_HELP)
    p.add_argument("--output", "-o", required=True, help="the export directory to write")
    p.add_argument(
        "--quantization",
        "-q",
        default="none",
        choices=["none", "int8", "int8_float16", "int8_float32", "float16", "bfloat16"],
        help="weight type of the export (none: fp32)",
    )
    p.add_argument("--force", action="store_true", help="replace --output if it is an earlier export (or empty)")
    return p


def info_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "mt-info",
        "What a checkpoint (or an mt-export directory) is: the direction it translates, its model and tokenizer, "
        "the data and training that made it, how it decodes, and its run's test score.",
        [
            "mt-info runs/multi30k.de-en/smoke                     # a run directory: its final.pt",
            "mt-info runs/*/*/checkpoints/final.pt --json > models.json",
            "mt-info runs/multi30k.de-en/smoke-sweep               # a sweep's folder: its runs side by side",
            "mt-info --system                                      # this machine: versions, devices, threads",
        ],
        "docs/training.md",
    )
    p.add_argument(
        "checkpoint", nargs="*", help="checkpoint files, run, export or sweep directories, Hub models (hf:OWNER/NAME)"
    )
    p.add_argument("--system", action="store_true", help="describe this machine instead, as a run here uses it")
    p.add_argument("--json", action="store_true", help="print JSON (a list for several) instead of text")
    p.add_argument("--card", metavar="OWNER/NAME", help="print a model card for the Hub repository: its README.md")
    return p


def serve_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "mt-serve",
        "Serve a trained model over HTTP: POST /translate, GET /health, and a web page at /.",
        [
            "mt-serve -c runs/multi30k.de-en/smoke                   # http://127.0.0.1:8000/ on this machine",
            "mt-serve --export export/smoke --host 0.0.0.0 --port 8080  # CTranslate2, open to the network",
        ],
        "docs/serve.md",
    )
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--checkpoint", "-c", nargs="+", help=CHECKPOINTS_HELP)
    model.add_argument("--export", help="an mt-export directory (or Hub model): served by CTranslate2, without torch")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--cors-origin",
        nargs="+",
        metavar="ORIGIN",
        help="let web pages of these origins (https://example.com, or * for any) call the API from a browser",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is one, else cpu")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16", "int8"], help="as translate --dtype")
    p.add_argument("--tgt-lang", help="the default target language, for a model of several (a request may choose)")
    p.add_argument("--beam", type=int, help="the default beam size (default: the checkpoint's decode.beam)")
    p.add_argument("--alpha", type=float, help="the default length penalty (default: the checkpoint's)")
    constraint_options(p)
    split_option(p)
    protect_option(p)
    mbr_options(p)
    glossary_option(p)
    reverse_options(p)
    p.add_argument("--batch-tokens", type=int, help="source tokens a batch of requests holds at most")
    p.add_argument(
        "--max-wait-ms", type=float, default=5.0, help="how long a request waits for others to share its batch"
    )
    p.add_argument(
        "--decoding-threads",
        type=int,
        help="batches decoded side by side, sharing the cores (default: 2 on a CPU, 1 on a GPU)",
    )
    p.add_argument("--max-lines", type=int, default=64, help="lines a request may hold")
    p.add_argument("--max-line-chars", type=int, default=2000, help="characters a line may hold")
    p.add_argument("--max-bytes", type=int, default=256 * 1024, help="bytes a request body may hold")
    p.add_argument(
        "--max-document-bytes",
        type=int,
        default=10 * 1024 * 1024,
        help="bytes a document (/xliff, /po, /html, /subtitles, /markdown) may hold",
    )
    p.add_argument("--max-beam", type=int, default=8, help="the largest beam (nbest, mbr) a request may ask for")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    return p
