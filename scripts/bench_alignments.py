"""How well `translate --alignments` links a source word to its translation: words (the default: the decoder
layer before the last, each source word's most attending target word and each target word no source word
chose) against pieces (each target piece's most attended source piece), taken to words.

No reference alignment is needed: as scripts/bench_tags.py does, a lexicon scored by the Dice coefficient
over the training pairs (--train-src/--train-tgt) names each source word's usual translation; a link is
"sure" where a source word has one, each occurring once in the line and once in its translation. Recall:
the share of sure links the alignment holds; precision: of the links it gives those source words, the
share that are the sure ones (a word linked to its translation and its article scores 50%).

    .venv/bin/python scripts/bench_alignments.py --checkpoint runs/multi30k.de-en/smoke \\
        --train-src data/multi30k/train.de --train-tgt data/multi30k/train.en --src data/multi30k/test2016.de
Prints one JSON object per way of aligning, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json

from bench_tags import dice_lexicon, key

import mt
from mt.data.lines import read_lines
from mt.decoding.attention_maps import hard_alignment, word_alignment


def piece_words(pieces: list[str]) -> list[int | None]:
    """The word (0-based, split at spaces) each piece belongs to; None for EOS."""
    found, word = [], -1
    for piece in pieces:
        word += piece.startswith("\u2581") or word < 0
        found.append(None if piece == "</s>" else word)
    return found


def pieces_to_words(hyp) -> set[tuple[int, int]]:
    """The piece alignment (each target piece's most attended source piece) as word links."""
    src, tgt = piece_words(hyp.src_pieces), piece_words(hyp.tgt_pieces)
    return {
        (src[s], tgt[t])
        for s, t in hard_alignment(hyp.attention)
        if s < len(src) and t < len(tgt) and src[s] is not None and tgt[t] is not None
    }


def scored(lines: list[str], hyps, links: list[set[tuple[int, int]]], lexicon: dict[str, str]) -> dict:
    """Recall and precision of the links on the sure ones (see above)."""
    sure = held = given = 0
    for line, hyp, found in zip(lines, hyps, links):
        source, target = [key(w) for w in line.split()], [key(w) for w in hyp.text.split()]
        for i, word in enumerate(source):
            if word in lexicon and source.count(word) == 1 and target.count(lexicon[word]) == 1:
                mine = {t for s, t in found if s == i}
                sure, held, given = sure + 1, held + (target.index(lexicon[word]) in mine), given + len(mine)
    recall, precision = round(100 * held / max(sure, 1), 1), round(100 * held / max(given, 1), 1)
    return {"sure_links": sure, "recall": recall, "precision": precision}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--train-src", required=True)
    p.add_argument("--train-tgt", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--layers", default="-1,-2", help="decoder layers to align at, comma-separated")
    args = p.parse_args()
    lexicon = dice_lexicon(read_lines(args.train_src), read_lines(args.train_tgt))
    lines = read_lines(args.src)
    translator = mt.load_translator(args.checkpoint)  # its decoding settings, as translate has them
    rows = []
    for layer in map(int, args.layers.split(",")):
        hyps = [found[0] for found in translator.translate_nbest(lines, attention_layer=layer)]
        for way, links in (
            ("pieces", [pieces_to_words(h) for h in hyps]),
            ("words", [set(word_alignment(h, line)) for h, line in zip(hyps, lines)]),
        ):
            rows.append({"alignment": way, "layer": layer, **scored(lines, hyps, links, lexicon)})
            print(json.dumps(rows[-1]), flush=True)
    print(f"{'alignment':<10} {'layer':>5} {'recall':>7} {'precision':>9}  ({rows[0]['sure_links']} sure links)")
    for row in rows:
        print(f"{row['alignment']:<10} {row['layer']:>5} {row['recall']:>7} {row['precision']:>9}")


if __name__ == "__main__":
    main()
