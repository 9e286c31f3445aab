"""Scoring given translations (forced decoding): how likely the model finds each target sentence as the
translation of its source, piece by piece.

One teacher-forced pass per batch, as in training, gives each target piece's log-probability given the
source and the pieces before it. Their sum is log P(target | source), the number greedy search (and beam
search at alpha 0) reports for the translation it chooses. Uses: filtering a corpus (pairs whose pieces the
model finds unlikely are often misaligned or noisy; Junczys-Dowmunt 2018 scores both directions), reranking
n-best lists, and a test set's perplexity under a model.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from mt.data.batching import pad_sequences, token_batches
from mt.data.tokenizer import BOS, EOS, PAD
from mt.decoding.settings import SCORE_BATCH_TOKENS


def piece_log_probs(model, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """(B, T) log-probability of each piece of tgt_out (0 at padding). src (B, S) ends each row in EOS;
    tgt_in is BOS + target, tgt_out target + EOS. An Ensemble's forward gives log mean probabilities,
    which log_softmax leaves as they are."""
    real = tgt_out != PAD
    logits = model(src, tgt_in, keep=real)  # (N, V): the output layer spares the padding
    chosen = logits.log_softmax(dim=-1, dtype=torch.float32).gather(1, tgt_out[real][:, None]).squeeze(1)
    return torch.zeros(tgt_out.shape, dtype=torch.float32, device=src.device).masked_scatter(real, chosen)


def score_ids(
    model,
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    device: torch.device,
    batch_tokens: int = SCORE_BATCH_TOKENS,
    progress: bool = False,
) -> list[list[float]]:
    """The log-probability of every target piece and its EOS, for each (source, target) pair of piece ids,
    in order. Pairs are batched by length; a batch's padding changes no score."""
    results: list[list[float] | None] = [None] * len(src_ids)
    src_lens = np.array([len(s) for s in src_ids], dtype=np.int64)
    tgt_lens = np.array([len(t) for t in tgt_ids], dtype=np.int64)
    batches = token_batches(src_lens, tgt_lens, batch_tokens) if src_ids else []
    bar = tqdm(total=len(src_ids), unit="pair", disable=None if progress else True, leave=False)
    for batch in batches:
        rows = batch.tolist()
        src = pad_sequences([src_ids[i] for i in rows], suffix=[EOS]).to(device)
        tgt_in = pad_sequences([tgt_ids[i] for i in rows], prefix=[BOS]).to(device)
        tgt_out = pad_sequences([tgt_ids[i] for i in rows], suffix=[EOS]).to(device)
        found = piece_log_probs(model, src, tgt_in, tgt_out).cpu()
        for row, i in enumerate(rows):
            results[i] = found[row, : len(tgt_ids[i]) + 1].tolist()
        bar.update(len(rows))
    bar.close()
    return results
