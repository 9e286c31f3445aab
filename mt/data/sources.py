"""Where each split of a corpus is, and loading it: text files ({split}.{lang}, or one {split}.tsv) or a
Hugging Face dataset, in each direction of the config, checked on the way in (lines.py, tsv_files.py).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from mt import hub
from mt.data.compressed import compressed_form, plain_texts
from mt.data.corpus import ParallelCorpus
from mt.data.lines import missing_file, read_lines
from mt.data.tmx import tmx_as_tsv, tmx_path
from mt.data.tsv_files import load_tsv, tsv_layout, tsv_path
from mt.errors import MissingSplit, MTError, counted
from mt.languages import direction_name, directions, pair_subset, source_tag, tagged

log = logging.getLogger(__name__)


def pair_files(folder: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path, str]:
    """The files of one split and direction in folder, and their name for messages: {split}.{src_lang} and
    {split}.{tgt_lang}, or where a folder holds corpora of several language pairs, {split}.{src}-{tgt}.{lang}
    (fairseq's naming; the pair in either order), which win when both exist; each file also as its
    compressed form (train.de.gz) where it is not there itself."""
    for pair in (f"{src_lang}-{tgt_lang}", f"{tgt_lang}-{src_lang}"):
        stem = folder / f"{split}.{pair}"
        src, tgt = (compressed_form(Path(f"{stem}.{lang}")) for lang in (src_lang, tgt_lang))
        if src is not None and tgt is not None:
            return src, tgt, f"{stem}.{{{src_lang},{tgt_lang}}}"
    stem = folder / split
    src, tgt = (Path(f"{stem}.{lang}") for lang in (src_lang, tgt_lang))
    return compressed_form(src) or src, compressed_form(tgt) or tgt, f"{stem}.{{{src_lang},{tgt_lang}}}"


def split_files(
    folder: Path, split: str, src_lang: str, tgt_lang: str, columns=None, seekable: bool = False, cache_dir=None
):
    """Where one split and direction is in folder: a file per language (pair_files: src, tgt and their name)
    where either is there; else one tab-separated file's layout (mt/data/tsv_files.py), or a TMX file's, its
    pairs read into cache_dir as a tab-separated file (mt/data/tmx.py); none is an error that names them. A
    compressed file is read as it streams, or, where the reader must seek (the training split, read by
    shard), as the text it holds, decompressed into cache_dir (mt/data/compressed.py)."""
    src, tgt, origin = pair_files(folder, split, src_lang, tgt_lang)
    if src.exists() != tgt.exists():  # one language's file: the other is missing, or named otherwise
        raise MTError(missing_file(tgt if src.exists() else src) + other_languages(folder, split))
    if src.exists():
        if seekable:
            src, tgt = plain_texts([src, tgt], cache_dir)
        return src, tgt, origin
    found = tsv_path(folder, split, src_lang, tgt_lang)
    if found is None:
        tmx = tmx_path(folder, split, src_lang, tgt_lang)
        if tmx is not None:  # a translation memory: its pairs, read once into the cache, as a .tsv
            return tsv_layout(tmx_as_tsv(tmx, src_lang, tgt_lang, cache_dir), None, src_lang, tgt_lang, shown=tmx)
        said = missing_file(src, folder / f"{split}.tsv", folder / f"{split}.tmx", partners=(tgt,))
        if not any(path.is_file() for path in folder.glob(f"{split}.*")):
            raise MissingSplit(said)
        raise MTError(said + other_languages(folder, split))
    path, named = found
    text = plain_texts([path], cache_dir)[0] if seekable else path
    return tsv_layout(text, named, src_lang, tgt_lang, columns, shown=path)


def other_languages(folder: Path, split: str) -> str:
    """What to say where a split's files are there in other languages than the config's (train.fr and
    train.en where it looked for train.de): their names and the options that choose languages; else ""."""
    names = sorted(path.name for path in folder.glob(f"{split}.*") if path.is_file() and ".tsv" not in path.suffixes)
    if not names:
        return ""
    return f"; the folder has {', '.join(names[:6])}: data.src_lang and data.tgt_lang name the languages"


def check_data_dir(folder: Path) -> None:
    """data.dir is a folder, or a one-line error that says what it is instead."""
    if folder.is_file():
        raise MTError(f"data.dir={folder}: is a file, expected the folder of the corpus's files (SPLIT.LANG)")
    if not folder.is_dir():
        raise MTError(f"data.dir={folder}: no such directory")


def load_files(
    folder: str, split: str, src_lang: str, tgt_lang: str, columns=None, cache_dir: str | None = None
) -> ParallelCorpus:
    """One split and direction of the text files in folder, line-aligned: a file per language (pair_files),
    or one tab-separated file of the split where there are none (mt/data/tsv_files.py; columns:
    data.columns), or a TMX file (read into cache_dir); a compressed file read as it streams."""
    folder_path = Path(folder)
    check_data_dir(folder_path)
    found = split_files(folder_path, split, src_lang, tgt_lang, columns, cache_dir=cache_dir)
    if not isinstance(found, tuple):
        return load_tsv(found)
    src_path, tgt_path, origin = found
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        have = counted(len(src), "line")
        raise MTError(f"{src_path} has {have} but {tgt_path} has {len(tgt):,}: the files must be line-aligned")
    if not src:
        raise MTError(f"{src_path}: empty corpus")
    return ParallelCorpus(src, tgt, origin)


def _offline_hint(name: str) -> str:
    return (
        f"cannot load dataset {name!r} from the Hugging Face hub (offline?). "
        "Use local files instead: data=multi30k (the copy shipped in data/multi30k), or "
        "data=files data.dir=DIR data.src_lang=de data.tgt_lang=en"
    )


def _load_hub_dataset(name: str, subset: str | None):
    """A dataset from a local folder (saved, or raw data files) or from the hub.

    Without a connection the hub client would retry for minutes: go offline at once instead,
    so a cached copy still loads and a missing one fails fast with a hint.
    """
    local = Path(name)
    offline = not local.is_dir() and not hub.reachable()
    if offline:
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    import datasets

    if local.is_dir() and any(local.glob("*.tsv")):
        log.warning(
            "data: %s: datasets reads .tsv files as CSV: a '\"' in a sentence is taken for quoting and dropped; "
            "for raw tab-separated text, data=files data.dir=%s (docs/data.md#one-tab-separated-file-per-split)",
            name,
            name,
        )
    try:
        if (local / "dataset_dict.json").exists():
            return datasets.load_from_disk(str(local))
        return datasets.load_dataset(str(local) if local.is_dir() else name, subset)
    except Exception as err:  # noqa: BLE001 - datasets raises many kinds; all mean "not loadable"
        if offline:
            raise MTError(_offline_hint(name)) from None
        raise MTError(f"cannot load dataset {name!r}: {err}") from None


_hub_cache: dict = {}


def hub_table(name: str, subset: str | None, split: str, src_lang: str, tgt_lang: str):
    """One split of a Hugging Face dataset (Arrow: memory-mapped where it was saved or cached), checked for
    a column per language or a 'translation' dict; and its name for messages."""
    if (name, subset) not in _hub_cache:
        _hub_cache[name, subset] = _load_hub_dataset(name, subset)
    dataset = _hub_cache[name, subset]
    if split not in dataset:
        raise MissingSplit(f"dataset {name!r} has no split {split!r} (it has: {', '.join(dataset)})")
    table, origin = dataset[split], f"{name}[{split}]"
    if "translation" not in table.column_names:
        for lang in (src_lang, tgt_lang):
            if lang not in table.column_names:
                raise MTError(f"{origin}: no column {lang!r} (columns: {', '.join(table.column_names)})")
    if not len(table):
        raise MTError(f"{origin}: empty corpus")
    return table, origin


def hub_lines(table, start: int, stop: int, lang: str) -> list[str]:
    """Rows start..stop of one language, a missing value as an empty line."""
    rows = table[start:stop]
    values = [pair[lang] for pair in rows["translation"]] if "translation" in rows else rows[lang]
    return [value or "" for value in values]


def load_hub(name: str, subset: str | None, split: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    """One split of a Hugging Face dataset with a column per language or a 'translation' dict, in memory."""
    table, origin = hub_table(name, subset, split, src_lang, tgt_lang)
    return ParallelCorpus(hub_lines(table, 0, len(table), src_lang), hub_lines(table, 0, len(table), tgt_lang), origin)


def load_split(data_cfg, split: str, src_lang: str | None = None, tgt_lang: str | None = None) -> ParallelCorpus:
    """Load one split as configured (data.source = files | hub), in the config's direction or the one given."""
    src_lang, tgt_lang = src_lang or data_cfg.src_lang, tgt_lang or data_cfg.tgt_lang
    if data_cfg.source == "files":
        return load_files(data_cfg.dir, split, src_lang, tgt_lang, data_cfg.columns, data_cfg.cache_dir)
    return load_hub(data_cfg.name, pair_subset(data_cfg.subset, src_lang, tgt_lang), split, src_lang, tgt_lang)


def load_directions(data_cfg, split: str) -> dict[str, ParallelCorpus]:
    """One split in each direction of the config ("de-en": its pairs), each direction's sources tagged with
    its target language where the model has several (mt/data/languages.py)."""
    found = {}
    for src_lang, tgt_lang in directions(data_cfg):
        corpus = load_split(data_cfg, split, src_lang, tgt_lang)
        corpus.src = tagged(corpus.src, source_tag(data_cfg, tgt_lang))
        found[direction_name(src_lang, tgt_lang)] = corpus
    return found


def split_paths(data_cfg, split: str) -> list[Path]:
    """The files one split is read from in every direction of the config (with data.source=files; a dataset
    from the hub, none): what no output of a command that reads the split may be."""
    if data_cfg.source != "files":
        return []
    paths = []
    for src_lang, tgt_lang in directions(data_cfg):
        found = split_files(
            Path(data_cfg.dir), split, src_lang, tgt_lang, data_cfg.columns, cache_dir=data_cfg.cache_dir
        )
        paths += found[:2] if isinstance(found, tuple) else [found.shown]
    return paths


def joined(corpora: dict[str, ParallelCorpus]) -> ParallelCorpus:
    """Several directions' pairs as one corpus (a multilingual run's validation set); one as itself."""
    if len(corpora) == 1:
        return next(iter(corpora.values()))
    parts, sections, start = list(corpora.values()), {}, 0
    for direction, corpus in corpora.items():
        sections[direction], start = (start, start + len(corpus)), start + len(corpus)
    return ParallelCorpus(
        [line for c in parts for line in c.src],
        [line for c in parts for line in c.tgt],
        " + ".join(c.origin for c in parts),
        sections=sections,
    )
