"""Typed configuration: the schema Hydra merges every YAML preset and override into.

An unknown key or a value of the wrong type is rejected by Hydra when the config is composed;
`validate` (mt/config/validation.py) then checks ranges and combinations before any work starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from mt.config.near_miss import meant, schema_names
from mt.config.validation import validate
from mt.errors import MTError
from mt.languages import languages_label

# The Hydra presets live at the top of the repository, next to the package.
CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "configs")


@dataclass
class DataConfig:
    source: str = "hub"  # hub: a Hugging Face dataset (hub id or local folder); files: {split}.{lang} text files
    name: str | None = None  # hub id or local dataset folder (source=hub)
    subset: str | None = None  # hub configuration name, e.g. "de-en" for wmt14 ("{src}-en": one per direction)
    # folder holding {split}.{lang} files, or one {split}.tsv per split, each may be .gz/.xz/.bz2 (source=files)
    dir: str | None = None
    # the language of each column of a .tsv file without a header line, in order ([en,de,note]); null: the
    # file's header, or the pair in its name (train.de-en.tsv), names them
    columns: list[str] | None = None
    # a language code, or several ([de,fr,cs]): one model for every direction from a source into a target
    src_lang: Any = "de"
    tgt_lang: Any = "en"
    # one split, or several trained on as one ([train,synthetic]; a split named twice counts twice)
    train_split: Any = "train"
    # training splits whose sources start with the tag <bt>: tagged back-translation (synthetic sources)
    tagged_splits: list[str] = field(default_factory=list)
    # several directions: each one's share of training goes as pairs ** (1 / this); 1 = as their pairs,
    # 5 = smaller directions read more often (as in massively multilingual MT), inf = equal shares
    direction_temperature: float = 1.0
    valid_split: str = "valid"
    test_split: str | None = "test"
    # a corpus without a validation (test) split: this many random training pairs held out as one, and
    # left out of training (mt/data/held_out_from_train.py); 0 = read data.valid_split (data.test_split)
    valid_from_train: int = 0
    test_from_train: int = 0
    max_len: int = 256  # sentencepiece pieces per side; longer training pairs are filtered (counted)
    max_len_ratio: float = 0.0  # drop training pairs whose length ratio exceeds this; 0 = off
    drop_held_out: bool = False  # drop training pairs that are valid or test pairs too (counted either way)
    drop_duplicates: bool = False  # drop training pairs that repeat an earlier pair exactly, the first kept
    drop_copies: bool = False  # drop training pairs whose target is their source text (untranslated copies)
    valid_max_sentences: int = 0  # cap the sentences decoded for validation BLEU; 0 = all
    # encoded corpora (memory-mapped, shared by runs) and decompressed corpus files; null = off
    cache_dir: str | None = "data/cache"
    # training pairs batched together: a bigger corpus is trained on pool by pool, each drawn from all over it
    pool_pairs: int = 400_000
    shard_lines: int = 50_000  # the training corpus is encoded and cached in shards of this many lines


@dataclass
class TokenizerConfig:
    type: str = "unigram"  # unigram | bpe
    vocab_size: int = 8000
    joint: bool = True  # one vocabulary for both languages (needed to tie embeddings)
    # share of the training text's characters that get a piece of their own (the rarest others: byte pieces);
    # null = 0.9995 where a language of the run is Chinese or Japanese (thousands of rare characters, each
    # of which would take a piece), as sentencepiece's authors advise, else 1.0
    character_coverage: float | None = None
    byte_fallback: bool = True  # unseen characters become UTF-8 byte pieces, never <unk>
    # how text is normalized before it is split, as translations will be written: nmt_nfkc (Unicode NFKC:
    # full-width letters and digits, ligatures, … to their plain forms) | nfkc | identity (as written) |
    # nmt_nfkc_cf | nfkc_cf (case-folded too); null = nmt_nfkc, but identity where a target language is Chinese,
    # Japanese or Korean: NFKC would write full-width ，！？ as , ! ? (and Korean's ㅋ as a conjoining jamo)
    normalization: str | None = None
    # sentences sentencepiece is trained on, drawn uniformly from the training text (500k: ~40 s, 1.2 GB)
    max_sentences: int = 500_000


@dataclass
class ModelConfig:
    """Every architecture's options, for composing presets and overrides: an option left None is
    not set. mt/config/model.py holds each architecture's own schema, defaults and checks."""

    arch: str = "transformer"  # transformer | rnn_attention
    encoder_layers: int | None = None
    decoder_layers: int | None = None  # transformer
    d_model: int | None = None
    heads: int | None = None  # transformer
    ffn_dim: int | None = None  # transformer
    dropout: float | None = None
    attention_dropout: float | None = None  # transformer
    activation_dropout: float | None = None  # transformer
    norm_first: bool | None = None  # transformer: False post-norm (the paper's), True pre-norm
    tie_embeddings: bool | None = None
    init: str | None = None  # transformer: xavier | fairseq (initial weight scales)
    rnn_cell: str | None = None  # rnn_attention: gru | lstm
    attention: str | None = None  # rnn_attention: bahdanau (additive) | general | dot


@dataclass
class TrainConfig:
    max_tokens: int = 4096  # padded source-or-target tokens per batch
    update_freq: int = 1  # batches accumulated per update
    lr: float | None = None  # peak learning rate; None = the paper's d_model^-0.5 * warmup^-0.5
    warmup: int = 4000
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    # Subword regularisation (unigram tokenizers): > 0 trains each epoch on a segmentation drawn from the
    # 16 best of every sentence with probability ~ P(x)^alpha, this alpha (lower = more varied; 0.1-0.5)
    subword_sampling: float = 0.0
    clip_norm: float = 0.0  # 0 = no clipping
    precision: str = "fp32"  # fp32 | bf16 | fp16 (fp16 on CUDA only)
    cuda_graphs: bool = True  # on CUDA: batches in a few fixed shapes, each update replayed as CUDA graphs
    # with precision=bf16, in one process: forward and backward run a bf16 copy of the weights (no autocast
    # casts, a bf16 residual stream), Adam updates fp32 ones; on in the GPU preset multi30k_base
    bf16_weights: bool = False
    compile: bool = False  # torch.compile the model (per batch shape on the CUDA-graph path); pays in long runs only
    max_steps: int = 100_000
    max_epochs: int = 0  # 0 = no limit
    max_time: float = 0.0  # wall-clock seconds; 0 = no limit
    cooldown: float = 0.0  # share of the budget (max_steps, max_time or max_epochs, whichever ends first)
    # over which the learning rate falls linearly to 0; 0 = no cool-down
    valid_every: int = 1000
    save_every: int = 1000
    log_every: int = 100
    patience: int = 0  # stop after this many validations without a better best_metric; 0 = never
    # the validation figure that ranks checkpoints (best.pt, best_stepN.pt, final.pt from best.pt or averaged.pt)
    # and that patience waits on: bleu | chrf | ppl (chrf also chooses the length penalty)
    best_metric: str = "bleu"
    keep_best: int = 1  # best.pt, plus best_stepN.pt for each of the N best when N > 1
    keep_last: int = 0  # also keep the M latest periodic checkpoints as stepN.pt (weights only)
    average_last: int = 0  # at the end, average the K latest stepN.pt into averaged.pt (K <= keep_last)
    # > 0: validate, keep (best.pt, stepN.pt) and deliver an exponential moving average of the weights, updated
    # after every update with this decay (0.999: the last ~1,000 updates); training goes on with the weights
    ema_decay: float = 0.0
    max_bad_steps: int = 10  # stop after this many consecutive updates with a non-finite loss or gradient
    peak_tflops: float = 0.0  # the device's peak, for the MFU estimate; 0 = known GPUs only
    seed: int = 1
    # Fine-tuning: start from this checkpoint's weights, tokenizer and architecture (model options, tokenizer
    # settings) with a fresh optimizer, schedule and budget; null = train from scratch ("": required, not given)
    init_from: str | None = None
    device: str = "auto"  # auto | cpu | cuda
    threads: int = 0  # torch intra-op threads; 0 = every core the run may use (its affinity, its container's CPU quota)


@dataclass
class DecodeConfig:
    # How `translate`, `mt-serve` and the Python API decode with this run's checkpoints. Validation, the
    # test score and mt-evaluate always search (greedy or beam), without MBR: a score of random samples
    # means little, and MBR would multiply the cost of every validation.
    strategy: str = "search"  # search (greedy / beam search) | sample
    beam: int = 5
    alpha: float = 0.6  # GNMT length penalty exponent
    max_len_a: float = 1.2  # output at most a * source length + b pieces
    max_len_b: int = 10
    batch_tokens: int = 16000  # source tokens per batch for greedy; divided by the beam size for beam search
    valid_beam: int = 1  # beam used for validation BLEU (1 = greedy, fast)
    # how BLEU splits text into words (sacreBLEU's tokenize: 13a, intl, char, zh, ja-mecab, ko-mecab, flores200,
    # ...); null = by the target language: zh, ja-mecab, ko-mecab for Chinese, Japanese, Korean, else 13a
    bleu_tokenize: str | None = None
    # At the end of training, decode valid with each of these alphas and keep the best as the final
    # checkpoint's decode.alpha (final.pt: test score, translate, mt-evaluate); empty = keep alpha
    alpha_candidates: list[float] = field(default_factory=list)
    temperature: float = 1.0  # sampling: divides the logits (< 1 sharper, > 1 flatter; 0 = greedy)
    topk: int = 0  # sampling: draw among the k most likely tokens only; 0 = all
    topp: float = 1.0  # sampling: draw within the smallest set of tokens holding this probability
    epsilon: float = 0.0  # sampling: never draw a token below this probability (the most likely one stays)
    seed: int = 0  # sampling: each line's draws are seeded by this and the line's number
    min_len: int = 0  # no end of sentence before this many pieces; 0 = off
    no_repeat_ngram: int = 0  # no n-gram of this many pieces twice in one output (against loops); 0 = off
    split_sentences: bool = False  # translate each line's sentences apart, then join them (paragraphs a line)
    # Minimum Bayes risk: draw this many candidates a line (samples, or the best of a beam holding them) and
    # keep the one that agrees most with the others, by sentence chrF or BLEU (mbr_utility); 0 = off
    mbr: int = 0
    mbr_utility: str = "chrf"
    # Spans carried through untranslated, put back by the model's alignment: url, email, tag (<b>...</b>),
    # placeholder ({name}, %(n)d), code (`code`), printf (%s %d: not by default, as German writes "100%ig"), subtitle
    # ({\an8}, <00:01.500>: always in subtitle files); none: off
    protect: str = "url,email,tag,placeholder,code"
    # Greedy and beam search in fixed slots (static caches, finished sentences masked), each step captured
    # once as a CUDA graph and replayed; the same translations. Off until measured faster on a GPU.
    cuda_graphs: bool = False


@dataclass
class Config:
    name: str = "default"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


REPO_DIR = Path(CONFIG_DIR).parent


def register_configs() -> None:
    """Make the schema available to Hydra as 'schema' (the first entry of configs/config.yaml), and the
    ${repo:PATH} resolver: PATH inside the repository (the shipped data), from whatever directory."""
    from hydra.core.config_store import ConfigStore  # here, so translate starts without importing Hydra

    ConfigStore.instance().store(name="schema", node=Config)
    OmegaConf.register_new_resolver("repo", lambda path: str(REPO_DIR / path), replace=True)
    OmegaConf.register_new_resolver("corpus", corpus_label, replace=True)
    OmegaConf.register_new_resolver("dir_name", dir_name, replace=True)


def dir_name(overrides: str) -> str:
    """A sweep's run directory name from its swept values (Hydra's override_dirname): a value that is a path
    stays one folder."""
    return str(overrides).replace("/", "_") or "run"


def corpus_label(source: str | None, name: str | None, folder: str | None, src, tgt) -> str:
    """A short name for a run's training corpus and direction, for its default run directory:
    data/mycorpus (files) or org/mycorpus (hub) with de -> en gives mycorpus.de-en; with several
    languages, [de,fr] -> en gives mycorpus.de+fr-en."""
    where = folder if source == "files" else name
    base = Path(str(where or "data").rstrip("/")).name or "data"
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", f"{base}.{languages_label((src, tgt))}")


def to_dict(cfg: DictConfig) -> dict:
    """A plain, resolved dict: what checkpoints and the run directory store."""
    return OmegaConf.to_container(cfg, resolve=True)


def from_dict(values: dict, origin: str = "config") -> DictConfig:
    """Rebuild a typed config from a checkpoint's dict; a key or value this version does not know
    (a checkpoint of a newer version, say) is one line naming origin."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.merge(OmegaConf.structured(Config), values)
    except OmegaConfBaseException as err:
        raise MTError(f"{origin}: its config does not fit this version of mt ({_one_line(err)})") from None


def check_overrides(argv: list[str]) -> DictConfig | None:
    """Compose the config from command-line overrides once, up front, so that an unknown key or a
    badly typed value is one clear line (and exit status 2) instead of Hydra's multi-line report.
    Returns it; None (unchecked) when Hydra's own flags (--help, --cfg, -m, ...) are used."""
    if any(arg.startswith("-") for arg in argv):
        return None
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register_configs()
    overrides = [arg for arg in argv if not arg.startswith("hydra.") and not arg.startswith("hydra/")]
    try:
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            composed = compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as err:
        said = _one_line(err)
        hint = meant(overrides, schema_names(Config)) if " not in '" in said else None
        raise MTError(said + (f"; {hint}" if hint else "")) from None
    if not fine_tune(composed):  # a fine-tune is checked once its parent's settings are in (training/finetune.py)
        validate(composed)
    return composed


def fine_tune(cfg: DictConfig) -> bool:
    """Whether cfg starts from a trained model (train.init_from; "" where a preset requires one)."""
    return cfg.train.init_from is not None


def run_dir_of(argv: list[str], sweep: bool = False) -> str | None:
    """The run directory Hydra will use for these overrides (hydra.run.dir; sweep: hydra.sweep.dir, the
    folder of a sweep's runs), known before Hydra starts; None where it cannot be told without Hydra's runtime."""
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            composed = compose(config_name="config", overrides=list(argv), return_hydra_config=True)
        return str(composed.hydra.sweep.dir if sweep else composed.hydra.run.dir)
    except Exception:  # a hydra.* setting compose cannot resolve: Hydra itself will say what is wrong
        return None


def _one_line(err: BaseException) -> str:
    """Hydra/OmegaConf errors, and their causes, as one line without the debugging detail."""
    parts = []
    while err is not None:
        for line in str(err).split("Config search path")[0].splitlines():
            line = line.strip().rstrip(":.")
            if line and not line.startswith(("full_key", "reference_type", "object_type", "To append")):
                parts.append(line)
        err = err.__cause__
    return "; ".join(dict.fromkeys(parts)).replace("Available options in", "available in").replace(";;", ";")
