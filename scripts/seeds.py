"""The test scores of runs that differ only in their seed (`make ensemble` trains them): each run's, then
their mean and sample standard deviation, what a paper reports for a setting.

    .venv/bin/python scripts/seeds.py runs/x_seed1 runs/x_seed2 runs/x_seed3 [--json seeds.json]

Reads each run's results.json (its test BLEU and chrF; with several directions, their mean).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def summary(runs: list[Path]) -> dict:
    """Each run's test BLEU and chrF, and their mean and standard deviation over the runs."""
    rows = []
    for run in runs:
        path = run / "results.json"
        if not path.is_file():
            raise SystemExit(f"error: {path}: no such file (has the run finished, with a test split?)")
        results = json.loads(path.read_text())
        rows.append({"run": str(run), "bleu": results["bleu"], "chrf": results["chrf"]})
    out = {"runs": rows}
    for metric in ("bleu", "chrf"):
        values = [row[metric] for row in rows]
        out[metric] = {
            "mean": round(statistics.mean(values), 2),
            "sd": round(statistics.stdev(values), 2) if len(values) > 1 else 0.0,
            "min": min(values),
            "max": max(values),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--json", type=Path, help="write the summary here too")
    args = p.parse_args()
    out = summary(args.runs)
    for row in out["runs"]:
        print(f"{row['run']}: test BLEU {row['bleu']:.2f} | chrF {row['chrf']:.2f}")
    b, c = out["bleu"], out["chrf"]
    print(
        f"over {len(out['runs'])} seeds: BLEU {b['mean']:.2f} ± {b['sd']:.2f} ({b['min']:.2f}-{b['max']:.2f}) | "
        f"chrF {c['mean']:.2f} ± {c['sd']:.2f} (mean ± sample standard deviation)"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
