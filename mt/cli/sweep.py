"""mt-train -m (Hydra's multirun): a sweep. `mt-train -m train.lr=5e-4,1e-3 model.dropout=0.1,0.3` trains one
run for each combination of the values, one after another, each in a run directory named after its values,
under runs/<corpus>.<src>-<tgt>/<name>-sweep/, e.g. .../smoke-sweep/model.dropout=0.1,train.lr=0.001; then
the runs there side by side, best validation first (printed, and in sweep.tsv and sweep.json there).
The same command again resumes each run where it stopped; a run that has ended as configured is not redone.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from mt.cli.run_directory import Run
from mt.config.schema import dir_name
from mt.errors import MTError
from mt.training.budget import METRIC_KEYS, METRIC_NAMES, ranking_score

MULTIRUN_FLAGS = ("-m", "--multirun")
SUMMARY_FILES = ("sweep.tsv", "sweep.json")


@dataclass(frozen=True)
class Sweep:
    """The overrides every run shares, and the swept keys with their values, in command-line order."""

    shared: tuple[str, ...]
    swept: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def parse(cls, argv: list[str]) -> Sweep:
        """The sweep these overrides ask for (a=1,2 b=range(1,4), as Hydra's basic sweeper reads them)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import HydraException

        try:
            parsed = OverridesParser.create().parse_overrides(argv)
        except HydraException as err:
            raise MTError(str(err).splitlines()[0].rstrip(".:")) from None
        shared, swept = [], []
        for override, text in zip(parsed, argv):
            if not override.is_sweep_override():
                shared.append(text)
            elif override.is_hydra_override():
                raise MTError(f"{text}: a sweep cannot vary Hydra's own settings")
            elif not override.is_discrete_sweep():
                raise MTError(f"{text}: a sweep takes lists of values (a=1,2,3 or a=range(1,4)), not intervals")
            else:
                swept.append((override.get_key_element(), tuple(override.sweep_string_iterator())))
        if not swept:
            raise MTError("mt-train -m: nothing to sweep; give a key several values, e.g. train.lr=5e-4,1e-3")
        return cls(tuple(shared), tuple(swept))

    def jobs(self) -> list[list[str]]:
        """Every run's overrides: the shared ones and one value of each swept key, in Hydra's order."""
        keys = [key for key, _ in self.swept]
        combinations = itertools.product(*(values for _, values in self.swept))
        return [[*self.shared, *(f"{k}={v}" for k, v in zip(keys, values))] for values in combinations]

    def run_name(self, job: list[str]) -> str:
        """The directory name Hydra gives this run (hydra.job.override_dirname over the swept keys)."""
        return dir_name(",".join(sorted(job[len(self.shared) :])))

    def naming_override(self) -> str:
        """The Hydra setting that names each run's directory after its swept values alone."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parser = OverridesParser.create()
        swept = {o.key_or_group for o in parser.parse_overrides([f"{key}={values[0]}" for key, values in self.swept])}
        shared = parser.parse_overrides(list(self.shared))
        kept = sorted({o.key_or_group for o in shared if not o.is_hydra_override()} - swept)
        return f"hydra.job.config.override_dirname.exclude_keys=[{','.join(kept)}]"


def summary(sweep_dir: Path, metric: str) -> list[dict]:
    """Every run under sweep_dir (any sweep's): its best validation on metric and at which update, its test
    scores and whether it has ended; the best first, runs with no validation yet last."""
    rows = []
    for folder in sorted(p for p in sweep_dir.iterdir() if (p / ".hydra" / "overrides.yaml").is_file()):
        run = Run(folder)
        results = run.results  # each file read once
        scored = [r for r in run.validations if METRIC_KEYS[metric] in r]
        best = max(scored, key=lambda r: ranking_score(r, metric), default=None)
        rows.append(
            {
                "run": folder.name,
                "overrides": OmegaConf.to_container(OmegaConf.load(folder / ".hydra" / "overrides.yaml")),
                f"valid_{metric}": best[METRIC_KEYS[metric]] if best else None,
                "step": best["step"] if best else None,
                "test_bleu": results.get("bleu"),
                "test_chrf": results.get("chrf"),
                "ended": (folder / "checkpoints" / "final.pt").is_file(),
            }
        )
    key = f"valid_{metric}"
    return sorted(rows, key=lambda r: (r[key] is None, -ranking_score({METRIC_KEYS[metric]: r[key] or 0}, metric)))


SEED = re.compile(r"(^|,)train\.seed=[^,]*")


def over_seeds(rows: list[dict], metric: str) -> list[dict]:
    """Runs that differ only in train.seed, taken together: for each such setting (two runs or more), the
    mean and sample standard deviation of their best validation and test BLEU, how far a figure moves by
    chance. Ended runs only."""
    groups: dict = {}
    for row in rows:
        if row["ended"] and row[f"valid_{metric}"] is not None:
            rest = tuple(o for o in row["overrides"] if not str(o).startswith("train.seed="))
            groups.setdefault((SEED.sub("", row["run"]).lstrip(",") or "all", rest), []).append(row)
    found = []
    for (setting, _), members in groups.items():
        if len(members) > 1:
            valid = [m[f"valid_{metric}"] for m in members]
            tests = [m["test_bleu"] for m in members if m["test_bleu"] is not None]
            found.append(
                {
                    "setting": setting,
                    "runs": len(members),
                    f"valid_{metric}": _spread(valid),
                    "test_bleu": _spread(tests) if len(tests) == len(members) else None,
                }
            )
    return found


def _spread(values: list[float]) -> dict:
    return {"mean": round(statistics.mean(values), 2), "sd": round(statistics.stdev(values), 2)}


def gathered(sweep_dir: Path, metric: str) -> tuple[dict, list[str]]:
    """The sweep's runs as they stand now: what sweep.json holds, and the table as lines to print."""
    rows = summary(sweep_dir, metric)
    seeds = over_seeds(rows, metric)
    return {"metric": metric, "runs": rows, "over_seeds": seeds}, table(sweep_dir, metric, rows, seeds)


def write_summary(sweep_dir: Path, metric: str) -> list[str]:
    """sweep.tsv and sweep.json in sweep_dir, and the table as lines to print."""
    saved, lines = gathered(sweep_dir, metric)
    columns = tsv_columns(metric)
    tsv = ["\t".join(columns)] + ["\t".join(_cell(row[c]) for c in columns) for row in saved["runs"]]
    (sweep_dir / "sweep.tsv").write_text("".join(line + "\n" for line in tsv), encoding="utf-8")
    (sweep_dir / "sweep.json").write_text(json.dumps(saved, indent=2) + "\n")
    return lines


def tsv_columns(metric: str) -> list[str]:
    """sweep.tsv's columns."""
    return ["run", f"valid_{metric}", "step", "test_bleu", "test_chrf", "ended"]


def table(sweep_dir: Path, metric: str, rows: list[dict], seeds: list[dict]) -> list[str]:
    """The runs side by side, best first, and the settings' spread over seeds, as lines to print."""
    columns = tsv_columns(metric)
    header = [f"valid {METRIC_NAMES[metric]}", "at update", "test BLEU", "test chrF", "run"]
    cells = [header] + [
        [*(_cell(row[c]) for c in columns[1:5]), row["run"] + ("" if row["ended"] else " (not ended)")] for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(4)]
    best = f"best valid {METRIC_NAMES[metric]} first"
    lines = [f"sweep {sweep_dir}: {len(rows)} runs, {best} (also in {' and '.join(SUMMARY_FILES)} there)"] + [
        "  ".join([*(cell.rjust(w) for cell, w in zip(line, widths)), line[4]]) for line in cells
    ]
    if seeds:
        name = METRIC_NAMES[metric]
        lines.append(f"over seeds (runs alike but for train.seed), mean ± sd: valid {name}, test BLEU; runs, setting")
        for group in seeds:
            test = group["test_bleu"]
            cells = [_mean_sd(group[f"valid_{metric}"]), _mean_sd(test) if test else "-"]
            lines.append(f"  {cells[0]}  {cells[1]}  {group['runs']}  {group['setting']}")
    return lines


def describe_sweep(sweep_dir: Path) -> tuple[dict, list[str]]:
    """A sweep's folder as it stands now (mt-info): what sweep.json would hold, and the table; on the metric
    its last report ranked on (sweep.json), BLEU where it has none. Writes nothing."""
    try:
        metric = json.loads((sweep_dir / "sweep.json").read_text(encoding="utf-8")).get("metric", "bleu")
    except (OSError, ValueError):
        metric = "bleu"
    saved, lines = gathered(sweep_dir, metric)
    return {"sweep": str(sweep_dir), **saved}, lines


def report_sweep(sweep_dir: Path, cfg) -> None:
    """After mt-train's sweep: its runs side by side on the config's train.best_metric, printed and saved."""
    print("\n".join(write_summary(sweep_dir, cfg.train.best_metric)))


def _mean_sd(spread: dict) -> str:
    return f"{spread['mean']:.2f} ± {spread['sd']:.2f}"


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.2f}" if isinstance(value, float) else str(value)
