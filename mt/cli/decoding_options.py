"""The decoding options several console scripts share (translate, mt-evaluate, mt-serve): each group as
one function, so that a flag reads the same wherever it is taken."""

from __future__ import annotations

import argparse

from mt.decoding.protected_spans import DEFAULT, KINDS
from mt.decoding.rerank import DEFAULT_REVERSE_WEIGHT
from mt.errors import MTError


def constraint_options(p: argparse.ArgumentParser) -> None:
    """--min-len and --no-repeat-ngram (mt/decoding/constraints.py), as translate and mt-evaluate take them."""
    p.add_argument(
        "--min-len", type=int, help="no end of sentence before N pieces (default: the checkpoint's decode.min_len, 0)"
    )
    p.add_argument(
        "--no-repeat-ngram",
        type=int,
        metavar="N",
        help="no N pieces in a row twice in one translation, against loops (default: the checkpoint's, 0: off)",
    )


def mbr_options(p: argparse.ArgumentParser) -> None:
    """--mbr and --mbr-utility (mt/decoding/mbr.py), as translate, mt-evaluate and mt-serve take them."""
    p.add_argument(
        "--mbr",
        type=int,
        metavar="N",
        help="minimum Bayes risk: draw N candidates a line (samples, or the N best of a beam) and keep the one "
        "that agrees most with the others (default: the checkpoint's decode.mbr, 0: off)",
    )
    p.add_argument(
        "--mbr-utility",
        choices=["chrf", "bleu"],
        help="how --mbr compares two candidates: sentence chrF or BLEU (default: the checkpoint's, chrf)",
    )


def glossary_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--glossary",
        metavar="FILE",
        help="file of source<TAB>target entries: a line that holds a source entry (as whole words) must translate "
        "it as its target (required terms, placed by beam search)",
    )
    p.add_argument(
        "--glossary-ignore-case",
        action="store_true",
        help="find the glossary's source entries in any case (bank: also Bank, BANK); targets stay as written",
    )


def check_glossary_args(args) -> None:
    """--glossary-ignore-case without --glossary: one line, not a flag silently ignored."""
    if args.glossary_ignore_case and not args.glossary:
        raise MTError("--glossary-ignore-case says how --glossary's entries are found: give --glossary")


def terms_options(p: argparse.ArgumentParser, lines: str) -> None:
    """--terms and --glossary (mt/decoding/terms.py, glossary.py), as translate and mt-evaluate take them."""
    said = f"file of terms, a line per {lines} line, tab-separated: each translation holds them"
    p.add_argument("--terms", help=said)
    glossary_option(p)


def split_option(p: argparse.ArgumentParser) -> None:
    """--split-sentences (mt/decoding/sentences.py), as translate, mt-evaluate and mt-serve take it."""
    p.add_argument(
        "--split-sentences",
        action=argparse.BooleanOptionalAction,
        help="cut each line into sentences, translate them apart and join the translations into one line: "
        "for paragraphs, where a model trained on single sentences drops some (default: the checkpoint's, off)",
    )


def protect_option(p: argparse.ArgumentParser) -> None:
    """--protect (mt/decoding/protected_spans.py), as translate, mt-evaluate and mt-serve take it."""
    p.add_argument(
        "--protect",
        metavar="KINDS",
        help="spans carried through untranslated, put back where the model aligns their neighbouring words: a "
        f"comma-separated list of {', '.join(KINDS)}, or none (default: the checkpoint's, {DEFAULT})",
    )


def reverse_options(p: argparse.ArgumentParser, several: bool = False) -> None:
    """--reverse and --reverse-weight (mt/decoding/rerank.py), as translate, mt-serve and mt-evaluate (several
    weights, to tune it) take them."""
    p.add_argument(
        "--reverse",
        metavar="CKPT",
        help="a model that translates the other way (target -> source): the beam's candidates are reranked by how "
        "well it gets the source back from each, against dropped or invented content",
    )
    sweep = "; several: each reranks the same candidates, the best named" if several else ""
    p.add_argument(
        "--reverse-weight",
        type=float,
        nargs="+" if several else None,
        metavar="W",
        help="a candidate's score: the beam's + W x the reverse model's log-probability per source piece "
        f"(default {DEFAULT_REVERSE_WEIGHT:g}){sweep}",
    )
