"""Translate lists of sentences: tokenize, sort by length, batch by tokens, search, restore order.

The one code path behind validation BLEU, `translate` and `evaluate`, so their scores agree; how to
decode is one DecodeSettings object.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np
import torch
from tqdm import tqdm

from mt import fastpath
from mt.data.batching import pad_sequences, token_batches
from mt.data.tokenizer import BOS, EOS, PAD
from mt.decoding.search import Hypothesis, beam_search, greedy_search
from mt.decoding.settings import DecodeSettings, LineTranslator, Translation
from mt.precision import autocast, low_precision_copy

log = logging.getLogger(__name__)


class Translator(LineTranslator):
    def __init__(
        self, model, tokenizer, settings: DecodeSettings, device: torch.device | str = "cpu", max_src_len: int = 1024
    ):
        self.device = torch.device(device)
        self.settings = settings
        self.model = low_precision_copy(model.to(self.device), settings.precision).eval()
        self.tokenizer = tokenizer
        self.max_src_len = max_src_len
        self.truncated = 0  # lines cut to max_src_len, reported by the caller

    def translate_nbest(
        self,
        lines: list[str],
        attention_layer: int | None = None,
        attention_head: int | None = None,
        progress: bool = False,
    ) -> list[list[Translation]]:
        """settings.nbest translations for every line, in input order. An empty line gives empty translations.

        With attention_layer set, each translation carries that decoder layer's cross-attention
        (one head, or the mean over heads), from a forced pass over the chosen hypothesis.
        """
        beam, nbest = self.settings.beam, self.settings.nbest
        ids, cut = self.tokenizer.encode_src_truncated(lines, self.max_src_len)
        self.truncated += cut
        results: list[list[Translation] | None] = [None] * len(lines)
        todo = [i for i, seq in enumerate(ids) if seq]
        for i in set(range(len(lines))) - set(todo):
            results[i] = [Translation("", 0.0, [], [])] * nbest
        lengths = np.array([len(ids[i]) for i in todo], dtype=np.int64)
        # Beam search decodes beam rows per sentence: keep the rows per batch, not the sentences, constant.
        budget = max(1, self.settings.batch_tokens // beam)
        batches = token_batches(lengths, lengths, budget) if todo else []
        bar = tqdm(total=len(todo), unit="sent", disable=None if progress else True, leave=False)
        for batch in batches:
            rows = [todo[j] for j in batch]
            src = pad_sequences([ids[r] for r in rows], suffix=[EOS]).to(self.device)
            found = self._search(src)
            for row, hyps in zip(rows, found):
                results[row] = [self._finish(ids[row], h) for h in hyps]
            if attention_layer is not None:
                best = [hyps[0] for hyps in found]
                for row, weights in zip(rows, self._attention(src, best, attention_layer, attention_head)):
                    results[row][0].attention = weights
            bar.update(len(rows))
        bar.close()
        return results

    def _autocast(self):
        """Autocast over the low-precision copy where it pays (fastpath.autocast_decoding); a no-op in fp32."""
        if fastpath.autocast_decoding(self.device):
            return autocast(self.device, self.settings.precision)
        return contextlib.nullcontext()

    def _search(self, src) -> list[list[Hypothesis]]:
        s = self.settings
        with torch.inference_mode(), self._autocast():
            if s.beam == 1:
                return [[h] for h in greedy_search(self.model, src, s.max_len_a, s.max_len_b)]
            return beam_search(self.model, src, s.beam, s.alpha, s.max_len_a, s.max_len_b, s.nbest)

    def _attention(self, src, hyps: list[Hypothesis], layer: int, head: int | None) -> list[torch.Tensor]:
        """(T+1, S+1) cross-attention of each hypothesis (EOS included on both sides)."""
        tgt_in = pad_sequences([h.tokens for h in hyps], prefix=[BOS]).to(self.device)
        with torch.inference_mode(), self._autocast():
            memory, src_mask = self.model.encode(src)
            self.model.decode(tgt_in, memory, src_mask, need_weights=True)
            weights = self.model.cross_attention(layer).float()  # (B, h, T, S)
        weights = weights.mean(1) if head is None else weights[:, head]
        src_lens = (src != PAD).sum(1).tolist()
        return [weights[i, : len(h.tokens) + 1, : src_lens[i]].cpu() for i, h in enumerate(hyps)]

    def _finish(self, src_ids: list[int], hyp: Hypothesis) -> Translation:
        text = self.tokenizer.decode_tgt([hyp.tokens])[0]
        return Translation(
            text, hyp.score, self.tokenizer.src_pieces(src_ids + [EOS]), self.tokenizer.tgt_pieces(hyp.tokens + [EOS])
        )
