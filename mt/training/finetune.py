"""Fine-tuning (train.init_from=CHECKPOINT): a new run that starts from a trained model.

The run takes its parent's tokenizer and architecture, so that the parent's weights fit: the tokenizer step
copies the parent's sentencepiece model instead of training one on the new data, and the model options come
from the parent's config. Everything about training is the new run's own: a fresh optimizer, learning-rate
schedule, budget, and random generators seeded from train.seed (fairseq's --finetune-from-model with its
optimizer reset, OpenNMT-py's -train_from with -reset_optim all).
"""

from __future__ import annotations

import logging

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from mt.checkpoint import load_parent
from mt.config.model import changed_model_options, model_options
from mt.config.schema import ModelConfig, TokenizerConfig
from mt.config.validation import validate
from mt.errors import MTError

log = logging.getLogger(__name__)

# Regularisation a fine-tune may set anew: it changes no weight's shape or meaning.
FREE_MODEL_OPTIONS = ("dropout", "attention_dropout", "activation_dropout")


def given_keys(overrides: list[str]) -> set[str]:
    """The config keys (and groups) set on the command line: 'model.d_model=256' -> 'model.d_model',
    'model=transformer_small' -> 'model'."""
    keys = set()
    for item in overrides:
        key = item.split("=", 1)[0].lstrip("+~")
        if not key.startswith("hydra"):
            keys.add(key)
    return keys


def inherit_parent(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """cfg with the model and tokenizer sections of the parent train.init_from names, in place; returns cfg.

    An option given on the command line (or through model=/tokenizer=) that contradicts the parent is one
    line: a fine-tune cannot change its parent's vocabulary or shapes. Dropout rates may be set anew."""
    if not cfg.train.init_from:
        validate(cfg)  # says that train.init_from is required, where it is
        return cfg
    parent = load_parent(cfg.train.init_from)["config"]
    given = given_keys(overrides)
    before_tok, before_model = parent.get("tokenizer", {}), parent.get("model", {})
    conflicts = []
    for key, value in OmegaConf.to_container(cfg.tokenizer).items():
        if ("tokenizer" in given or f"tokenizer.{key}" in given) and before_tok.get(key) != value:
            conflicts.append(f"tokenizer.{key}={value} (the parent's: {before_tok.get(key)})")
    mine = OmegaConf.to_container(cfg.model)
    theirs = dict(before_model, arch=before_model.get("arch", "transformer"))
    free = {}
    for key in changed_model_options(theirs, mine):
        explicit = "model" in given or f"model.{key}" in given
        if key in FREE_MODEL_OPTIONS and explicit:
            free[key] = getattr(model_options(mine, strict=False), key)
        elif explicit:
            conflicts.append(f"model.{key}={mine.get(key)} (the parent's: {theirs.get(key)})")
    if conflicts:
        raise MTError(
            f"train.init_from={cfg.train.init_from}: a fine-tune keeps its parent's tokenizer and architecture, "
            f"but {', '.join(conflicts)}; drop {'this option' if len(conflicts) == 1 else 'these options'}"
        )
    try:
        cfg.tokenizer = OmegaConf.merge(OmegaConf.structured(TokenizerConfig), before_tok)
        cfg.model = OmegaConf.merge(OmegaConf.structured(ModelConfig), {**before_model, **free})
    except OmegaConfBaseException as err:
        raise MTError(
            f"train.init_from={cfg.train.init_from}: its config does not fit this version of mt ({err})"
        ) from None
    data = parent.get("data", {})
    if (data.get("src_lang"), data.get("tgt_lang")) != (cfg.data.src_lang, cfg.data.tgt_lang):
        log.warning(
            "train.init_from: the parent translates %s -> %s, this run %s -> %s",
            data.get("src_lang"),
            data.get("tgt_lang"),
            cfg.data.src_lang,
            cfg.data.tgt_lang,
        )
    if cfg.train.subword_sampling and cfg.tokenizer.type == "bpe" and "train.subword_sampling" not in given:
        # The preset's value is unigram sampling's; BPE-dropout slowed short runs down (docs/benchmarks.md)
        log.info("train.subword_sampling: off (the parent's tokenizer is BPE: BPE-dropout only when asked for)")
        cfg.train.subword_sampling = 0.0
    validate(cfg)
    return cfg


def load_parent_weights(model: torch.nn.Module, cfg: DictConfig) -> None:
    """The parent's weights into model (built from the inherited model options)."""
    state = load_parent(cfg.train.init_from, mmap=False)
    model.load_state_dict(state["model"])
    log.info("fine-tuning from %s (its weights, tokenizer and model options)", cfg.train.init_from)
