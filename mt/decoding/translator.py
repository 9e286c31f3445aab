"""Translate lists of sentences: tokenize, sort by length, batch by tokens, search, restore order.

The one code path behind validation BLEU, `translate` and `evaluate`, so their scores agree; how to
decode is one DecodeSettings object.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from tqdm import tqdm

from mt import fastpath
from mt.data.batching import pad_sequences, token_batches
from mt.data.buckets import rounded_up
from mt.data.tokenizer import BOS, EOS, PAD
from mt.decoding.fixed_slots import FixedSlotBeam, FixedSlotGreedy, FixedSlotSearch, slot_batches, slot_shape
from mt.decoding.fixed_slots import run as run_search
from mt.decoding.line_translator import LineTranslator
from mt.decoding.prefix import Prefixes
from mt.decoding.sampling import Sampler, uniforms
from mt.decoding.scoring import score_ids
from mt.decoding.search import Hypothesis, beam_search, greedy_search, max_output_lengths, sample_search
from mt.decoding.settings import (
    SCORE_BATCH_TOKENS,
    DecodeSettings,
    PairScore,
    Translation,
    check_aligned,
    line_seed,
    verbatim,
)
from mt.decoding.terms import Phrases, missing, terms_beam_search
from mt.errors import MTError
from mt.fastpath.cuda_graphs import Replays
from mt.languages import written_without_spaces
from mt.precision import autocast, low_precision_copy

# Padded batch shapes whose buffers and captured steps stay allocated: the shapes of one long input (a few
# padded lengths, each a full shape and a smaller one), so that each is captured once, not once a batch.
FIXED_SLOT_SEARCHES_KEPT = 16

log = logging.getLogger(__name__)


class Translator(LineTranslator):
    places_terms = True

    def __init__(
        self, model, tokenizer, settings: DecodeSettings, device: torch.device | str = "cpu", max_src_len: int = 1024
    ):
        self.device = torch.device(device)
        self.settings = settings
        self.model = low_precision_copy(model.to(self.device), settings.precision).eval()
        self.tokenizer = tokenizer
        self.max_src_len = max_src_len
        self.truncated = 0  # lines cut to max_src_len, reported by the caller
        self.terms_missed = 0  # lines translated without one of their required terms, reported by the caller
        self._joins: dict[str, frozenset[int]] = {}  # by target language: pieces that continue a word
        # Fixed-slot searches by padded batch shape and settings, and their captured steps (decode.cuda_graphs).
        self._searches: dict[tuple, FixedSlotSearch] = {}
        self._replays = Replays(self.device, capture=self.device.type == "cuda", what="decoding")
        # One fixed-slot search at a time: a captured step replays on one search's buffers, and copies made
        # by with_settings (a server's decoding threads) share both with this translator.
        self._fixed_slots = threading.Lock()

    @property
    def replays(self) -> Replays:
        """The fixed-slot searches' steps, captured and replayed as CUDA graphs (their counts, for profiles)."""
        return self._replays

    def _translate_nbest(
        self,
        lines: list[str],
        attention_layer: int | None = None,
        attention_head: int | None = None,
        attention_lines: list[bool] | None = None,
        progress: bool = False,
        prefixes: list[str] | None = None,
        seeds: list[int] | None = None,
        first_line: int = 0,
        terms: list[list[str]] | None = None,
    ) -> list[list[Translation]]:
        """settings.nbest translations for every line, in input order. An empty line gives empty translations.

        prefixes: one target prefix per line ("" for none), forced at the start of its translations and
        kept there verbatim. seeds (sampling): each line's seed; by default line_seed(settings.seed, its
        number), lines numbered from first_line (a file read in chunks numbers its lines across them).
        terms: the phrases each line's translations must hold (mt/decoding/terms.py); lines with none are
        searched as they would be without.
        With attention_layer set, each translation carries that decoder layer's cross-attention
        (one head, or the mean over heads), from a forced pass over the chosen hypothesis; attention_lines:
        of the lines where it is True alone (None: every line).
        """
        s = self.settings
        check_aligned(lines, prefixes, "prefixes")
        check_aligned(lines, seeds, "seeds")
        check_aligned(lines, terms, "terms")
        check_aligned(lines, attention_lines, "attention_lines")
        if attention_layer is not None:
            check_attention_choice(self.model, attention_layer, attention_head)
        ids, cut = self.tokenizer.encode_src_truncated(self._sources(lines), self.max_src_len)
        self.truncated += cut
        tag = self._tag_pieces()
        prefix_ids = self.tokenizer.encode_tgt(prefixes) if prefixes else [[] for _ in lines]
        phrases = [self._phrases(line_terms) for line_terms in terms] if terms else [[] for _ in lines]
        if s.sampling and seeds is None:
            seeds = [line_seed(s.seed, first_line + i) for i in range(len(lines))]
        results: list[list[Translation] | None] = [None] * len(lines)
        todo = [i for i, seq in enumerate(ids) if seq]
        for i in set(range(len(lines))) - set(todo):
            results[i] = [Translation("", 0.0, [], [])] * s.nbest
        fixed = fastpath.fixed_slot_search(self.model, s.cuda_graphs, any(prefixes or ()) or s.constraints is not None)
        bar = tqdm(total=len(todo), unit="sent", disable=None if progress else True, leave=False)

        def search(rows: list[int]) -> tuple[list[int], torch.Tensor, list[Phrases] | None, list[list[Hypothesis]]]:
            src = pad_sequences([ids[r] for r in rows], suffix=[EOS])
            forced = Prefixes.of([prefix_ids[r] for r in rows], self.device)
            required = [phrases[r] for r in rows] if phrases[rows[0]] else None
            if bounded:  # few batch shapes (fastpath.bounded_shapes): the slot shapes, or their source lengths
                plain = forced is None and required is None and not s.sampling  # else no filler rows
                shape = slot_shape(*src.shape, self._budget()) if plain else (src.size(0), rounded_up(src.size(1)))
                src = filled(src, *shape)
            src = src.to(self.device)
            found = self._search(src, forced, [seeds[r] for r in rows] if s.sampling else None, required)
            return rows, src, required, found[: len(rows)]

        bounded = fastpath.bounded_shapes(self.device)
        batches = list(batches_of(todo, ids, phrases, self._budget(), slots=(fixed or bounded) and not s.sampling))
        threads = 1 if s.sampling or fixed else fastpath.search_threads(self.device, len(batches))
        for rows, src, required, found in searched_in_threads(search, batches, threads):
            if required:
                joins = self._word_joins()
                self.terms_missed += sum(missing(h[0].tokens, need, joins) > 0 for h, need in zip(found, required))
            for row, hyps in zip(rows, found):
                prefix = (prefixes[row], self.tokenizer.decode_tgt([prefix_ids[row]])[0]) if prefixes else None
                results[row] = [self._finish(ids[row][tag:], h, prefix) for h in hyps]
            asked = [k for k, row in enumerate(rows) if attention_lines is None or attention_lines[row]]
            if attention_layer is not None and asked:
                best = [found[k][0] for k in asked]
                weights = self._attention(src[asked], best, attention_layer, attention_head)
                for k, row_weights in zip(asked, weights):
                    results[rows[k]][0].attention = row_weights[:, tag:]  # the caller's pieces only, as src_pieces
            bar.update(len(rows))
        bar.close()
        return results

    def score(
        self, sources: list[str], targets: list[str], progress: bool = False, batch_tokens: int = SCORE_BATCH_TOKENS
    ) -> list[PairScore]:
        """How likely the model finds each target as the translation of its source (mt/decoding/scoring.py):
        one PairScore per pair, in order. Sources are cut to max_src_len pieces as for translating
        (counted in self.truncated); targets are scored whole, an empty one as EOS alone."""
        src_ids, tgt_ids = self._encode_pairs(sources, targets)
        with torch.inference_mode(), self._autocast():
            found = score_ids(self.model, src_ids, tgt_ids, self.device, batch_tokens, progress)
        return [PairScore(self.tokenizer.tgt_pieces(t + [EOS]), lp) for t, lp in zip(tgt_ids, found)]

    def _autocast(self):
        """Autocast over the low-precision copy where it pays (fastpath.autocast_decoding); a no-op in fp32."""
        if fastpath.autocast_decoding(self.device):
            return autocast(self.device, self.settings.precision)
        return contextlib.nullcontext()

    def _phrases(self, terms: list[str]) -> Phrases:
        """A line's required terms as target pieces, the blank ones left out."""
        return [pieces for pieces in self.tokenizer.encode_tgt([t.strip() for t in terms]) if pieces]

    def _word_joins(self) -> frozenset[int]:
        """The target pieces that continue a word (a letter or digit first, no ▁), so that a required term
        is met only as whole words; none in a language written without spaces between words."""
        target = self.settings.tgt_lang or self.languages[1]
        language = target if isinstance(target, str) else "+".join(map(str, target))
        if language not in self._joins:
            pieces = map(self.tokenizer.tgt.id_to_piece, range(self.tokenizer.tgt.get_piece_size()))
            joins = (i for i, piece in enumerate(pieces) if piece[:1].isalnum())
            self._joins[language] = frozenset() if written_without_spaces(language) else frozenset(joins)
        return self._joins[language]

    def _search(
        self, src, prefixes: Prefixes | None, seeds: list[int] | None, phrases: list[Phrases] | None = None
    ) -> list[list[Hypothesis]]:
        s = self.settings
        with torch.inference_mode(), self._autocast():
            if phrases:
                return terms_beam_search(
                    self.model, src, phrases, s.beam, s.alpha, s.max_len_a, s.max_len_b, s.nbest, s.constraints,
                    self._word_joins(), prefixes,
                )  # fmt: skip
            if s.sampling:
                steps = int(max_output_lengths(src, s.max_len_a, s.max_len_b).max()) + s.max_len_b
                if prefixes is not None:
                    steps += prefixes.longest
                draws = uniforms(seeds, s.nbest, steps).to(src.device)
                sampler = Sampler(draws, s.temperature, s.topk, s.topp, s.epsilon)
                return sample_search(
                    self.model, src, sampler, s.nbest, s.max_len_a, s.max_len_b, prefixes, s.constraints
                )
            if fastpath.fixed_slot_search(self.model, s.cuda_graphs, prefixes is not None or s.constraints is not None):
                with self._fixed_slots:
                    return self._fixed_slot_search(src)
            if s.beam == 1:
                found = greedy_search(self.model, src, s.max_len_a, s.max_len_b, prefixes, s.constraints)
                return [[h] for h in found]
            return beam_search(
                self.model, src, s.beam, s.alpha, s.max_len_a, s.max_len_b, s.nbest, prefixes, s.constraints
            )

    def _budget(self) -> int:
        """Source tokens per batch. Beam search and sampling decode several rows per sentence: keep the rows
        per batch constant."""
        return max(1, self.settings.batch_tokens // self.settings.rows_per_line)

    def _fixed_slot_search(self, src: torch.Tensor) -> list[list[Hypothesis]]:
        """Search in fixed slots (mt/decoding/fixed_slots.py) on the batch padded to its slot shape (filler
        rows, source positions to a multiple of 8): batches of one shape share a search's buffers and its
        captured step."""
        s = self.settings
        rows, cols = slot_shape(*src.shape, self._budget())
        padded = filled(src, rows, cols)
        key = (rows, cols, s.beam, s.nbest, s.alpha, s.max_len_a, s.max_len_b)
        search = self._searches.pop(key, None)
        if search is None:
            length = int(cols * s.max_len_a) + s.max_len_b  # room for any sentence of this shape
            if s.beam == 1:
                search = FixedSlotGreedy(self.model, padded, s.max_len_a, s.max_len_b, length)
            else:
                search = FixedSlotBeam(self.model, padded, s.beam, s.alpha, s.max_len_a, s.max_len_b, s.nbest, length)
        else:
            search.load(padded, s.max_len_a, s.max_len_b)
        self._searches[key] = search  # most recently used last
        room = fastpath.fixed_slot_memory(self.device)
        while len(self._searches) > FIXED_SLOT_SEARCHES_KEPT or (
            len(self._searches) > 1 and sum(kept.nbytes() for kept in self._searches.values()) > room
        ):
            oldest = next(iter(self._searches))
            del self._searches[oldest]
            self._replays.forget(lambda captured, gone=oldest: captured[0] == gone)

        def step(form: tuple[int, int]) -> None:  # captured for each (window, store parity), warmed up once for both
            self._replays.run((key, *form), search.step, warm_as=(key, form[0]))

        run_search(search, step=step)
        found = search.results()[: src.size(0)]
        return [[h] for h in found] if s.beam == 1 else found

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

    def _finish(self, src_ids: list[int], hyp: Hypothesis, prefix: tuple[str, str] | None = None) -> Translation:
        """prefix: (as the caller wrote it, as the tokenizer decodes it), for a line that has one."""
        text = self.tokenizer.decode_tgt([hyp.tokens])[0]
        if prefix is not None:
            text = verbatim(prefix[0], prefix[1], text)
        return Translation(
            text, hyp.score, self.tokenizer.src_pieces(src_ids + [EOS]), self.tokenizer.tgt_pieces(hyp.tokens + [EOS])
        )


def filled(src: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """src (B, S) in a batch of (rows, cols): padding to the right, and filler rows of an empty sentence."""
    padded = src.new_full((rows, cols), PAD)
    padded[: src.size(0), : src.size(1)] = src
    padded[src.size(0) :, 0] = EOS
    return padded


def searched_in_threads(search, batches: list, threads: int):
    """search(batch) of each batch, in order: in `threads` threads sharing the cores where there are that
    many batches (fastpath.search_threads), else one after the other. The caller finishes each batch's
    results while the threads search the next ones. One batch more than the threads is under way at a time:
    a thread that finishes first has the next one, and a stop (Ctrl-C, an error) waits for those alone."""
    if threads < 2 or len(batches) < threads:
        yield from map(search, batches)
        return
    with fastpath.cores_shared_by(threads):
        pool = ThreadPoolExecutor(threads, thread_name_prefix="mt-search")
        try:
            under_way = deque(pool.submit(search, batch) for batch in batches[: threads + 1])
            for batch in batches[threads + 1 :]:
                done = under_way.popleft().result()
                under_way.append(pool.submit(search, batch))
                yield done
            while under_way:
                yield under_way.popleft().result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def batches_of(todo: list[int], ids: list[list[int]], phrases: list[Phrases], budget: int, slots: bool = False):
    """The lines at todo in batches of about `budget` source tokens, similar lengths together; lines with
    required terms in batches of their own. slots: batches that fill the fixed-slot search's shapes."""
    for group in ([i for i in todo if not phrases[i]], [i for i in todo if phrases[i]]):
        lengths = np.array([len(ids[i]) for i in group], dtype=np.int64)
        if slots and group and not phrases[group[0]]:
            batches = slot_batches((lengths + 1).tolist(), budget)  # + EOS
        else:
            batches = token_batches(lengths, lengths, budget) if group else []
        for batch in batches:
            yield [group[j] for j in batch]


def check_attention_choice(model, layer: int, head: int | None) -> None:
    """A layer and head the model has (a negative layer counts from the last), or a one-line error."""
    if not hasattr(model, "attention_maps"):
        raise MTError("attention maps show one model's attention: not an ensemble's")
    layers, heads = model.attention_maps()
    if not -layers <= layer < layers:
        which = f"{layers} decoder layers (0 to {layers - 1}; -1: last)" if layers > 1 else "one attention (layer 0)"
        raise MTError(f"attention layer {layer}: the model has {which}")
    if head is not None and not 0 <= head < heads:
        raise MTError(f"attention head {head}: the model's cross-attention has {heads} heads (0 to {heads - 1})")
