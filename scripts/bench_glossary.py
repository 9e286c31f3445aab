"""How long finding a glossary's entries in the input takes, by the glossary's size: what translate --glossary
and mt-serve --glossary do to every line before decoding it. Glossaries of N entries (random words of 4-12
letters, and two words the text holds) over the lines of a file, compiled as mt's trie and, as the
yardstick, as one alternation of the entries (longest first) the way a plain regular expression is written.
Both must find the same entries.

    .venv/bin/python scripts/bench_glossary.py --src data/multi30k/test2016.de --entries 100 1000 10000
Prints one JSON object per size, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import time

from mt.data.lines import read_lines
from mt.languages import phrase_pattern


def alternation(phrases: list[str]) -> re.Pattern:
    """The yardstick: every phrase tried at every place, longest first, as whole words."""
    longest_first = sorted(phrases, key=len, reverse=True)
    return re.compile("|".join(r"(?<!\w)" + re.escape(p) + r"(?!\w)" for p in longest_first))


def timed(pattern_of, phrases: list[str], lines: list[str]) -> tuple[float, float, list]:
    """Seconds to compile, seconds to scan every line, and what was found."""
    start = time.perf_counter()
    pattern = pattern_of(phrases)
    compiled = time.perf_counter()
    found = [[m.group(0) for m in pattern.finditer(line)] for line in lines]
    return compiled - start, time.perf_counter() - compiled, found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", default="data/multi30k/test2016.de")
    p.add_argument("--lang", default="de")
    p.add_argument("--entries", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--known", nargs="*", default=["Hund", "Mann"], help="entries the text holds")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    lines = read_lines(args.src)
    rng = random.Random(args.seed)
    rows = []
    for size in args.entries:
        words = {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 12))) for _ in range(size)}
        phrases = sorted(words)[: size - len(args.known)] + list(args.known)
        trie = timed(lambda ps: phrase_pattern(ps, args.lang), phrases, lines)
        plain = timed(alternation, phrases, lines)
        if trie[2] != plain[2]:
            raise SystemExit(f"{size} entries: the trie and the alternation found different entries")
        row = {"entries": len(phrases), "lines": len(lines), "lines_with_entries": sum(map(bool, trie[2]))}
        row |= {"trie_compile_s": trie[0], "trie_scan_s": trie[1], "alternation_compile_s": plain[0]}
        row |= {"alternation_scan_s": plain[1]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'entries':>8}  {'trie: compile, scan':>22}  {'alternation: compile, scan':>28}  scan ratio")
    for r in rows:
        trie = f"{r['trie_compile_s'] * 1e3:.0f} ms, {r['trie_scan_s'] * 1e3:.1f} ms"
        plain = f"{r['alternation_compile_s'] * 1e3:.0f} ms, {r['alternation_scan_s'] * 1e3:.1f} ms"
        print(f"{r['entries']:>8}  {trie:>22}  {plain:>28}  {r['alternation_scan_s'] / r['trie_scan_s']:.0f}x")


if __name__ == "__main__":
    main()
