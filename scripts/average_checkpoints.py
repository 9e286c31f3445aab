"""Average checkpoints of one run into one self-contained checkpoint (usable by translate).

    .venv/bin/python scripts/average_checkpoints.py --run runs/x --last 5 --output runs/x/checkpoints/avg5.pt
    .venv/bin/python scripts/average_checkpoints.py --run runs/x --best 3 --output avg_best3.pt
    .venv/bin/python scripts/average_checkpoints.py --inputs a.pt b.pt c.pt --output avg.pt
--last takes the stepN.pt files (train.keep_last), --best the best_stepN.pt files (train.keep_best).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from mt.checkpoint import average_checkpoint_files, load_checkpoint
from mt.errors import MTError, report_errors


def numbered(folder: Path, prefix: str) -> list[Path]:
    """folder/{prefix}{N}.pt files, by N."""
    pattern = re.compile(rf"{prefix}(\d+)\.pt")
    found = [(int(m.group(1)), p) for p in folder.glob(f"{prefix}*.pt") if (m := pattern.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def best_by_bleu(folder: Path, k: int) -> list[Path]:
    """The k best best_stepN.pt by validation BLEU, as the run's last.pt ranks them."""
    ranked = load_checkpoint(folder / "last.pt")["trainer"]["progress"].get("best_kept", [])
    paths = [folder / f"best_step{step}.pt" for _, step in ranked[:k]]
    return [p for p in paths if p.exists()]


@report_errors
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", nargs="+", help="checkpoint files to average")
    p.add_argument("--run", help="a run directory")
    p.add_argument("--last", type=int, help="the K latest stepN.pt of --run")
    p.add_argument("--best", type=int, help="the K best best_stepN.pt of --run")
    p.add_argument("--output", required=True)
    args = p.parse_args()
    if args.inputs:
        paths = [Path(x) for x in args.inputs]
    elif args.run and (args.last or args.best):
        folder = Path(args.run) / "checkpoints"
        paths = numbered(folder, "step")[-args.last :] if args.last else best_by_bleu(folder, args.best)
        want = args.last or args.best
        if len(paths) < want:
            raise MTError(f"{folder}: found {len(paths)} checkpoints to average, wanted {want}")
    else:
        raise MTError("give --inputs, or --run with --last K or --best K")
    average_checkpoint_files(paths, args.output)
    print(f"averaged {len(paths)} checkpoints ({', '.join(p.name for p in paths)}) into {args.output}")


if __name__ == "__main__":
    main()
