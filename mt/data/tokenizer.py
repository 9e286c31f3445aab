"""Sentencepiece subword tokenizers (BPE or unigram), joint or separate, trained on the training split.

Special ids are fixed so every model agrees on them: pad 0, unk 1, bos 2, eos 3.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

import sentencepiece as spm

from mt.config.validation import NORMALIZATIONS
from mt.data.raw_text import warn_if_preprocessed
from mt.errors import MTError
from mt.host import cpu_cores
from mt.languages import cjk_language, language_list

log = logging.getLogger(__name__)

PAD, UNK, BOS, EOS = 0, 1, 2, 3

DEFAULT_NORMALIZATION = NORMALIZATIONS[0]  # of sentencepiece's rules (tokenizer.normalization)

# What would split one translation into several lines or fields: the line breaks of str.splitlines, and the tab
# of the n-best and alignment formats. Byte pieces (tokenizer.byte_fallback) can spell any of them, and a
# sampled or badly trained model does emit <0x0A>, which would break "N lines in, N lines out".
BREAKS = re.compile(r"\s*[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]\s*")

# sentencepiece's calls on a list of lines start a pool of threads each time: ~0.1 ms, 20 lines' worth of
# encoding or decoding one by one. A translator decodes each hypothesis on its own, and a server gets a few
# lines at a time: below this many lines, one call per line.
BATCH_CALL_PAYS = 64


class Tokenizer:
    """A source and a target sentencepiece model (the same one when the vocabulary is joint)."""

    def __init__(self, src_proto: bytes, tgt_proto: bytes | None = None):
        self.src_proto, self.tgt_proto = src_proto, tgt_proto
        self.src = processor_from_proto(src_proto)
        self.tgt = self.src if tgt_proto is None else processor_from_proto(tgt_proto)

    @property
    def joint(self) -> bool:
        return self.tgt_proto is None

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        return line_by_line_if_few(self.src.encode, lines)

    def encode_src_truncated(self, lines: list[str], max_len: int) -> tuple[list[list[int]], int]:
        """Source ids cut to max_len pieces, and how many lines were cut (what a translator reports)."""
        ids = line_by_line_if_few(self.src.encode, lines)
        cut = sum(len(seq) > max_len for seq in ids)
        return [seq[:max_len] for seq in ids], cut

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return line_by_line_if_few(self.tgt.encode, lines)

    def src_pieces(self, ids: list[int]) -> list[str]:
        return [self._src_table[i] for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self._tgt_table[i] for i in ids]

    @functools.cached_property
    def _src_table(self) -> list[str]:
        """Every source piece by id: a list lookup is several times faster than a call into sentencepiece
        per token, and a translator shows every token of every line as a piece."""
        return self.src.id_to_piece(list(range(self.src_vocab_size)))

    @functools.cached_property
    def _tgt_table(self) -> list[str]:
        return self._src_table if self.joint else self.tgt.id_to_piece(list(range(self.tgt_vocab_size)))

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        """Target texts, each one line: a line break or tab the pieces spell becomes one space (see BREAKS)."""
        return [one_line(text) for text in line_by_line_if_few(self.tgt.decode, ids)]

    @property
    def normalization(self) -> str | None:
        """The rule the target side normalizes text by, which translations come out in (tokenizer.normalization):
        sentencepiece's name for it, read from the model; None where protobuf, which reads it, is missing."""
        try:
            from sentencepiece import sentencepiece_model_pb2
        except ImportError:
            return None
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(self.src_proto if self.joint else self.tgt_proto)
        return proto.normalizer_spec.name

    def state_dict(self) -> dict:
        """Bytes of the models, so a checkpoint carries its tokenizer."""
        return {"src": self.src_proto, "tgt": self.tgt_proto}

    @classmethod
    def from_state_dict(cls, state: dict) -> Tokenizer:
        return cls(state["src"], state["tgt"])

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in ("spm.model", "spm.src.model", "spm.tgt.model"):
            (folder / stale).unlink(missing_ok=True)
        if self.joint:
            (folder / "spm.model").write_bytes(self.src_proto)
        else:
            (folder / "spm.src.model").write_bytes(self.src_proto)
            (folder / "spm.tgt.model").write_bytes(self.tgt_proto)

    @classmethod
    def load(cls, folder: Path) -> Tokenizer:
        if (folder / "spm.model").exists():
            return cls((folder / "spm.model").read_bytes())
        return cls((folder / "spm.src.model").read_bytes(), (folder / "spm.tgt.model").read_bytes())


def line_by_line_if_few(call, lines: list) -> list:
    """call(lines) of a sentencepiece processor (encode, decode): in one call where that pays, else one call
    per line (see BATCH_CALL_PAYS)."""
    return call(lines) if len(lines) >= BATCH_CALL_PAYS else [call(line) for line in lines]


def one_line(text: str) -> str:
    """text with each line break or tab, and the spaces around it, made one space (none at either end)."""
    return BREAKS.sub(" ", text).strip() if BREAKS.search(text) else text


def processor_from_proto(proto: bytes) -> spm.SentencePieceProcessor:
    """A sentencepiece model from its serialized bytes, checked for our special ids."""
    # Its calls on a list use this many threads; by default as many as the machine has, beyond what a
    # container or an affinity mask lets this process use.
    processor = spm.SentencePieceProcessor(num_threads=cpu_cores())
    try:
        processor.load_from_serialized_proto(proto)
    except (RuntimeError, OSError) as err:
        raise MTError(f"not a sentencepiece model: {err}") from None
    if processor.pad_id() != PAD or processor.eos_id() != EOS or processor.bos_id() != BOS:
        raise MTError("sentencepiece model has unexpected special ids (pad 0, unk 1, bos 2, eos 3 expected)")
    return processor


def train_sentencepiece(
    lines: list[str], tok_cfg, seed: int = 1, symbols: list[str] = (), origin: str = "the corpus"
) -> bytes:
    """Train one sentencepiece model on lines and return its serialized bytes; symbols: pieces kept whole;
    origin: the text's source, for an error."""

    lines = [line for line in lines if line.strip()]
    if not lines:
        raise MTError(f"{origin}: every line is empty, no text to train a tokenizer on")
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)  # sampling of input sentences is reproducible
    try:
        _train_into(model, lines, tok_cfg, symbols)
    except RuntimeError as err:
        raise MTError(_training_failure(str(err), tok_cfg)) from None
    return model.getvalue()


def _training_failure(said: str, tok_cfg) -> str:
    """sentencepiece's refusal as one line that names the setting to change."""
    too_small = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", said)
    if too_small:
        fixed = "the special pieces and 256 byte pieces" if tok_cfg.byte_fallback else "the special pieces"
        return (
            f"tokenizer.vocab_size={tok_cfg.vocab_size}: the training text's characters (character_coverage "
            f"{coverage(tok_cfg):g}) and {fixed} take {too_small.group(2)}; raise tokenizer.vocab_size to "
            "at least that, or lower tokenizer.character_coverage (e.g. 0.9995)"
        )
    return "tokenizer training failed: " + said.split("] ", 1)[-1].splitlines()[0].strip()


def _train_into(model: io.BytesIO, lines: list[str], tok_cfg, symbols) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type=tok_cfg.type,
        vocab_size=tok_cfg.vocab_size,
        hard_vocab_limit=False,  # a small corpus gets a smaller vocabulary rather than an error
        character_coverage=coverage(tok_cfg),
        normalization_rule_name=tok_cfg.get("normalization") or DEFAULT_NORMALIZATION,
        byte_fallback=tok_cfg.byte_fallback,
        input_sentence_size=tok_cfg.max_sentences,
        shuffle_input_sentence=True,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        num_threads=cpu_cores(),
        minloglevel=2,
        **({"user_defined_symbols": list(symbols)} if symbols else {}),
    )


RICH_CHARACTER_SETS = ("zh", "ja")  # languages whose character coverage defaults to RICH_COVERAGE
RICH_COVERAGE = 0.9995


def coverage(tok_cfg) -> float:
    """The character coverage sentencepiece trains with: 1.0 where none was chosen (tokenizer_settings chooses)."""
    return getattr(tok_cfg, "character_coverage", None) or 1.0


def tokenizer_settings(cfg):
    """cfg.tokenizer as the tokenizer is trained, what the config leaves to the languages (null) chosen:
    normalization identity where a target language is Chinese, Japanese or Korean, else sentencepiece's
    nmt_nfkc; character coverage 0.9995 where a source or target language is Chinese or Japanese, else 1."""
    settings = cfg.tokenizer.copy()
    if settings.get("normalization") is None:
        cjk = any(cjk_language(lang) for lang in language_list(cfg.data.tgt_lang))
        settings.normalization = "identity" if cjk else DEFAULT_NORMALIZATION
    if settings.get("character_coverage") is None:
        languages = language_list(cfg.data.src_lang) + language_list(cfg.data.tgt_lang)
        rich = any(cjk_language(lang) in RICH_CHARACTER_SETS for lang in languages)
        settings.character_coverage = RICH_COVERAGE if rich else 1.0
    return settings


def fingerprint(tok_cfg, corpus) -> str:
    """Identifies the settings (tokenizer_settings) and training text a tokenizer was made from."""
    settings = dict(tok_cfg)
    if settings.get("normalization") in (None, DEFAULT_NORMALIZATION):  # as before the setting was there
        settings.pop("normalization", None)
    return hashlib.sha256((json.dumps(settings, sort_keys=True) + corpus.digest()).encode()).hexdigest()


def build_tokenizer(tok_cfg, corpus, folder: Path, cache_dir: str | None = None) -> Tokenizer:
    """The run's tokenizer in folder: reused if it was made from the same data and settings, else taken from
    cache_dir/tokenizers (shared by runs, keyed like folder's meta.json), else trained and cached."""
    meta_path = folder / "meta.json"
    key = fingerprint(tok_cfg, corpus)
    if meta_path.exists() and json.loads(meta_path.read_text()).get("fingerprint") == key:
        log.info("tokenizer: reusing %s (same data and settings)", folder)
        return Tokenizer.load(folder)
    cached = Path(cache_dir) / "tokenizers" / key[:24] if cache_dir else None
    if cached is not None and _fingerprint_in(cached) == key:
        tokenizer = Tokenizer.load(cached)
        log.info("tokenizer: from the cache %s (same data and settings)", cached)
    else:
        tokenizer = _train(tok_cfg, corpus)
        if cached is not None:
            _store(tokenizer, key, cached)
    tokenizer.save(folder)
    meta_path.write_text(json.dumps(_meta(tokenizer, key), indent=2) + "\n")
    log.info(
        "tokenizer: vocab %d (src) / %d (tgt), saved in %s", tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, folder
    )
    return tokenizer


def _train(tok_cfg, corpus) -> Tokenizer:
    log.info(
        "tokenizer: training sentencepiece %s, vocab %d, %s, normalization %s, character coverage %g",
        tok_cfg.type,
        tok_cfg.vocab_size,
        "joint" if tok_cfg.joint else "separate",
        tok_cfg.get("normalization") or DEFAULT_NORMALIZATION,
        coverage(tok_cfg),
    )
    symbols = getattr(corpus, "source_symbols", [])  # a tag before some training sources (concatenation.TAG)
    src, tgt = corpus.tokenizer_sample("src"), corpus.tokenizer_sample("tgt")
    warn_if_preprocessed(corpus.origin, {"source": src, "target": tgt})
    if tok_cfg.joint:
        tokenizer = Tokenizer(train_sentencepiece(src + tgt, tok_cfg, symbols=symbols, origin=corpus.origin))
    else:
        tokenizer = Tokenizer(
            train_sentencepiece(src, tok_cfg, symbols=symbols, origin=f"{corpus.origin} (source)"),
            train_sentencepiece(tgt, tok_cfg, origin=f"{corpus.origin} (target)"),
        )
    smallest = min(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    if smallest < tok_cfg.vocab_size:  # sentencepiece stops where the text has no more pieces to offer
        log.warning(
            "tokenizer: %s pieces, fewer than tokenizer.vocab_size=%s asks for: the training text holds no more",
            f"{smallest:,}",
            f"{tok_cfg.vocab_size:,}",
        )
    return tokenizer


def _meta(tokenizer: Tokenizer, key: str) -> dict:
    return {"fingerprint": key, "src_vocab_size": tokenizer.src_vocab_size, "tgt_vocab_size": tokenizer.tgt_vocab_size}


def _fingerprint_in(folder: Path) -> str | None:
    try:
        return json.loads((folder / "meta.json").read_text()).get("fingerprint")
    except (OSError, ValueError):
        return None


def _store(tokenizer: Tokenizer, key: str, cached: Path) -> None:
    """Into the cache atomically (a folder written aside, then renamed): a half-written one is never read.
    A cache that cannot be written costs the next run a tokenizer training, nothing more."""
    tmp = None
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cached.parent, prefix=".tmp-"))
        tokenizer.save(tmp)
        (tmp / "meta.json").write_text(json.dumps(_meta(tokenizer, key), indent=2) + "\n")
        shutil.rmtree(cached, ignore_errors=True)  # a stale or broken entry under this key
        try:
            os.replace(tmp, cached)
        except OSError:
            if _fingerprint_in(cached) != key:
                raise
            shutil.rmtree(tmp)  # a run beside this one (a sweep's, --jobs) stored the same tokenizer first
    except OSError as err:
        log.warning("tokenizer: not cached in %s (%s)", cached, err.strerror or err)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
