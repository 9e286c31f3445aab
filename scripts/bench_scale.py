"""`make bench-scale`: how the pipeline scales with the corpus, on the machine it runs on.

Builds a synthetic corpus of N pairs from Multi30k (pairs joined 1-3 at a time, every 7th with a made-up
name on both sides for a long tail of rare words: ~25 words a side, like WMT14), then runs `mt-train
experiment=smoke` to its first update and reads the stages off its log: reading and checking the data, the
tokenizer, encoding (of the first pool of shards; the rest is encoded in the background while training), and
the first update, with the peak RSS of the largest process and the peak memory of all together (PSS). Then
the same again in a new run directory on the same corpus (the tokenizer and encodings come from the cache).
Then `translate` on 2,000 and 20,000 lines, with its peak RSS (streaming: it should not grow with the input).

    .venv/bin/python scripts/bench_scale.py [--pairs 100000 1000000] [--work /tmp/bench_scale] [--tsv|--tmx] [--gzip]

(--tsv: the training split as one tab-separated file, train.tsv, instead of train.de and train.en; --tmx: as
a TMX translation memory, train.tmx, which the first run reads into the cache; --gzip: its files
gzip-compressed, train.de.gz: the first run decompresses them into the cache.)

Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from xml.sax.saxutils import escape

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SYLLABLES = ["ka", "lo", "mi", "ren", "tu", "sha", "vo", "dri", "an", "el", "zu", "pe", "gor", "na"]
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def synthetic_corpus(
    folder: Path, pairs: int, data: Path, seed: int = 1, tsv: bool = False, compress: bool = False, tmx: bool = False
) -> Path:
    """train.{de,en} of `pairs` lines in folder (made once), or with tsv one train.tsv (its first line
    de<TAB>en; a tab inside a sentence, as Multi30k has one, made a space), with tmx one train.tmx (a unit
    a pair, de-DE and en-GB), gzip-compressed with compress; valid/test2016 copied from data."""
    done = folder / f"train.{pairs}.done"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    de = (data / "train.de").read_text(encoding="utf-8").splitlines()
    en = (data / "train.en").read_text(encoding="utf-8").splitlines()
    rng = random.Random(seed)
    if tmx:
        both = open(folder / "train.tmx", "w", encoding="utf-8")
        both.write('<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4"><header srclang="de-DE"/><body>\n')
    elif tsv:
        both = open(folder / "train.tsv", "w", encoding="utf-8")
        both.write("de\ten\n")
    else:
        fd, fe = open(folder / "train.de", "w", encoding="utf-8"), open(folder / "train.en", "w", encoding="utf-8")
    for i in range(pairs):
        rows = [rng.randrange(len(de)) for _ in range(rng.randint(1, 3))]
        src, tgt = " ".join(de[r] for r in rows), " ".join(en[r] for r in rows)
        if i % 7 == 0:
            name = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()
            src, tgt = f"{name}: {src}", f"{name}: {tgt}"
        if tmx:
            both.write(f'<tu><tuv xml:lang="de-DE"><seg>{escape(src)}</seg></tuv>')
            both.write(f'<tuv xml:lang="en-GB"><seg>{escape(tgt)}</seg></tuv></tu>\n')
        elif tsv:
            both.write(f"{src.replace(chr(9), ' ')}\t{tgt.replace(chr(9), ' ')}\n")
        else:
            fd.write(src + "\n")
            fe.write(tgt + "\n")
    if tmx:
        both.write("</body></tmx>\n")
    for f in [both] if tsv or tmx else [fd, fe]:
        f.close()
        if compress:
            subprocess.run(["gzip", "-f", f.name], check=True)
    for split in ("valid", "test2016"):
        for lang in ("de", "en"):
            shutil.copyfile(data / f"{split}.{lang}", folder / f"{split}.{lang}")
    done.touch()
    return folder


def timed(command: list[str], log: Path) -> tuple[float, float, float]:
    """Run command (output to log); its wall seconds, the peak RSS in GB of its largest process (or of any
    earlier child), and the peak of the memory its processes hold together (their PSS summed: a forked
    helper's pages shared with its parent are counted once), sampled every 0.1 s."""
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        together = 0.0
        while process.poll() is None:
            together = max(together, tree_pss_gb(process.pid))
            time.sleep(0.1)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)
    largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return time.perf_counter() - start, largest, together


def tree_pss_gb(pid: int) -> float:
    """The proportional set size of pid and its descendants, in GB (Linux; 0 where /proc says nothing)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total / 2**20


def stages(log: Path, started: float) -> dict:
    """Seconds from the start to the end of each stage, from the log's timestamps."""
    marks = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - started
        if "] - data: train" in line:
            marks.setdefault("read", at)
        elif "] - tokenizer: vocab" in line or "] - tokenizer: reusing" in line:
            marks.setdefault("tokenizer", at)
        elif "] - train filter:" in line or "] - train: the first pool" in line:
            marks.setdefault("encode", at)
        elif "] - step 1 |" in line:
            marks.setdefault("first_update", at)
    return {k: round(v, 1) for k, v in marks.items()}


def train_to_first_update(corpus: Path, run: Path, cache: Path, log: Path) -> dict:
    shutil.rmtree(run, ignore_errors=True)
    command = [
        str(BIN / "mt-train"),
        "experiment=smoke",
        "data=files",
        f"data.dir={corpus}",
        "data.test_split=null",
        f"data.cache_dir={cache}",
        "data.valid_max_sentences=20",
        "decode.max_len_b=5",
        "train.max_steps=1",
        "train.log_every=1",
        f"hydra.run.dir={run}",
    ]
    started = time.time()
    seconds, rss, together = timed(command, log)
    return {
        "wall_s": round(seconds, 1),
        "peak_rss_gb": round(rss, 2),
        "peak_pss_gb": round(together, 2),
        **stages(log, started),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--data", type=Path, default=REPO / "data" / "multi30k")
    p.add_argument("--work", type=Path, default=Path("/tmp/bench_scale"))
    p.add_argument("--translate-lines", type=int, nargs="+", default=[2_000, 20_000])
    p.add_argument("--tsv", action="store_true", help="the training split as one train.tsv, not two files")
    p.add_argument("--tmx", action="store_true", help="the training split as one train.tmx translation memory")
    p.add_argument("--gzip", action="store_true", help="the training split's files gzip-compressed")
    args = p.parse_args()
    rows = []
    for pairs in args.pairs:
        name = f"corpus{pairs}{'_tsv' * args.tsv}{'_tmx' * args.tmx}{'_gz' * args.gzip}"
        corpus = synthetic_corpus(args.work / name, pairs, args.data, tsv=args.tsv, compress=args.gzip, tmx=args.tmx)
        cache = args.work / f"cache{pairs}"
        shutil.rmtree(cache, ignore_errors=True)
        for attempt in ("first run", "new run directory, same cache"):
            run = args.work / f"run{pairs}_{len(rows)}"
            # each measurement in its own process tree: ru_maxrss of RUSAGE_CHILDREN is a running maximum
            result = json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--_one", str(corpus), str(run), str(cache)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            row = {"pairs": pairs, "run": attempt, **result}
            print(json.dumps(row), flush=True)
            rows.append(row)
    checkpoint = args.work / f"run{args.pairs[0]}_0" / "checkpoints" / "last.pt"
    translate_rows = []
    for lines in args.translate_lines:
        source = args.work / f"translate{lines}.de"
        text = (args.data / "test2016.de").read_text(encoding="utf-8").splitlines()
        source.write_text("".join(text[i % len(text)] + "\n" for i in range(lines)), encoding="utf-8")
        result = json.loads(
            subprocess.run(
                [sys.executable, __file__, "--_translate", str(checkpoint), str(source)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        row = {"translate_lines": lines, **result}
        print(json.dumps(row), flush=True)
        translate_rows.append(row)
    print("\n| pairs | run | read | tokenizer | encode (first pool) | first update | peak RSS | peak PSS, all |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cells = [f"{r[k]} s" if k in r else "-" for k in ("read", "tokenizer", "encode", "first_update")]
        memory = f"{r['peak_rss_gb']} GB | {r['peak_pss_gb']} GB"
        print(f"| {r['pairs']:,} | {r['run']} | " + " | ".join(cells) + f" | {memory} |")
    print("\n| translate lines (greedy) | wall | peak RSS |")
    print("| --- | --- | --- |")
    for r in translate_rows:
        print(f"| {r['translate_lines']:,} | {r['wall_s']} s | {r['peak_rss_gb']} GB |")


def one(corpus: str, run: str, cache: str) -> None:
    log = Path(run + ".log")
    print(json.dumps(train_to_first_update(Path(corpus), Path(run), Path(cache), log)))


def translate_once(checkpoint: str, source: str) -> None:
    command = [str(BIN / "translate"), "-c", checkpoint, "-i", source, "-o", source + ".out", "--beam", "1", "-q"]
    seconds, rss, _ = timed(command, Path(source + ".log"))
    print(json.dumps({"wall_s": round(seconds, 1), "peak_rss_gb": round(rss, 3)}))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_one":
        one(*sys.argv[2:5])
    elif len(sys.argv) > 1 and sys.argv[1] == "--_translate":
        translate_once(*sys.argv[2:4])
    else:
        main()
