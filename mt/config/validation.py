"""The checks on a composed config that types alone cannot express: ranges, combinations, and settings
the schema lacks; each failure one line naming the key, before any work starts."""

from __future__ import annotations

import re
from collections.abc import Sequence

from omegaconf import DictConfig

from mt.config.model import model_options
from mt.config.near_miss import check_known
from mt.errors import MTError
from mt.languages import directions, language_list

# sentencepiece's normalization rules, by name: what tokenizer.normalization may be (the first: the default)
NORMALIZATIONS = ("nmt_nfkc", "nfkc", "identity", "nmt_nfkc_cf", "nfkc_cf")


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise MTError(f"config {key}: {message}")


def training_splits(data_cfg) -> list:
    """data.train_split as a list: one split's name, or several (validate checks they are names)."""
    splits = data_cfg.train_split
    return [splits] if isinstance(splits, str) else list(splits) if isinstance(splits, Sequence) else splits


def validate(cfg: DictConfig) -> None:
    """Range and consistency checks that types alone cannot express."""
    check_known(cfg)
    d, t, m, tr, dec = cfg.data, cfg.tokenizer, cfg.model, cfg.train, cfg.decode
    _check(d.source in ("hub", "files"), "data.source", f"must be 'hub' or 'files', got {d.source!r}")
    if d.source == "files":
        _check(bool(d.dir), "data.dir", "is required with data=files (a folder of {split}.{lang} or {split}.tsv files)")
    else:
        _check(bool(d.name), "data.name", "is required with data=hub (a hub id or local dataset folder)")
    for key in ("src_lang", "tgt_lang"):
        langs = language_list(d[key])
        _check(
            len(langs) > 0 and all(isinstance(lang, str) and re.fullmatch(r"[A-Za-z0-9_-]+", lang) for lang in langs),
            f"data.{key}",
            f"must be a language code (letters, digits, _ or -) or a list of them, got {d[key]!r}",
        )
        _check(len(set(langs)) == len(langs), f"data.{key}", f"names a language twice: {d[key]!r}")
    _check(bool(directions(d)), "data.src_lang", "must differ from data.tgt_lang")
    if d.columns is not None:
        names = list(d.columns)
        _check(
            len(names) >= 2 and all(c and "\t" not in c for c in names) and len(set(names)) == len(names),
            "data.columns",
            f"must name each column of the .tsv files once, at least two, got {names!r}",
        )
    splits = training_splits(d)
    _check(
        isinstance(splits, Sequence) and len(splits) > 0 and all(isinstance(s, str) and s for s in splits),
        "data.train_split",
        f"must be a split's name or a list of them, got {d.train_split!r}",
    )
    for split in d.tagged_splits:
        _check(split in splits, "data.tagged_splits", f"{split!r} is not one of data.train_split ({', '.join(splits)})")
    _check(d.direction_temperature >= 1, "data.direction_temperature", "must be >= 1 (1 = directions as their pairs)")
    _check(d.valid_from_train >= 0, "data.valid_from_train", "must be >= 0 (0: read data.valid_split)")
    _check(d.test_from_train >= 0, "data.test_from_train", "must be >= 0 (0: read data.test_split)")
    for key in ("valid_from_train", "test_from_train"):
        if d[key]:
            _check(len(directions(d)) == 1, f"data.{key}", "takes one direction: with several, give each one's files")
            _check(
                not d.tagged_splits,
                f"data.{key}",
                "takes untagged training splits only (synthetic pairs would be drawn): give the split's files",
            )
    _check(not d.test_from_train or bool(d.test_split), "data.test_from_train", "needs data.test_split to name the set")
    _check(d.max_len > 0, "data.max_len", "must be positive")
    _check(d.pool_pairs > 0, "data.pool_pairs", "must be positive")
    _check(d.shard_lines > 0, "data.shard_lines", "must be positive")
    _check(d.max_len_ratio >= 0, "data.max_len_ratio", "must be >= 0")
    _check(d.valid_max_sentences >= 0, "data.valid_max_sentences", "must be >= 0 (0 = all)")
    _check(t.type in ("unigram", "bpe"), "tokenizer.type", f"must be 'unigram' or 'bpe', got {t.type!r}")
    _check(t.vocab_size >= 8, "tokenizer.vocab_size", "must be at least 8")
    _check(
        not t.byte_fallback or t.vocab_size >= 300,
        "tokenizer.vocab_size",
        "must be at least 300 with tokenizer.byte_fallback=true (256 byte pieces)",
    )
    coverage = t.character_coverage
    _check(coverage is None or 0 < coverage <= 1, "tokenizer.character_coverage", "must be in (0, 1] (or null)")
    _check(
        t.normalization in (None, *NORMALIZATIONS),
        "tokenizer.normalization",
        f"must be one of {', '.join(NORMALIZATIONS)} (null: by the target language)",
    )
    _check(t.max_sentences >= 1, "tokenizer.max_sentences", "must be >= 1 (sentences a side the tokenizer learns from)")
    options = model_options(m)  # the architecture's own checks; another architecture's option is an error
    _check(not options.tie_embeddings or t.joint, "model.tie_embeddings", "needs tokenizer.joint=true")
    _check(tr.max_tokens > 0, "train.max_tokens", "must be positive")
    _check(tr.update_freq >= 1, "train.update_freq", "must be >= 1")
    _check(tr.lr is None or tr.lr > 0, "train.lr", "must be positive")
    _check(tr.warmup >= 1, "train.warmup", "must be >= 1")
    _check(tr.eps > 0, "train.eps", "must be positive (Adam's epsilon)")
    _check(tr.seed >= 0, "train.seed", "must be >= 0")
    _check(0 <= tr.cooldown < 1, "train.cooldown", "must be in [0, 1)")
    _check(len(tr.betas) == 2 and all(0 <= b < 1 for b in tr.betas), "train.betas", "must be two values in [0, 1)")
    _check(0 <= tr.ema_decay < 1, "train.ema_decay", "must be in [0, 1) (0 = off; 0.999 averages ~1,000 updates)")
    _check(0 <= tr.label_smoothing < 1, "train.label_smoothing", "must be in [0, 1)")
    _check(
        t.type != "bpe" or tr.subword_sampling < 1,
        "train.subword_sampling",
        "with a BPE tokenizer is BPE-dropout's probability: must be below 1 (0.1 is usual)",
    )
    _check(tr.precision in ("fp32", "bf16", "fp16"), "train.precision", "must be fp32, bf16 or fp16")
    _check(not tr.bf16_weights or tr.precision == "bf16", "train.bf16_weights", "needs train.precision=bf16")
    _check(tr.device in ("auto", "cpu", "cuda"), "train.device", "must be auto, cpu or cuda")
    _check(
        tr.best_metric in ("bleu", "chrf", "ppl"),
        "train.best_metric",
        f"must be bleu, chrf or ppl, got {tr.best_metric!r}",
    )
    _check(
        tr.init_from != "",
        "train.init_from",
        "is required: the checkpoint to fine-tune, e.g. train.init_from=runs/RUN/checkpoints/final.pt",
    )
    for key in ("max_steps", "valid_every", "save_every", "log_every"):
        _check(tr[key] > 0, f"train.{key}", "must be positive")
    _check(tr.keep_best >= 1, "train.keep_best", "must be >= 1")
    _check(tr.max_bad_steps >= 1, "train.max_bad_steps", "must be >= 1")
    _check(tr.average_last <= tr.keep_last, "train.average_last", f"must be <= train.keep_last={tr.keep_last}")
    for key in (
        "max_epochs",
        "max_time",
        "patience",
        "threads",
        "clip_norm",
        "weight_decay",
        "keep_last",
        "average_last",
        "peak_tflops",
        "subword_sampling",
    ):
        _check(tr[key] >= 0, f"train.{key}", "must be >= 0")
    _check(dec.beam >= 1 and dec.valid_beam >= 1, "decode.beam", "must be >= 1")
    _check(dec.max_len_a >= 0 and dec.max_len_b >= 1, "decode.max_len_b", "output length limit must allow a token")
    _check(dec.batch_tokens > 0, "decode.batch_tokens", "must be positive")
    _check(all(a >= 0 for a in dec.alpha_candidates), "decode.alpha_candidates", "must be >= 0")
    _check(
        not dec.alpha_candidates or dec.beam > 1,
        "decode.alpha_candidates",
        "the length penalty only acts in beam search: needs decode.beam > 1",
    )
