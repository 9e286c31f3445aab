"""An exponential moving average of the weights (Polyak averaging; fairseq's --ema, Marian's exponential
smoothing, OpenNMT-py's average_decay). Training goes on with the trained weights; validation, best.pt and
stepN.pt see the average, which follows them with a lag of about 1 / (1 - decay) updates and smooths out
the noise of the last updates, as checkpoint averaging does, but at every update.
"""

from __future__ import annotations

import contextlib
import logging

import torch

log = logging.getLogger(__name__)


class WeightAverage:
    """average <- decay * average + (1 - decay) * weights after each update, with a decay that starts low,
    (1 + step) / (10 + step), so that the first updates' weights are soon forgotten."""

    def __init__(self, model: torch.nn.Module, decay: float):
        self.decay = decay
        self.weights = list(model.parameters())
        self.average = [w.detach().clone() for w in self.weights]

    def decay_at(self, step: int) -> float:
        return min(self.decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Move the average toward the weights of update `step` (one fused call over all of them)."""
        torch._foreach_lerp_(self.average, [w.detach() for w in self.weights], 1.0 - self.decay_at(step))

    @contextlib.contextmanager
    def applied(self):
        """The model holds the average inside the block, its trained weights again after. Copied in place:
        the parameters keep their memory (CUDA graphs captured on them stay valid)."""
        trained = [w.detach().clone() for w in self.weights]
        self._copy(self.weights, self.average)
        try:
            yield
        finally:
            self._copy(self.weights, trained)

    @staticmethod
    @torch.no_grad()
    def _copy(into: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        for target, value in zip(into, values):
            target.copy_(value)

    def model_state(self, model: torch.nn.Module) -> dict:
        """model.state_dict() with the average in place of each parameter (tied weights stay one tensor)."""
        index = {id(w): i for i, w in enumerate(self.weights)}
        return {
            name: self.average[index[id(value)]] if id(value) in index else value.detach()
            for name, value in model.state_dict(keep_vars=True).items()
        }

    def state_dict(self) -> dict:
        return {"average": self.average}

    @torch.no_grad()
    def load_state_dict(self, state: dict | None, where: str) -> None:
        """The average saved with a run's last.pt; a run that did not keep one starts it from the weights now."""
        if state is None or len(state["average"]) != len(self.average):
            log.info("%s holds no weight average: it starts from the weights at this step", where)
            self._copy(self.average, self.weights)
            return
        self._copy(self.average, state["average"])
