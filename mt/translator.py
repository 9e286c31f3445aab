"""Translate lists of sentences: tokenize, sort by length, batch by tokens, search, restore order.

The one code path behind validation BLEU, `translate` and `evaluate`, so their scores agree.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from mt.batching import pad_sequences, token_batches
from mt.search import Hypothesis, beam_search, greedy_search
from mt.tokenizer import BOS, EOS, PAD

log = logging.getLogger(__name__)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str):
    """Mixed precision context for fp32/bf16/fp16 (fp32 = no autocast)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])


def low_precision_copy(model: torch.nn.Module, precision: str) -> torch.nn.Module:
    """For bf16/fp16 decoding, a copy of the model with its weights in that dtype.

    Autocast would cast every weight again at every decoding step (it caches casts only while
    recording gradients): 3,400 casts per 300 sentences of beam search. The copy leaves the
    caller's fp32 model (the one being trained, at validation) untouched.
    """
    if precision == "fp32":
        return model
    return copy.deepcopy(model).to(DTYPES[precision])


@dataclass
class Translation:
    text: str
    score: float
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: torch.Tensor | None = None  # (T, S) cross-attention, when asked for


class Translator:
    def __init__(self, model, tokenizer, device: torch.device | str = "cpu", precision: str = "fp32",
                 batch_tokens: int = 8000, max_src_len: int = 1024):
        self.device = torch.device(device)
        self.model = low_precision_copy(model.to(self.device), precision).eval()
        self.tokenizer = tokenizer
        self.precision = precision
        self.batch_tokens = batch_tokens
        self.max_src_len = max_src_len
        self.truncated = 0  # lines cut to max_src_len, reported by the caller

    def translate(self, lines: list[str], beam: int = 1, alpha: float = 0.6, max_len_a: float = 1.2,
                  max_len_b: int = 10, nbest: int = 1, attention_layer: int | None = None,
                  attention_head: int | None = None, progress: bool = False) -> list[list[Translation]]:
        """nbest translations for every line, in input order. An empty line gives one empty translation.

        With attention_layer set, each translation carries that decoder layer's cross-attention
        (one head, or the mean over heads), from a forced pass over the chosen hypothesis.
        """
        ids = self.tokenizer.encode_src(lines)
        for i, seq in enumerate(ids):
            if len(seq) > self.max_src_len:
                ids[i] = seq[: self.max_src_len]
                self.truncated += 1
        results: list[list[Translation] | None] = [None] * len(lines)
        todo = [i for i, seq in enumerate(ids) if seq]
        for i in set(range(len(lines))) - set(todo):
            results[i] = [Translation("", 0.0, [], [])] * nbest
        lengths = np.array([len(ids[i]) for i in todo], dtype=np.int64)
        # Beam search decodes beam rows per sentence: keep the rows per batch, not the sentences, constant.
        budget = max(1, self.batch_tokens // (beam if beam > 1 or nbest > 1 else 1))
        batches = token_batches(lengths, lengths, budget) if todo else []
        bar = tqdm(total=len(todo), unit="sent", disable=None if progress else True, leave=False)
        for batch in batches:
            rows = [todo[j] for j in batch]
            src = pad_sequences([ids[r] for r in rows], suffix=[EOS]).to(self.device)
            found = self._search(src, beam, alpha, max_len_a, max_len_b, nbest)
            for row, hyps in zip(rows, found):
                results[row] = [self._finish(ids[row], h) for h in hyps]
            if attention_layer is not None:
                best = [hyps[0] for hyps in found]
                for row, weights in zip(rows, self._attention(src, best, attention_layer, attention_head)):
                    results[row][0].attention = weights
            bar.update(len(rows))
        bar.close()
        return results

    def _search(self, src, beam, alpha, max_len_a, max_len_b, nbest) -> list[list[Hypothesis]]:
        with torch.inference_mode(), autocast(self.device, self.precision):
            if beam == 1 and nbest == 1:
                return [[h] for h in greedy_search(self.model, src, max_len_a, max_len_b)]
            return beam_search(self.model, src, beam, alpha, max_len_a, max_len_b, nbest)

    def _attention(self, src, hyps: list[Hypothesis], layer: int, head: int | None) -> list[torch.Tensor]:
        """(T+1, S+1) cross-attention of each hypothesis (EOS included on both sides)."""
        tgt_in = pad_sequences([h.tokens for h in hyps], prefix=[BOS]).to(self.device)
        with torch.inference_mode(), autocast(self.device, self.precision):
            memory, src_mask = self.model.encode(src)
            self.model.decode(tgt_in, memory, src_mask, need_weights=True)
            weights = self.model.cross_attention(layer).float()  # (B, h, T, S)
        weights = weights.mean(1) if head is None else weights[:, head]
        src_lens = (src != PAD).sum(1).tolist()
        return [weights[i, : len(h.tokens) + 1, : src_lens[i]].cpu() for i, h in enumerate(hyps)]

    def _finish(self, src_ids: list[int], hyp: Hypothesis) -> Translation:
        text = self.tokenizer.decode_tgt([hyp.tokens])[0]
        return Translation(text, hyp.score, self.tokenizer.src_pieces(src_ids + [EOS]),
                           self.tokenizer.tgt_pieces(hyp.tokens + [EOS]))
