"""Translate a paragraph one sentence at a time (decode.split_sentences, `translate --split-sentences`).

Parallel corpora pair single sentences, and a model trained on them translates a line holding several
sentences poorly: it drops or merges some (measured in docs/benchmarks.md). With splitting on, each line
is cut into sentences, every sentence is translated as a line of its own (all of them batched together),
and the translations are joined back into one line: N lines in, N lines out still.

The rule is deliberately cautious and names no language: a sentence ends at . ! ? or … (closing quotes
and brackets may follow) where whitespace follows and the next word does not start in lower case; a
single period after a one-letter word (initials, "z. B."), a number of up to three digits (German and
Czech ordinals: "am 3. Oktober"), a word with an inner period ("e.g.") or a common abbreviation ("Dr.")
ends nothing, and nothing ends inside a quotation ('He shouted "Stop! Now!" and ran.'). Chinese and
Japanese 。！？ end a sentence without a space; French guillemets may stand apart from their words
("« Il pleut. » Elle part." is two sentences). A missed boundary costs what translating the line whole
costs; a wrong one cuts a sentence in two.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from mt.decoding.settings import DecodeSettings, Translation, check_aligned, line_seed
from mt.errors import MTError

# Lower-cased, without their period: titles and other abbreviations that a capitalised word follows.
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs no nr fig vol ca bzw vgl hr fr mme mlle mgr sra srta dott ing dipl"
    " gen col lt sgt capt rev hon".split()
)
# Closing quotes of any convention, and French guillemets after a space ("« Il pleut. » Elle part."),
# where a space follows them too (German's »Gut.« opens with »: "Er ging. »Gut.«" keeps its cut).
_END = re.compile(r"([.!?…]+|[。！？]+)((?:\s+»(?=\s|$))?[\"'”’“‘»«)\]]*)(\s*)")
_OPENING = "\"'“‘«»„‚([¿¡"
_QUOTES = '"“”«»„'  # double quotation marks (single ones double as apostrophes)


@dataclass(frozen=True)
class Split:
    """A line cut into sentences: line == sentences[0] + separators[0] + sentences[1] + ..."""

    sentences: list[str]
    separators: list[str]  # the whitespace between neighbours ("" after 。！？)


def split_sentences(line: str) -> Split:
    """The line's sentences (one, the line itself, where no boundary is found)."""
    sentences, separators, start = [], [], 0
    for end in _END.finditer(line):
        after = end.end()
        if after == len(line) or not _ends_sentence(line, end) or _inside_quotes(line[start : end.end(2)]):
            continue
        sentences.append(line[start : end.start(3)])
        separators.append(end.group(3))
        start = after
    return Split(sentences + [line[start:]], separators)


def several_sentences(lines: list[str]) -> int:
    """How many lines the cut finds more than one sentence in: lines that a model trained on single
    sentences may translate in part, when they are translated whole."""
    return sum(len(split_sentences(line).sentences) > 1 for line in lines)


def several_sentences_note(count: int, lines: int, where: str = "", flag: str = "--split-sentences") -> str:
    """The line that tells a caller who translated lines whole how many of them hold several sentences."""
    if lines == 1:
        held = "the line holds"
    else:
        held = f"{count:,} of {lines:,} lines hold" if count > 1 else f"1 of {lines:,} lines holds"
    where = f"{where}: " if where else ""
    return (
        f"note: {where}{held} several sentences, translated whole; a model trained on single sentences may leave "
        f"some of them out: {flag} translates them one by one"
    )


def _ends_sentence(line: str, end: re.Match) -> bool:
    punctuation, space = end.group(1), end.group(3)
    if punctuation[0] in "。！？":
        return True
    nxt = line[end.end() :].lstrip(_OPENING).lstrip()[:1]  # French opens with "« " and a space
    if not space or not nxt.isalpha() or nxt.islower():
        return False
    if punctuation != ".":
        return True
    start = end.start()
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    word = line[start : end.start()].lstrip(_OPENING)  # the word the period ends
    return not (
        (len(word) == 1 and word.isalpha())
        or (word.isdigit() and len(word) <= 3)
        or "." in word
        or word.lower() in ABBREVIATIONS
    )


def _inside_quotes(text: str) -> bool:
    """Whether a quotation opened in text is still open at its end: "Stop! Now!" is one sentence. Every
    quotation mark of any convention turns the state over, except „, which only opens; nesting is not
    tracked. A stray mark leaves the rest of its line uncut: cautious again."""
    inside = False
    for char in text:
        if char in _QUOTES:
            inside = True if char == "„" else not inside
    return inside


def join_sentences(texts: list[str], separators: list[str]) -> str:
    """The sentences' translations as one line: a space between two, or nothing where the source had
    none (after 。) and the translations meet in a wide script; an empty translation adds no space."""
    line = texts[0]
    for separator, text in zip(separators, texts[1:]):
        if not text:
            continue
        if line:
            wide = not separator and _wide(line[-1]) and _wide(text[0])
            line += "" if wide else " "
        line += text
    return line


def _numbers(split: Split) -> range:
    return range(len(split.sentences))


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def translate_by_sentence(
    translate_nbest: Callable, settings: DecodeSettings, lines: list[str], glossary=None, **options
) -> list[list[Translation]]:
    """translate_nbest (an engine's, taking the same options) over each line's sentences, joined back
    per line. A forced prefix starts the line's first sentence; in sampling, the line's seed draws its
    first sentence (a line of one sentence samples as without splitting) and seeds the others; a glossary
    (mt/decoding/glossary.py) requires its targets of each sentence that holds its entries. A joined
    translation's score is the sum of its sentences' scores."""
    if options.get("attention_layer") is not None:
        raise MTError("attention maps and alignments take one sentence a line: leave split_sentences off")
    prefixes, seeds = options.pop("prefixes", None), options.pop("seeds", None)
    first_line = options.pop("first_line", 0)
    check_aligned(lines, prefixes, "prefixes")
    check_aligned(lines, seeds, "seeds")
    splits = [split_sentences(line) for line in lines]
    sentences = [sentence for split in splits for sentence in split.sentences]
    if prefixes:
        options["prefixes"] = [p if j == 0 else "" for p, split in zip(prefixes, splits) for j in _numbers(split)]
    options.pop("terms", None)  # a line's, each empty here (check_terms_use refuses others sentence by sentence)
    if glossary is not None:
        options["terms"] = glossary.terms(sentences)
    if settings.sampling:
        seeds = seeds or [line_seed(settings.seed, first_line + i) for i in range(len(lines))]
        options["seeds"] = [
            s if j == 0 else line_seed(s, j) for s, split in zip(seeds, splits) for j in _numbers(split)
        ]
    found = iter(translate_nbest(sentences, **options))
    results = []
    for split in splits:
        parts = [next(found)[0] for _ in split.sentences]
        joined = Translation(
            join_sentences([part.text for part in parts], split.separators),
            sum(part.score for part in parts),
            [piece for part in parts for piece in part.src_pieces],
            [piece for part in parts for piece in part.tgt_pieces],
        )
        results.append([joined])
    return results
