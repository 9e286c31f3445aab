"""A misspelt setting answered with the one meant: `trian.lr=1e-3` says "did you mean train.lr?" after
Hydra's "Key 'trian' not in 'Config'"."""

from __future__ import annotations

import dataclasses
import difflib

from omegaconf import DictConfig, OmegaConf

from mt.errors import MTError


def setting_names(node: DictConfig, prefix: str = "") -> list[str]:
    """Every dotted key of a config, nested sections and their keys alike (data, data.dir, ...)."""
    names = []
    for key in node.keys():
        name = f"{prefix}{key}"
        names.append(name)
        value = node._get_node(key)
        if isinstance(value, DictConfig) and not value._is_missing() and not value._is_none():
            names.extend(setting_names(value, f"{name}."))
    return names


def meant(overrides: list[str], names: list[str]) -> str | None:
    """The first override whose key is no setting, with the setting it most resembles: "did you mean
    train.lr?"; None where none is close."""
    known = set(names)
    for override in overrides:
        key = override.lstrip("+~").partition("=")[0]
        if key and key not in known:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
            if close:
                return f"did you mean {close[0]}?"
    return None


def schema_names(schema: type) -> list[str]:
    """The settings every run has: the keys of the schema's dataclass (architecture options and presets add
    none)."""
    return setting_names(OmegaConf.structured(schema))


def check_known(cfg: DictConfig) -> None:
    """Refuse a setting cfg's schema lacks: Hydra takes `+train.warmpu=100` (a key added with +) and the run
    would ignore it. A config without a schema (a plain dict's) is not checked."""
    schema = OmegaConf.get_type(cfg)
    if not dataclasses.is_dataclass(schema):
        return
    names = schema_names(schema)
    known = set(names)
    for name in setting_names(cfg):
        if name not in known and name != "hydra" and not name.startswith("hydra."):
            hint = meant([name], names)
            raise MTError(f"{name}: no such setting, so a run would ignore it{f'; {hint}' if hint else ''}")
