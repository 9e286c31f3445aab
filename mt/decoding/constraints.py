"""Rules that take tokens out of a search step's choice before it chooses, for greedy search, beam search
and sampling alike (CTranslate2 has both, min_decoding_length and no_repeat_ngram_size, applied the same
way, so an export decodes the same):

  min_len N          no end of sentence before the output holds N pieces (a forced prefix counts)
  no_repeat_ngram N  no N pieces in a row twice in one output: a token that would complete an N-gram the
                     output already holds cannot be chosen (Paulus et al. 2018). Stops the loops a model
                     falls into on input unlike its training data ("a dog a dog a dog ...").

A ruled-out token's logit becomes -inf before the log-softmax: the tokens left share the probability, and
a hypothesis's score is over them. Rows inside a forced prefix are exempt (a prefix is taken as given).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt.data.tokenizer import EOS


@dataclass(frozen=True)
class Constraints:
    min_len: int = 0  # 0: off
    no_repeat_ngram: int = 0  # 0: off

    @property
    def needs_history(self) -> bool:
        """Whether apply() reads the tokens so far (a search then keeps them on the model's device)."""
        return self.no_repeat_ngram > 0

    def apply(self, logits: torch.Tensor, t: int, history: torch.Tensor | None, free: torch.Tensor | None) -> None:
        """In place: -inf for every token ruled out at step t (0: the first output token). logits (rows, V);
        history (rows, t), each row's output tokens so far (without BOS), needed for no_repeat_ngram;
        free (rows,) bool, False for a row inside its forced prefix (None: every row is free)."""
        if t < self.min_len:
            eos = logits[:, EOS]
            logits[:, EOS] = eos.masked_fill(free, float("-inf")) if free is not None else float("-inf")
        n = self.no_repeat_ngram
        if n and history is not None and t >= n:
            ban_ngram_ends(logits, history, n, free)


def ban_ngram_ends(logits: torch.Tensor, history: torch.Tensor, n: int, free: torch.Tensor | None) -> None:
    """-inf, in place, for each token that would end an n-gram of a row's history a second time: the
    tokens that followed, earlier in the row, each occurrence of its last n - 1 tokens.

    All on the device, no host read: the history's n-grams (rows, t - n + 1, n) are compared with its
    last n - 1 tokens, and the tokens ending the matching ones are lowered to -inf by a scatter taking
    the minimum (+inf for a window that does not match, so the order of duplicate writes cannot matter).
    """
    windows = history.unfold(1, n, 1)  # (rows, t - n + 1, n): every n-gram so far
    recent = history[:, history.size(1) - (n - 1) :]  # (rows, n - 1); empty for n = 1: every window matches
    match = (windows[:, :, :-1] == recent[:, None, :]).all(-1)  # (rows, windows)
    if free is not None:
        match &= free[:, None]
    lowest = logits.new_full(match.shape, float("inf")).masked_fill_(match, float("-inf"))
    logits.scatter_reduce_(1, windows[:, :, -1], lowest, reduce="amin")
