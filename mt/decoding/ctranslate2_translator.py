"""Translating with a CTranslate2 export (mt/export.py) instead of PyTorch: the same Translator
interface, tokenizer and decode settings, so `translate --engine ctranslate2` keeps every line
discipline of `translate`. Nothing here imports torch: `translate --engine ctranslate2` starts without it.

Greedy search gives the same pieces as ours. Beam search scores with CTranslate2's length penalty,
score / length^alpha, where ours uses GNMT's ((5 + length) / 6)^alpha: with alpha 0 they agree.
Sampling passes the same temperature, top-k and top-p to CTranslate2's sampler. Its draws are not
reproducible: set_random_seed does not reach the threads that decode (measured: the same call twice gave
other samples), where the torch engine seeds each line apart. Target prefixes are CTranslate2's
target_prefix.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mt.data.tokenizer import EOS, Tokenizer
from mt.decoding.line_translator import LineTranslator
from mt.decoding.settings import (
    SCORE_BATCH_TOKENS,
    DecodeSettings,
    PairScore,
    Translation,
    check_aligned,
    verbatim,
)
from mt.errors import MTError
from mt.host import cpu_cores
from mt.languages import into

EXPORT_INFO = "mt_export.json"  # what mt-export writes beside the model: decode settings, source checkpoints
COMPUTE_TYPES = {None: "default", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int8": "int8"}


def import_ctranslate2():
    """ctranslate2, or a one-line error saying how to install it (an optional extra)."""
    try:
        import ctranslate2
    except ImportError:
        raise MTError("ctranslate2 is not installed: pip install -e '.[export]' (make test installs it)") from None
    return ctranslate2


def cuda_available() -> bool:
    return import_ctranslate2().get_cuda_device_count() > 0


def load_export(folder: str) -> tuple[Tokenizer, dict]:
    """The tokenizer and mt_export.json of an export directory, or a one-line error."""
    path = Path(folder)
    if not (path / EXPORT_INFO).is_file() or not (path / "model.bin").is_file():
        raise MTError(
            f"{folder}: not a CTranslate2 export of this toolkit (no {EXPORT_INFO} / model.bin; see mt-export)"
        )
    info = json.loads((path / EXPORT_INFO).read_text(encoding="utf-8"))
    return Tokenizer.load(path), info


def is_export(path) -> bool:
    """Whether path is an export directory (mt-export) rather than a checkpoint."""
    return Path(path).is_dir() and (Path(path) / EXPORT_INFO).is_file()


def load_export_translator(
    folder: str, device: str | None = None, compute_type: str | None = None, max_src_len: int = 1024, **decode_choices
) -> CTranslate2Translator:
    """A CTranslate2Translator for an export directory, decoding with the export's settings (those of the
    checkpoint it came from) and any DecodeSettings fields given as keywords on top. device: default CUDA
    when CTranslate2 sees one."""
    _, info = load_export(folder)
    settings = DecodeSettings.from_config(info["decode"], **decode_choices)
    device = device or ("cuda" if cuda_available() else "cpu")
    translator = CTranslate2Translator(folder, settings, device, compute_type, max_src_len)
    translator.languages = tuple(info.get("languages", ("", "")))
    if settings.tgt_lang:
        into([], settings.tgt_lang, translator.languages)  # a language the model lacks: one line now
    return translator


class CTranslate2Translator(LineTranslator):
    def __init__(
        self,
        folder: str,
        settings: DecodeSettings,
        device: str = "cpu",
        compute_type: str | None = None,
        max_src_len: int = 1024,
    ):
        """compute_type: None (as exported), fp32, bf16, fp16 or int8."""
        ct2 = import_ctranslate2()
        self.tokenizer, self.info = load_export(folder)
        self.settings, self.max_src_len, self.device = settings, max_src_len, device
        try:
            self.engine = ct2.Translator(
                folder,
                device=device,
                compute_type=COMPUTE_TYPES[compute_type],
                intra_threads=cpu_cores() if device == "cpu" else 0,
            )
        except (RuntimeError, ValueError) as err:
            raise MTError(f"{folder}: CTranslate2 cannot load it ({str(err).splitlines()[0][:200]})") from None
        self.truncated = 0

    def _weights_type(self) -> str:
        return self.engine.compute_type  # as exported or asked for: int8_float32, float32, ...

    def _translate_nbest(
        self,
        lines: list[str],
        attention_layer: int | None = None,
        attention_head: int | None = None,
        progress: bool = False,
        prefixes: list[str] | None = None,
        seeds: list[int] | None = None,
        first_line: int = 0,
        terms: list[list[str]] | None = None,
    ) -> list[list[Translation]]:
        """settings.nbest translations for every line, in input order; an empty line gives empty ones.
        prefixes: one target prefix per line ("" for none). seeds and first_line are the torch engine's
        (per-line sampling seeds); CTranslate2's sampler takes no seed that holds (see above). terms are
        refused before this is called (places_terms is False)."""
        if attention_layer is not None:
            raise MTError("--alignments and --attention-dir need the torch engine (CTranslate2 exports no attention)")
        check_aligned(lines, prefixes, "prefixes")
        s = self.settings
        ids, cut = self.tokenizer.encode_src_truncated(self._sources(lines), self.max_src_len)
        self.truncated += cut
        tag = self._tag_pieces()  # left out of each Translation's src_pieces, as the torch engine does
        prefix_ids = self.tokenizer.encode_tgt(prefixes) if prefixes else [[] for _ in lines]
        results: list[list[Translation]] = [[Translation("", 0.0, [], [])] * s.nbest for _ in lines]
        # Our length limit, a * |x| + b with |x| counting EOS, differs per sentence and CTranslate2 takes one
        # limit per call: one call per source length (computed as search.max_output_lengths does, in fp32).
        by_length = defaultdict(list)
        for i, seq in enumerate(ids):
            if seq:
                by_length[len(seq) + 1].append(i)
        bar = tqdm(
            total=sum(map(len, by_length.values())), unit="sent", disable=None if progress else True, leave=False
        )
        for length, rows in sorted(by_length.items()):
            limit = int(np.float32(length) * np.float32(s.max_len_a)) + s.max_len_b
            limit = max([limit] + [len(prefix_ids[r]) + s.max_len_b for r in rows])  # room after a prefix
            copies = s.nbest if s.sampling else 1  # samples: each line as many times
            sources = [self.tokenizer.src_pieces(ids[r]) for r in rows for _ in range(copies)]
            targets = [self.tokenizer.tgt_pieces(prefix_ids[r]) or None for r in rows for _ in range(copies)]
            found = self.engine.translate_batch(
                sources,
                target_prefix=targets if prefixes else None,
                max_decoding_length=limit,
                max_input_length=0,
                return_scores=True,
                max_batch_size=s.batch_tokens,
                batch_type="tokens",
                **self._strategy(),
            )
            for i, row in enumerate(rows):
                hyps = [
                    (p, sc)
                    for result in found[i * copies : (i + 1) * copies]
                    for p, sc in zip(result.hypotheses, result.scores)
                ]
                prefix = (prefixes[row], self.tokenizer.decode_tgt([prefix_ids[row]])[0]) if prefixes else None
                results[row] = [self._finish(ids[row][tag:], pieces, score, prefix) for pieces, score in hyps]
            bar.update(len(rows))
        bar.close()
        return results

    def score(
        self, sources: list[str], targets: list[str], progress: bool = False, batch_tokens: int = SCORE_BATCH_TOKENS
    ) -> list[PairScore]:
        """As the torch engine's Translator.score, through CTranslate2's score_batch (progress: the torch
        engine's; CTranslate2 scores the whole list in one call)."""
        src_ids, tgt_ids = self._encode_pairs(sources, targets)
        found = self.engine.score_batch(
            [self.tokenizer.src_pieces(ids) for ids in src_ids],
            [self.tokenizer.tgt_pieces(ids) for ids in tgt_ids],
            max_batch_size=batch_tokens,
            batch_type="tokens",
            max_input_length=0,
        )
        return [
            PairScore(self.tokenizer.tgt_pieces(ids + [EOS]), result.log_probs) for ids, result in zip(tgt_ids, found)
        ]

    def _strategy(self) -> dict:
        """CTranslate2's options for the settings' search or sampling, and their constraints."""
        s = self.settings
        constraints = dict(min_decoding_length=s.min_len, no_repeat_ngram_size=s.no_repeat_ngram)
        if not s.sampling:
            return dict(beam_size=s.beam, length_penalty=s.alpha, num_hypotheses=s.nbest, **constraints)
        if s.epsilon:
            raise MTError("epsilon sampling needs the torch engine (CTranslate2 has no epsilon cut)")
        greedy = s.temperature == 0  # CTranslate2 takes top-1 for the limit T -> 0
        return dict(
            beam_size=1,
            sampling_topk=1 if greedy else s.topk,
            sampling_topp=s.topp,
            sampling_temperature=1.0 if greedy else s.temperature,
            **constraints,
        )

    def _finish(self, src_ids: list[int], pieces: list[str], score: float, prefix=None) -> Translation:
        tgt_ids = [self.tokenizer.tgt.piece_to_id(p) for p in pieces]
        text = self.tokenizer.decode_tgt([tgt_ids])[0]
        return Translation(
            verbatim(*prefix, text) if prefix else text,
            score,
            self.tokenizer.src_pieces(src_ids + [EOS]),
            pieces + [self.tokenizer.tgt.id_to_piece(EOS)],
        )
