"""Loading trained models to translate with: one checkpoint, several averaged into one model, or an
ensemble; and a Translator over them. The console scripts, a run's own test score and Python callers
all load through here.

    import mt
    translator = mt.load_translator("runs/multi30k.de-en/smoke/checkpoints/final.pt")
    print(translator.translate(["Ein Hund rennt durch den Schnee."]))   # ['A dog runs through the snow.']
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from mt.checkpoint import load_averaged, load_with_one_tokenizer
from mt.config.model import build_model
from mt.config.schema import from_dict
from mt.data.tokenizer import Tokenizer
from mt.decoding.ctranslate2_translator import CTranslate2Translator, is_export, load_export_translator
from mt.decoding.settings import DecodeSettings, check_setting_names
from mt.decoding.translator import Translator
from mt.errors import MTError
from mt.fastpath import decode_precision, tune_process
from mt.hub import local_model
from mt.languages import into, languages_of
from mt.model.ensemble import Ensemble

Checkpoints = str | os.PathLike | Sequence[str | os.PathLike]


def checkpoint_paths(checkpoints: Checkpoints) -> list[str]:
    """One path or several, as a list of strings (a single string is one path, not its characters); a Hub
    model (hf:OWNER/NAME) as its local folder (mt/hub.py)."""
    paths = [checkpoints] if isinstance(checkpoints, str | os.PathLike) else list(checkpoints)
    if not paths:
        raise MTError("no checkpoint given")
    return [os.fspath(local_model(p)) for p in paths]


def decoding_device(requested: str | torch.device | None = None) -> torch.device:
    """The device asked for, else CUDA when there is one, else the CPU."""
    if requested is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise MTError("--device cuda: no CUDA device is available")
    return device


def load_for_decoding(checkpoints: Checkpoints, device: torch.device, ensemble: bool = False):
    """load_for_inference, after setting the process up for decoding on device (fastpath.tune_process):
    what `translate` and `mt-evaluate` both do, so they decode alike."""
    tune_process(device, training=False)
    return load_for_inference(checkpoints, ensemble=ensemble)


def load_translator(
    checkpoints: Checkpoints,
    device: str | torch.device | None = None,
    ensemble: bool = False,
    max_src_len: int = 1024,
    **decode_choices,
) -> Translator | CTranslate2Translator:
    """A Translator for the checkpoint(s) (files, or run directories: their final.pt): several are averaged,
    or with ensemble=True decoded as an ensemble; an export directory (mt-export) is decoded by CTranslate2
    through the same interface. It decodes with the checkpoint's own decode settings (the length penalty its
    run chose on valid) and any of DecodeSettings' fields given as keywords on top (beam=5, alpha=1.0,
    nbest=3, precision="bf16", ...).
    device: default CUDA when there is one. precision: default the one its run's test score decoded in on
    this device (fastpath.decode_precision: bf16 for a bf16-trained model on a CPU with native bf16).

    translator.translate(lines) gives the best translation of each line as text;
    translator.translate_nbest(lines) gives each line's nbest Translations (text, score, pieces); both take
    DecodeSettings' fields as keywords for that call (translate(lines, beam=5));
    translator.score(sources, targets) gives each pair's PairScore (log P(target | source), per piece too)."""
    check_setting_names(decode_choices)  # a misspelt keyword: one line now, before the model loads
    paths = checkpoint_paths(checkpoints)
    if any(is_export(p) for p in paths):
        if len(paths) > 1 or ensemble:
            raise MTError(f"{paths[0]}: an export directory is one model; average or ensemble checkpoints first")
        precision = decode_choices.pop("precision", None)
        return load_export_translator(paths[0], device and str(device), precision, max_src_len, **decode_choices)
    device = decoding_device(device)
    model, tokenizer, cfg = load_for_decoding(checkpoints, device, ensemble)
    precision = decode_choices.pop("precision", None) or decode_precision(device, cfg.train.precision)
    settings = DecodeSettings.from_config(cfg.decode, precision=precision, **decode_choices)
    translator = Translator(model, tokenizer, settings, device, max_src_len)
    translator.languages = languages_of(cfg.data)
    if settings.tgt_lang:
        into([], settings.tgt_lang, translator.languages)  # a language the model lacks: one line now
    return translator


def check_vocabulary(path, expected: dict, weights: dict, tokenizer) -> None:
    """Refuse a tokenizer whose vocabulary is not the one the embeddings were trained for."""
    for name in ("src_embed.weight", "tgt_embed.weight", "output_proj.weight"):
        if name in weights and name in expected and weights[name].shape[0] != expected[name].shape[0]:
            raise MTError(
                f"{path}: its tokenizer has {tokenizer.src_vocab_size} source / {tokenizer.tgt_vocab_size} "
                f"target pieces but the model's {name} has {weights[name].shape[0]} rows: "
                f"tokenizer and weights do not belong together"
            )


def load_for_inference(checkpoints: Checkpoints, ensemble: bool = False):
    """(model in eval mode, tokenizer, config) from one checkpoint, or several: their weights
    averaged (checkpoints of one run), or with ensemble=True an Ensemble of them (any runs that share
    a tokenizer). The config, and so the decoding settings, are the first checkpoint's."""
    paths = checkpoint_paths(checkpoints)
    if ensemble and len(paths) > 1:
        states = load_with_one_tokenizer(paths, "an ensemble needs one tokenizer")
        tokenizer = Tokenizer.from_state_dict(states[0]["tokenizer"])
        model = Ensemble([_model(path, state, state["model"], tokenizer) for path, state in zip(paths, states)])
    else:
        states, weights = load_averaged(paths)
        tokenizer = Tokenizer.from_state_dict(states[0]["tokenizer"])
        model = _model(paths[0], states[0], weights, tokenizer)
    return model.eval(), tokenizer, from_dict(states[0]["config"], str(paths[0]))


def _model(path, state: dict, weights: dict, tokenizer):
    """The model state's config describes, holding weights, in eval mode."""
    model = build_model(from_dict(state["config"], str(path)).model, tokenizer)
    check_vocabulary(path, model.state_dict(), weights, tokenizer)
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:
        raise MTError(f"{path}: weights do not fit the model its config describes ({str(err)[:200]})") from None
    return model.eval()
