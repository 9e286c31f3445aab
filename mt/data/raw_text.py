"""Text that looks preprocessed already: tokenized (Moses escapes, hyphens split off, spaces before commas
and full stops), split into subwords (BPE's @@ joiners, sentencepiece's ▁) or lowercased.

A run wants raw text: it trains its own sentencepiece model on it and scores detokenized translations
against the raw references. Given files another pipeline prepared (Moses scripts, a fairseq or subword-nmt
recipe), the model learns to write escapes and split words, and its scores compare it with text no reader
writes. So the signs are counted on the text at hand before training (the sample the tokenizer learns
from, the valid and test splits), and a sign on more than a twentieth of a side's lines is a warning: raw
text shows any of them on a handful of lines at most (Multi30k: at most 0.1% of a file's lines). Lowercased
text is a sign only on over half the lines (a line with letters of a cased script but no capital): raw
sentences start with one (Multi30k: at most 0.4% of a file's lines have none), and a side in a caseless
script (Chinese, Arabic, Thai) with a few Latin words in lowercase stays far below.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

SIGNS = {
    "Moses escapes such as &apos;": re.compile(r"&(?:apos|quot|amp|lt|gt|#124|#91|#93);"),
    "hyphens split off as @-@": re.compile(r" @[-,.]@ "),
    "BPE joiners @@": re.compile(r"@@(?: |$)"),
    "sentencepiece pieces ▁": re.compile("\u2581"),
    "spaces before commas and full stops": re.compile(r"\w ,(?: |$)|\w \.$"),
}
SHARE = 0.05  # of a side's lines, above which a sign is the text's, not noise
LOWERCASED = "lowercased text (no capital letter)"
LOWERCASED_SHARE = 0.5
LOOKED_AT = 20_000  # lines a side, spread over it: a sign on 5% of them is plain from these


def preprocessing_signs(lines: list[str]) -> list[str]:
    """Each sign found on more than SHARE of the non-blank lines looked at (lowercasing: on more than
    LOWERCASED_SHARE), with its count ("BPE joiners @@ on 2,812 of 3,000 lines"); none for raw text."""
    step = max(1, len(lines) // LOOKED_AT)
    looked = [line for line in lines[::step] if line.strip()]
    found = []
    for sign, pattern in SIGNS.items():
        count = sum(1 for line in looked if pattern.search(line))
        if looked and count > SHARE * len(looked):
            found.append(f"{sign} on {count:,} of {len(looked):,} lines")
    count = sum(1 for line in looked if _lowercased(line))
    if looked and count > LOWERCASED_SHARE * len(looked):
        found.append(f"{LOWERCASED} on {count:,} of {len(looked):,} lines")
    return found


def _lowercased(line: str) -> bool:
    """Letters of a cased script, none of them a capital."""
    return line == line.lower() and line != line.upper()


def warn_if_preprocessed(origin: str, sides: dict[str, list[str]]) -> list[str]:
    """A warning for each side (name -> its lines) of the corpus read from origin that looks preprocessed;
    returns the warnings (said in the log)."""
    said = []
    for side, lines in sides.items():
        signs = preprocessing_signs(lines)
        if signs:
            said.append(
                f"data: {origin}: its {side} side looks preprocessed ({'; '.join(signs)}); give raw text, as "
                "written: the run trains its own tokenizer, and scores translations against raw references"
            )
            log.warning("%s", said[-1])
    return said
