"""What translating a sentence whole across subtitle cues gives, against translating cue by cue: each test
line of 6 words or more is cut into two cues at the space nearest its middle (a sentence running over two
cues, as subtitles cut them), written as a SubRip file and translated with `translate -i film.srt` (whole
sentences, split back at the cue boundary by the model's alignment), and, for comparison, each cue as a
line of its own. With --pause, each line's cues start that many seconds after the line before ends (lines
as separate utterances); without, every cue follows the one before at once.

BLEU is of the two cues' translations joined, against the reference; "in their cue" is the share of lexicon
links (a source word and its usual translation, each once in the line and in the translation: the lexicon of
scripts/bench_tags.py, from --train-src/--train-tgt) whose target word landed in the cue of its source word.

    .venv/bin/python scripts/bench_subtitles.py --checkpoint runs/multi30k.de-en/smoke \\
        --train-src data/multi30k/train.de --train-tgt data/multi30k/train.en \\
        --src data/multi30k/test2016.de --ref data/multi30k/test2016.en [--pause 3]
Prints one JSON object per way of translating, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import sacrebleu
from bench_tags import dice_lexicon, key

import mt
from mt.data.lines import read_lines
from mt.data.subtitles import Subtitles


def halves(line: str) -> tuple[str, str]:
    """The line cut in two at the space nearest its middle."""
    words = line.split()
    cut = min(range(1, len(words)), key=lambda k: abs(len(" ".join(words[:k])) - len(line) / 2))
    return " ".join(words[:cut]), " ".join(words[cut:])


def in_their_cue(sources: list[tuple[str, str]], targets: list[tuple[str, str]], lexicon: dict[str, str]):
    """Of the lexicon links, how many there are and how many have their target word in their source's cue."""
    links = kept = 0
    for source, target in zip(sources, targets):
        src = [[key(w) for w in part.split()] for part in source]
        tgt = [[key(w) for w in part.split()] for part in target]
        every_src, every_tgt = src[0] + src[1], tgt[0] + tgt[1]
        for cue, words in enumerate(src):
            for word in words:
                if word in lexicon and every_src.count(word) == 1 and every_tgt.count(lexicon[word]) == 1:
                    links, kept = links + 1, kept + (lexicon[word] in tgt[cue])
    return links, kept


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("--checkpoint", "--train-src", "--train-tgt", "--src", "--ref"):
        p.add_argument(name, required=True)
    p.add_argument("--pause", type=float, default=0.0, help="seconds between one line's cues and the next's")
    args = p.parse_args()
    lexicon = dice_lexicon(read_lines(args.train_src), read_lines(args.train_tgt))
    pairs = [(s, r) for s, r in zip(read_lines(args.src), read_lines(args.ref)) if len(s.split()) >= 6]
    sources, refs = [halves(s) for s, _ in pairs], [r for _, r in pairs]
    translator = mt.load_translator(args.checkpoint)
    with tempfile.TemporaryDirectory() as folder:
        srt = Path(folder) / "film.srt"
        blocks, clock = [], 0.0
        for cues in sources:
            for cue in cues:  # a second each
                blocks.append(f"{len(blocks) + 1}\n{srt_time(clock)} --> {srt_time(clock + 1)}\n{cue}\n")
                clock += 1
            clock += args.pause
        srt.write_text("\n".join(blocks), encoding="utf-8")
        report = mt.translate_subtitles(translator, srt, str(Path(folder) / "film.en.srt"))
        done = [cue.text for cue in Subtitles(Path(folder) / "film.en.srt").cues]
    alone = translator.translate([cue for cues in sources for cue in cues])
    rows = [
        {"lines": len(pairs), "way": "whole line, no cues", **bleu(translator.translate([s for s, _ in pairs]), refs)}
    ]
    for way, flat in (("sentence across cues (translate -i film.srt)", done), ("cue by cue", alone)):
        targets = list(zip(flat[0::2], flat[1::2]))
        links, kept = in_their_cue(sources, targets, lexicon)
        joined = [f"{a} {b}".strip() for a, b in targets]
        rows.append({"lines": len(pairs), "way": way, **bleu(joined, refs), "links": links,
                     "in_their_cue": round(100 * kept / max(links, 1), 1)})  # fmt: skip
    rows[1]["cues_split_by_position"] = report.by_position  # the alignment left a cue empty
    for row in rows:
        print(json.dumps(row), flush=True)
    print(f"{'way':<46} {'BLEU':>6} {'in their cue':>12}")
    for row in rows:
        print(f"{row['way']:<46} {row['bleu']:>6} {row.get('in_their_cue', '-'):>12}")


def srt_time(seconds: float) -> str:
    """A SubRip time: 01:02:03,500."""
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def bleu(hyps: list[str], refs: list[str]) -> dict:
    return {"bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)}


if __name__ == "__main__":
    main()
