"""Several trained models decoding as one: at every step the next-token distribution is the mean of
the members' distributions (as fairseq, OpenNMT and Marian ensemble). Independently trained models
make different errors, so their average is usually better than any one of them, at the cost of
running each. Unlike checkpoint averaging, the members need not come from one run: they need one
target vocabulary (and one tokenizer, which the loader checks).

It speaks the interface search.py relies on (mt/model/state.py), so greedy and beam search decode an
ensemble unchanged.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class EnsembleState:
    """The members' decoder states, side by side; reordering one reorders all."""

    def __init__(self, states: list):
        self.states = states

    def select(self, index: torch.Tensor) -> EnsembleState:
        return EnsembleState([s.select(index) for s in self.states])

    def reorder_same_source(self, index: torch.Tensor) -> EnsembleState:
        return EnsembleState([s.reorder_same_source(index) for s in self.states])


class Ensemble(nn.Module):
    def __init__(self, members: list[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)

    def start_state(self, src: torch.Tensor, copies: int = 1) -> EnsembleState:
        return EnsembleState([m.start_state(src, copies) for m in self.members])

    def step(self, tokens: torch.Tensor, state: EnsembleState) -> tuple[torch.Tensor, EnsembleState]:
        """log of the mean of the members' next-token probabilities (B, V), in fp32: normalised
        log-probabilities, which search takes as logits."""
        log_probs, states = [], []
        for member, member_state in zip(self.members, state.states):
            logits, member_state = member.step(tokens, member_state)
            log_probs.append(logits.log_softmax(dim=-1, dtype=torch.float32))
            states.append(member_state)
        return mean_of_probabilities(log_probs), EnsembleState(states)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing, as a member's forward (all target positions, or the kept ones): the log of the
        mean of the members' probabilities at each position, in fp32, as step gives them one at a time."""
        log_probs = [m(src, tgt_in, keep).log_softmax(dim=-1, dtype=torch.float32) for m in self.members]
        return mean_of_probabilities(log_probs)


def mean_of_probabilities(log_probs: list[torch.Tensor]) -> torch.Tensor:
    """log(mean(exp(lp))) over the members, computed in log space."""
    return torch.logsumexp(torch.stack(log_probs), dim=0) - math.log(len(log_probs))
