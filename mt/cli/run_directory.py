"""mt.Run: a run directory as Python reads it, from the same files a shell user reads (results.json,
metrics.jsonl, checkpoints/final.pt); what mt.train and mt.sweep return."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mt.checkpoint import run_model


@dataclass(frozen=True)
class Run:
    """A run directory and what its files say (the same files a shell user reads)."""

    dir: Path

    @property
    def model(self) -> Path:
        """Its final.pt (the model the run ended with), or best.pt while the run has not ended."""
        return run_model(self.dir)

    @property
    def results(self) -> dict:
        """results.json: the final model's test scores and what it was chosen from ({} without a test split)."""
        path = self.dir / "results.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    @property
    def validations(self) -> list[dict]:
        """metrics.jsonl: one record per validation (step, valid_loss, valid_bleu, valid_chrf, ...)."""
        path = self.dir / "metrics.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        return [json.loads(line) for line in lines if line.strip()]

    def translator(self, **settings):
        """mt.load_translator on the run's model, with any of its keyword arguments."""
        from mt.inference import load_translator

        return load_translator(self.dir, **settings)
