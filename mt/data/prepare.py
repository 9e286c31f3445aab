"""Preparing a run's data: load and check every split, train (or reuse) the tokenizer in the run
directory, then encode the training and validation pairs (cached) or set up subword sampling."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from mt.checkpoint import load_checkpoint, load_parent
from mt.config.model import changed_model_options
from mt.config.schema import DataConfig, TokenizerConfig, to_dict
from mt.config.validation import training_splits, validate
from mt.data.batching import EncodedCorpus, encode_corpus
from mt.data.concatenation import TAG, Concatenation, Repeated, tempered_sizes
from mt.data.corpus import ParallelCorpus
from mt.data.duplicates import pair_verdicts
from mt.data.held_out_from_train import drawn_sets, drawn_split, takes_from_train
from mt.data.hub_split import HubSplit
from mt.data.misalignment import warn_if_slipped
from mt.data.order import ShardPools
from mt.data.overlap import held_out_pairs
from mt.data.raw_text import warn_if_preprocessed
from mt.data.shards import EncodedShards
from mt.data.sources import check_data_dir, hub_table, joined, load_directions, split_files
from mt.data.subword_sampling import SampledPools, SampledSegmentations
from mt.data.text_files import AlignedTextFiles
from mt.data.tokenizer import UNK, Tokenizer, build_tokenizer, fingerprint, tokenizer_settings
from mt.data.tsv_files import TsvFile
from mt.errors import MissingSplit, MTError
from mt.languages import direction_name, directions, pair_subset, source_tag

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    train: ParallelCorpus | AlignedTextFiles | HubSplit
    valid: ParallelCorpus  # every direction's valid pairs as one corpus
    tests: dict[str, ParallelCorpus]  # the test split in each direction ("de-en"), none without one
    tokenizer: Tokenizer
    # what the valid and test sets share with the training split (mt/data/overlap.py), once counted
    held_out_in_training: dict | None = None


def prepare(cfg: DictConfig, out_dir: Path, write_config: bool = True) -> Prepared:
    """Load every split (failing early on bad data) and build the tokenizer. A run directory that holds
    another run (other training data, tokenizer settings or model) is refused before anything in it changes."""
    validate(cfg)
    d = cfg.data
    train = load_training_split(d, cfg.tokenizer.max_sentences)
    valid, tests = load_held_out(d, train)
    for corpus in (train, valid, *tests.values()):  # signs of files gone wrong, said before any training
        warn_if_slipped(corpus)
    for held_out in (valid, *tests.values()):  # the training split's: as its tokenizer is trained (its sample)
        warn_if_preprocessed(held_out.origin, {"source": held_out.src, "target": held_out.tgt})
    refuse_another_run(cfg, out_dir, train)
    out_dir.mkdir(parents=True, exist_ok=True)
    if write_config:
        (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
    log.info(
        "data: train %s, valid %s, test %s pairs (%s, from %s)",
        f"{len(train):,}",
        f"{len(valid):,}",
        f"{sum(map(len, tests.values())):,}" if tests else "-",
        ", ".join(" -> ".join(pair) for pair in directions(d)),
        train.origin,
    )
    if cfg.train.init_from:
        tokenizer = install_parent_tokenizer(cfg, train, out_dir / "tokenizer")
    else:
        tokenizer = build_tokenizer(tokenizer_settings(cfg), train, out_dir / "tokenizer", d.cache_dir)
    train.forget_sample()
    return Prepared(train, valid, tests, tokenizer)


def load_held_out(data_cfg, train) -> tuple[ParallelCorpus, dict[str, ParallelCorpus]]:
    """The validation pairs (every direction's as one corpus) and each direction's test pairs: read from
    their splits, or drawn from the training corpus (data.valid_from_train, data.test_from_train)."""
    d = data_cfg
    drawn_valid, drawn_test = drawn_sets(d, train) if takes_from_train(d) else (None, None)
    valid = drawn_valid if drawn_valid is not None else joined(_read_held_out(d, d.valid_split, "valid"))
    if drawn_test is not None:
        tests = {direction_name(*directions(d)[0]): drawn_test}
    else:
        tests = _read_held_out(d, d.test_split, "test") if d.test_split else {}
    return valid, tests


def _read_held_out(data_cfg, split: str, kind: str) -> dict[str, ParallelCorpus]:
    """load_directions, where a split that is not there at all names the way to do without it."""
    try:
        return load_directions(data_cfg, split)
    except MissingSplit as err:
        raise MTError(
            f"{err}; without {kind} pairs, data.{kind}_from_train=2000 holds 2,000 training pairs out"
        ) from None


def load_split(data_cfg, split: str) -> dict[str, ParallelCorpus]:
    """One held-out split in each direction ("de-en": its pairs), as a run read it: from its files or
    dataset, or drawn from the training corpus."""
    d = data_cfg
    if not drawn_split(d, split):
        return load_directions(d, split)
    valid, test = drawn_sets(d, load_training_split(d, 0))
    drawn = valid if split == d.valid_split and valid is not None else test
    return {direction_name(*directions(d)[0]): drawn}


def load_training_split(data_cfg, sample_size: int):
    """The training split, read a slice at a time, never held as Python strings: text files scanned in blocks
    (AlignedTextFiles), or a Hugging Face dataset's Arrow table (HubSplit); with a tokenizer sample of up to
    sample_size lines a side. Several splits (data.train_split=[a,b]) are read one after another, the sources
    of data.tagged_splits with a tag before them; so are several directions (data.src_lang=[de,fr]), each
    split in every direction, the sources tagged with their target language where there are several."""
    d = data_cfg
    if d.source == "files":
        check_data_dir(Path(d.dir))
    parts, tags, of = [], [], []
    for split in training_splits(d):
        for src_lang, tgt_lang in directions(d):
            parts.append(_training_part(d, split, src_lang, tgt_lang, sample_size))
            tag = [source_tag(d, tgt_lang), TAG if split in d.tagged_splits else ""]
            tags.append(" ".join(t for t in tag if t))
            of.append(direction_name(src_lang, tgt_lang))
    if d.direction_temperature != 1:
        if len(set(of)) > 1:
            parts = tempered(parts, of, d.direction_temperature)
        else:
            log.warning("data.direction_temperature=%g does nothing: one direction", d.direction_temperature)
    return parts[0] if len(parts) == 1 and not tags[0] else Concatenation(parts, sample_size, tags)


def tempered(parts: list, of: list[str], temperature: float) -> list:
    """The parts with each direction's (of[i]) read to its tempered size (data.direction_temperature)."""
    lines = {name: sum(len(p) for p, n in zip(parts, of) if n == name) for name in dict.fromkeys(of)}
    sizes = tempered_sizes(lines, temperature)
    log.info(
        "directions at temperature %g: %s",
        temperature,
        ", ".join(
            f"{name} {lines[name]:,} pairs" + (f" read as {sizes[name]:,}" if sizes[name] > lines[name] else "")
            for name in lines
        ),
    )
    return [Repeated(p, round(len(p) * sizes[n] / lines[n])) if sizes[n] > lines[n] else p for p, n in zip(parts, of)]


def _training_part(d, split: str, src_lang: str, tgt_lang: str, sample_size: int):
    if d.source != "files":
        table, origin = hub_table(d.name, pair_subset(d.subset, src_lang, tgt_lang), split, src_lang, tgt_lang)
        return HubSplit(table, src_lang, tgt_lang, origin, sample_size, d.shard_lines)
    found = split_files(Path(d.dir), split, src_lang, tgt_lang, d.columns, seekable=True, cache_dir=d.cache_dir)
    if not isinstance(found, tuple):
        return TsvFile(found, sample_size, d.shard_lines, cache_dir=d.cache_dir)
    if d.columns is not None:  # set for a .tsv file, it would otherwise pass unnoticed
        log.warning("data.columns is for .tsv files; the training split is %s, a file per language: unused", found[2])
    return AlignedTextFiles(*found, sample_size, d.shard_lines, cache_dir=d.cache_dir)


def install_parent_tokenizer(cfg: DictConfig, train: ParallelCorpus, folder: Path) -> Tokenizer:
    """A fine-tune's tokenizer: its parent's sentencepiece model, byte for byte, in the run's tokenizer/
    (meta.json fingerprints this run's training text, so that a change of it under the same path is caught)."""
    tokenizer = Tokenizer.from_state_dict(load_parent(cfg.train.init_from)["tokenizer"])
    for symbol in getattr(train, "source_symbols", []):
        if tokenizer.src.piece_to_id(symbol) == UNK:
            log.warning("tags: the parent's tokenizer has no %s piece; the tag is spelled in pieces", symbol)
    tokenizer.save(folder)
    meta = {
        "fingerprint": fingerprint(tokenizer_settings(cfg), train),
        "from": str(cfg.train.init_from),
        "src_vocab_size": tokenizer.src_vocab_size,
        "tgt_vocab_size": tokenizer.tgt_vocab_size,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    log.info("tokenizer: the parent's (%s), vocab %d, in %s", cfg.train.init_from, tokenizer.tgt_vocab_size, folder)
    return tokenizer


# What makes a run directory's checkpoints another run's: its training data...
CORPUS_KEYS = (
    "source",
    "name",
    "subset",
    "dir",
    "src_lang",
    "tgt_lang",
    "train_split",
    "tagged_splits",
    "direction_temperature",
    "columns",
    "valid_from_train",
    "test_from_train",
)


def refuse_another_run(cfg: DictConfig, out_dir: Path, train: ParallelCorpus | None = None) -> None:
    """One line, before any file of out_dir is written, if its checkpoints come from a run on other training
    data, with other tokenizer settings or another model: rerunning resumes a run, it never repurposes one.
    With the training corpus, its text is compared too (through the tokenizer's fingerprint)."""
    saved = next((p for p in (out_dir / "checkpoints" / n for n in ("last.pt", "best.pt")) if p.is_file()), None)
    if saved is None:
        return
    before = load_checkpoint(saved, mmap=True)["config"]
    now = {section: to_dict(cfg[section]) for section in ("data", "model")}
    # a data or tokenizer key added since that checkpoint was written counts as its default; the tokenizer
    # settings are compared as trained (tokenizer_settings: what null leaves to the languages, chosen)
    data_before = {**to_dict(OmegaConf.structured(DataConfig)), **before.get("data", {})}
    tokenizer_before = {**to_dict(OmegaConf.structured(TokenizerConfig)), **before.get("tokenizer", {})}
    settings_before = to_dict(
        tokenizer_settings(OmegaConf.create({"data": data_before, "tokenizer": tokenizer_before}))
    )
    settings_now = to_dict(tokenizer_settings(cfg))
    differ = [f"data.{k}" for k in CORPUS_KEYS if data_before.get(k) != now["data"].get(k)]
    differ += [f"tokenizer.{k}" for k in settings_now if settings_before.get(k) != settings_now[k]]
    differ += [f"model.{k}" for k in changed_model_options(before.get("model", {}), now["model"])]
    if before.get("train", {}).get("init_from") != cfg.train.init_from:
        differ.append("train.init_from")
    meta = out_dir / "tokenizer" / "meta.json"
    if not differ and train is not None and meta.is_file():
        if json.loads(meta.read_text()).get("fingerprint") != fingerprint(tokenizer_settings(cfg), train):
            differ.append(f"the training text ({train.origin})")
    if differ:
        raise MTError(
            f"{out_dir}: holds another run (its {saved.name} differs in {', '.join(differ)}); nothing there was "
            "changed: give this run its own name=... (or hydra.run.dir=...)"
        )


def drops_held_out(data_cfg) -> bool:
    """Whether training pairs equal to valid or test pairs are left out of training: asked for, or held-out
    sets drawn from the training corpus."""
    return bool(data_cfg.drop_held_out) or takes_from_train(data_cfg)


def sets_to_compare(data_cfg, data: Prepared) -> dict:
    """held_out_sets but those drawn from the training split: what the run compares with it (a drawn set is
    all training pairs, and left out of training)."""
    return {name: c for name, c in held_out_sets(data_cfg, data).items() if not drawn_split(data_cfg, name)}


def held_out_sets(data_cfg, data: Prepared) -> dict:
    """The validation pairs and each direction's test pairs, by name ("valid", "test2016 fr-en")."""
    several = len(data.tests) > 1
    tests = {f"{data_cfg.test_split} {d}" if several else data_cfg.test_split: c for d, c in data.tests.items()}
    return {data_cfg.valid_split: data.valid} | tests


def encode_splits(
    cfg: DictConfig, data: Prepared, background: bool = True
) -> tuple[ShardPools | SampledSegmentations | SampledPools, EncodedCorpus]:
    """The training pairs, encoded and filtered shard by shard into the cache (the first pool now, the rest
    by a background process while training starts; all now with background=False or without a cache), or
    segmented anew each epoch (train.subword_sampling); and the validation pairs."""
    start, origin = time.perf_counter(), data.train.origin
    pool_shards = max(1, cfg.data.pool_pairs // data.train.shard_lines)
    held_out = held_out_pairs(held_out_sets(cfg.data, data)) if drops_held_out(cfg.data) else None
    d = cfg.data
    leaves_out = d.drop_duplicates or d.drop_copies
    verdicts = pair_verdicts(data.train, d.cache_dir, d.drop_duplicates, d.drop_copies) if leaves_out else None
    if cfg.train.subword_sampling:
        workers = torch.get_num_threads()  # the CPU share this run may use (train.threads, OMP_NUM_THREADS)
        options = dict(max_len=cfg.data.max_len, max_ratio=cfg.data.max_len_ratio, workers=workers)
        options |= dict(held_out=held_out, verdicts=verdicts)
        one_pool = data.train.shards <= pool_shards
        if one_pool:  # every sentence's candidates found once, held
            train = SampledSegmentations(
                data.tokenizer, data.train.in_memory(), cfg.train.subword_sampling, cfg.train.seed, **options
            )
            first, report = train.with_report(0)
            what = "epoch 0"
        else:
            train = SampledPools(
                data.tokenizer, data.train, cfg.train.subword_sampling, cfg.train.seed, pool_shards, **options
            )
            first, report = train.with_report(0, 0)
            what = f"the first of {train.pool_count} pools"
        log.info(
            "train: %s sampled in %.1fs (%.1f target pieces per sentence)",
            what,
            time.perf_counter() - start,
            first.tgt_lens.mean(),
        )
        log.info("train filter: %s", report)
        if not len(first) and one_pool:  # one pool of many may be empty: DataOrder says so if all are
            raise MTError(f"{origin}: no training pairs left after filtering ({report})")
    else:
        shards = EncodedShards(data.tokenizer, data.train, d.max_len, d.max_len_ratio, d.cache_dir, held_out, verdicts)
        train = ShardPools(shards, pool_shards, cfg.train.seed)
        first_pool = train.plan(0)[0]
        if background:
            shards.start([s for pool in train.plan(0) for s in pool])  # in the order the first epoch takes them
        else:
            shards.encode_all()
        for index in first_pool:
            shards.get(index)
        if shards.complete:
            report = shards.report()
            log.info("train: encoded in %.1fs", time.perf_counter() - start)
            if not shards.encoded_in_background:  # that encoder logs the filter's report as it ends
                log.info("train filter: %s", report)
            if not report.kept:
                raise MTError(f"{origin}: no training pairs left after filtering ({report})")
        else:
            log.info(
                "train: the first pool (%d of %d shards) encoded in %.1fs; the rest is encoded while training",
                len(first_pool),
                shards.count,
                time.perf_counter() - start,
            )
    valid, valid_report = encode_corpus(data.tokenizer, data.valid)
    if valid_report.empty:
        log.info("valid: %d pairs with an empty side are left out of the validation loss", valid_report.empty)
    return train, valid
