"""Where XLIFF inline codes land in the translation: how often a code wrapping a source word wraps that word's
translation and nothing else, with codes placed by the model's alignment (decoder layer --layers, the
shipped default -2) or by relative position alone.

No reference alignment is needed: a lexicon scored by the Dice coefficient over the training pairs
(--train-src/--train-tgt) names each source word's usual translation; a test line is used where a source
word (or two adjacent ones, --span 2) has one, each occurring once in the line and once in the line's
plain translation. That word (or pair) is wrapped in <g>, the line translated as an XLIFF segment, and the
target's <g> checked: "exact" when it holds exactly the translation (the two translations and what lies
between, for a pair), "covers" when it holds them among other words.

    .venv/bin/python scripts/bench_tags.py --checkpoint runs/multi30k.de-en/smoke \\
        --train-src data/multi30k/train.de --train-tgt data/multi30k/train.en --src data/multi30k/test2016.de
Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
from collections import Counter
from pathlib import Path
from xml.dom import minidom
from xml.sax.saxutils import escape

import mt
import mt.decoding.xliff_translation as xliff_translation
from mt.data.lines import read_lines


def key(word: str) -> str:
    return re.sub(r"\W+", "", word.lower())


def dice_lexicon(sources: list[str], targets: list[str], least: int = 5, threshold: float = 0.5) -> dict[str, str]:
    """Each source word's most associated target word, where the Dice coefficient is at least threshold."""
    src_count, tgt_count, both = Counter(), Counter(), Counter()
    for s, t in zip(sources, targets):
        a, b = {key(w) for w in s.split()} - {""}, {key(w) for w in t.split()} - {""}
        src_count.update(a)
        tgt_count.update(b)
        both.update((x, y) for x in a for y in b)
    best: dict[str, tuple[str, float]] = {}
    for (x, y), n in both.items():
        dice = 2 * n / (src_count[x] + tgt_count[y])
        if n >= least and dice >= threshold and dice > best.get(x, ("", 0.0))[1]:
            best[x] = (y, dice)
    return {x: y for x, (y, _) in best.items()}


def cases_of(lines: list[str], plain: list[str], lexicon: dict[str, str], span: int, seed: int):
    """(line, first word) of one span a line whose words' translations each occur once in its translation."""
    rng, found = random.Random(seed), []
    for i, (line, translation) in enumerate(zip(lines, plain)):
        keys, out = [key(w) for w in line.split()], [key(w) for w in translation.split()]
        usable = {k for k in keys if k in lexicon and keys.count(k) == 1 and out.count(lexicon[k]) == 1}
        starts = [
            j
            for j in range(len(keys) - span + 1)
            if usable.issuperset(keys[j : j + span]) and len({lexicon[k] for k in keys[j : j + span]}) == span
        ]
        if starts:
            found.append((i, rng.choice(starts)))
    return found


def document(lines: list[str], cases, span: int, languages: tuple[str, str]) -> str:
    """An XLIFF 1.2 document of the cases' lines, each with its span wrapped in <g> (punctuation left out)."""
    units = []
    for n, (i, j) in enumerate(cases):
        words = lines[i].split()
        first, last = j, j + max(span, 1) - 1
        lead, trail = re.match(r"^\W*", words[first]).group(), re.search(r"\W*$", words[last]).group()
        words[last] = words[last][: len(words[last]) - len(trail)] + "\x02" + trail
        if span:  # wrapped in <g>, or (span 0) followed by an <x/>, as formatting after a word is
            words[first] = lead + "\x01" + words[first][len(lead) :]
        text = escape(" ".join(words)).replace("\x01", '<g id="1">').replace("\x02", "</g>" if span else '<x id="1"/>')
        units.append(f'<trans-unit id="{n}"><source>{text}</source></trans-unit>')
    head = '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="{}" '
    head += 'target-language="{}" datatype="plaintext"><body>'
    return head.format(*languages) + "".join(units) + "</body></file></xliff>"


def judged(path: Path, lines: list[str], cases, span: int, lexicon: dict[str, str]) -> tuple[float, float]:
    """(exact, covers) shares of the cases."""
    exact = covers = 0
    for (i, j), unit in zip(cases, minidom.parse(str(path)).getElementsByTagName("trans-unit")):
        wanted = [lexicon[key(w)] for w in lines[i].split()[j : j + max(span, 1)]]
        target = unit.getElementsByTagName("target")[0]
        if not span:  # an <x/> right after the word's translation: exact; after it at all: covers
            before = [key(w) for w in re.sub(r"<[^>]+>", "", target.toxml().split("<x ")[0]).split()]
            exact += bool(before) and before[-1] == wanted[0]
            covers += wanted[0] in before
            continue
        g = target.getElementsByTagName("g")[0]
        got = [key(w) for w in re.sub(r"<[^>]+>", "", g.toxml()).split()]
        covers += all(w in got for w in wanted)
        exact += bool(got) and got[0] == wanted[0] and got[-1] == wanted[-1] and all(w in got for w in wanted)
    return exact / len(cases), covers / len(cases)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--train-src", required=True)
    p.add_argument("--train-tgt", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--span", type=int, nargs="*", default=[1, 2, 0], help="words a code wraps (0: an <x/> after one)")
    p.add_argument("--layers", type=int, nargs="*", default=[-1, -2, -3], help="decoder layers to align with")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    translator = mt.load_translator(args.checkpoint, args.device)
    lexicon = dice_lexicon(read_lines(args.train_src), read_lines(args.train_tgt))
    lines = read_lines(args.src)
    plain = translator.translate(lines)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for span in args.span:
            cases = cases_of(lines, plain, lexicon, max(span, 1), args.seed)
            source, target = Path(folder) / "in.xlf", Path(folder) / "out.xlf"
            source.write_text(document(lines, cases, span, translator.languages), encoding="utf-8")
            for layer in [None, *args.layers]:
                xliff_translation.alignment_layer = lambda _, layer=layer: layer  # None: by position
                xliff_translation.translate_xliff(translator, source, str(target))
                exact, covers = judged(target, lines, cases, span, lexicon)
                row = dict(span=span, cases=len(cases), placed="by position" if layer is None else f"layer {layer}")
                rows.append({**row, "exact": round(exact, 3), "covers": round(covers, 3)})
                print(json.dumps(rows[-1]), flush=True)
    print("\n| words wrapped | cases | placed | exact | covers |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        wrapped = r["span"] or "an <x/> after 1"
        print(f"| {wrapped} | {r['cases']} | {r['placed']} | {r['exact']:.1%} | {r['covers']:.1%} |")


if __name__ == "__main__":
    main()
