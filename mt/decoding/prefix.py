"""Target prefixes: the first tokens of an output, given, and forced before the search decodes freely
(fairseq's --prefix-size, CTranslate2's target_prefix). The decoder reads the prefix as it would read
its own output, so the rest of the sentence continues it: interactive translation, a term imposed, a
sentence completed from where a translator stopped.
"""

from __future__ import annotations

import torch

from mt.data.tokenizer import PAD


class Prefixes:
    """One prefix per decoder row (token ids without BOS; an empty one for a row decoding freely), on
    the search's device. Rows follow the search: `select` keeps the prefixes of the rows it keeps."""

    def __init__(self, ids: torch.Tensor, lengths: torch.Tensor):
        self.ids = ids  # (rows, longest), PAD-padded
        self.lengths = lengths  # (rows,)

    @classmethod
    def of(cls, prefixes: list[list[int]], device: torch.device) -> Prefixes | None:
        """The rows' prefixes, or None when none has a token (the search skips forcing entirely)."""
        longest = max((len(p) for p in prefixes), default=0)
        if not longest:
            return None
        ids = torch.full((len(prefixes), longest), PAD, dtype=torch.long)
        for row, p in enumerate(prefixes):
            ids[row, : len(p)] = torch.tensor(p, dtype=torch.long)
        return cls(ids.to(device), torch.tensor([len(p) for p in prefixes], device=device))

    @property
    def longest(self) -> int:
        return self.ids.size(1)

    def select(self, index: torch.Tensor) -> Prefixes:
        return Prefixes(self.ids[index], self.lengths[index])

    def repeat(self, times: int) -> Prefixes:
        """Each row's prefix for `times` consecutive rows (a sentence's beam hypotheses or samples)."""
        return Prefixes(self.ids.repeat_interleave(times, 0), self.lengths.repeat_interleave(times, 0))

    def lists(self) -> list[list[int]]:
        """Each row's prefix as a list of ids, read to the host (for a search that chooses there)."""
        return [ids[:n] for ids, n in zip(self.ids.tolist(), self.lengths.tolist())]

    def at(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(forced (rows,) bool: whether step t lies inside the row's prefix, the token there)."""
        if t >= self.longest:
            forced = torch.zeros_like(self.lengths, dtype=torch.bool)
            return forced, torch.full_like(self.lengths, PAD)
        return t < self.lengths, self.ids[:, t]


def force(log_probs: torch.Tensor, tokens: torch.Tensor, logits: torch.Tensor, forced: torch.Tensor, token):
    """A step's choice (log_probs, tokens: (rows, k), best first) with each forced row's replaced: its
    one candidate is the forced token, with the model's log-probability of it; the other k - 1 are
    impossible (-inf), so a beam carries the prefix as one hypothesis."""
    forced_lp = logits.log_softmax(dim=-1, dtype=torch.float32).gather(1, token[:, None])  # (rows, 1)
    only = torch.full_like(log_probs, float("-inf"))
    only[:, :1] = forced_lp
    log_probs = torch.where(forced[:, None], only, log_probs)
    tokens = torch.where(forced[:, None], token[:, None].expand_as(tokens), tokens)
    return log_probs, tokens


def limits_with_prefix(limits: torch.Tensor, prefixes: Prefixes | None, room: int) -> torch.Tensor:
    """Length limits that leave at least `room` tokens after each row's prefix."""
    if prefixes is None:
        return limits
    return torch.maximum(limits, prefixes.lengths + room)
