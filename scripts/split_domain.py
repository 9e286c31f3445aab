"""Hold a topic out of a parallel corpus, to measure fine-tuning on a domain the parent never saw.

The pairs of the training split whose target (or source) side matches a pattern become the "domain"; the rest
become the "general" corpus a parent model trains on. The domain is shuffled (seeded) and cut into its own
train / valid / test splits for the fine-tune. The general corpus keeps the original valid and test splits.

    python scripts/split_domain.py --data data/multi30k --src de --tgt en --topic sports --out data/sports
    python scripts/split_domain.py ... --pattern '\\b(dog|dogs|puppy)\\b' --out data/dogs    # a topic of your own

writes data/sports/general/{train,valid,test2016}.{de,en} and data/sports/domain/{train,valid,test}.{de,en}.
"""

import argparse
import random
import re
import shutil
from pathlib import Path

# Topics of Multi30k's English side; sports: 2,927 of the 29,000 training pairs.
TOPICS = {
    "sports": r"\b(soccer|football|basketball|baseball|hockey|tennis|volleyball|rugby|lacrosse|softball|golf|"
    r"player|players|team|teams|ball|jersey|jerseys|referee|goalie|court|field|stadium|athlete|athletes|racket|"
    r"bat|batter|pitcher|pitch|game|match|sport|sports|uniform|uniforms|helmet|tackle|tackled|kick|kicks|"
    r"kicking|dribbles|dribbling|score|scores|goal)\b",
}


def read_lines(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1] if path.stat().st_size else []


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("data/multi30k"))
    ap.add_argument("--src", default="de")
    ap.add_argument("--tgt", default="en")
    ap.add_argument("--train-split", default="train")
    ap.add_argument("--keep-splits", nargs="*", default=["valid", "test2016"], help="copied to general/ as they are")
    topic = ap.add_mutually_exclusive_group(required=True)
    topic.add_argument("--topic", choices=sorted(TOPICS), help="a built-in pattern")
    topic.add_argument("--pattern", help="a regular expression (case-insensitive) on --side")
    ap.add_argument("--side", choices=["src", "tgt"], default="tgt")
    ap.add_argument("--test", type=int, default=800, help="domain pairs held out as domain/test")
    ap.add_argument("--valid", type=int, default=300, help="domain pairs held out as domain/valid")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    src = read_lines(args.data / f"{args.train_split}.{args.src}")
    tgt = read_lines(args.data / f"{args.train_split}.{args.tgt}")
    if len(src) != len(tgt):
        raise SystemExit(f"error: {args.train_split}.{args.src} has {len(src)} lines, .{args.tgt} {len(tgt)}")
    topic = re.compile(args.pattern or TOPICS[args.topic], re.IGNORECASE)
    probe = src if args.side == "src" else tgt
    domain = [i for i, line in enumerate(probe) if topic.search(line)]
    if len(domain) <= args.test + args.valid:
        raise SystemExit(f"error: only {len(domain)} pairs match; --test + --valid must leave some to train on")
    in_domain = set(domain)
    general = [i for i in range(len(src)) if i not in in_domain]
    random.Random(args.seed).shuffle(domain)
    parts = {
        "test": domain[: args.test],
        "valid": domain[args.test : args.test + args.valid],
        "train": sorted(domain[args.test + args.valid :]),
    }
    for lang, lines in ((args.src, src), (args.tgt, tgt)):
        write_lines(args.out / "general" / f"{args.train_split}.{lang}", [lines[i] for i in general])
        for split, rows in parts.items():
            write_lines(args.out / "domain" / f"{split}.{lang}", [lines[i] for i in sorted(rows)])
        for split in args.keep_splits:
            shutil.copyfile(args.data / f"{split}.{lang}", args.out / "general" / f"{split}.{lang}")
    sizes = ", ".join(f"{k} {len(v):,}" for k, v in parts.items())
    print(f"general: {len(general):,} training pairs; domain ({len(domain):,} pairs): {sizes} -> {args.out}")


if __name__ == "__main__":
    main()
