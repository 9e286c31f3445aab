"""How to decode (DecodeSettings) and what decoding and scoring give (Translation, PairScore), shared by
both engines: mt/decoding/translator.py (PyTorch) and mt/decoding/ctranslate2_translator.py (CTranslate2), which runs
without torch."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from mt.decoding.protected_spans import DEFAULT as DEFAULT_PROTECT
from mt.decoding.protected_spans import kinds_of
from mt.errors import MTError, counted

if TYPE_CHECKING:
    import torch

    from mt.decoding.constraints import Constraints

STRATEGIES = ("search", "sample")
MBR_UTILITIES = ("chrf", "bleu")  # mt/decoding/mbr.py
# Scoring: padded tokens per batch (the longer side); a batch's logits are (tokens, vocabulary) floats, 0.5 GB at 32k.
SCORE_BATCH_TOKENS = 4096
DEFAULT_BEAM = 5  # beam search asked for where the settings at hand are greedy (beam 1)
# Rules on what a translation may be, each a flag of translate, mt-evaluate and mt-serve of the same name.
RULE_FIELDS = ("min_len", "no_repeat_ngram", "split_sentences", "protect")
MBR_FIELDS = ("mbr", "mbr_utility")  # flags of translate, mt-evaluate and mt-serve: --mbr, --mbr-utility


# What each kind of field takes (an int where a float is asked for; never a bool for a number), and its name.
FIELD_TYPES = {"int": int, "float": (int, float), "str": str, "bool": bool}
ARTICLE = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode: the strategy and its limits, batching and precision. Built once, from a config's
    decode section plus any choices of the caller (a command-line flag, validation's beam, a server
    request), and handed to the Translator: validation, the test score, `translate`, `mt-evaluate` and
    `mt-serve` decode alike. A value out of range is a one-line MTError naming the field.

    strategy "search" is greedy search (beam 1) or beam search; "sample" draws each token at random
    from the model's distribution (sharpened or flattened by temperature, cut to the top-k tokens and
    to the nucleus of top-p probability), nbest independent samples per line, each line's draws
    seeded by (seed, its line number): the same line gives the same samples in any batch. With mbr, either
    strategy draws mbr candidates a line (samples, or the best of a beam that holds them), and the one
    that agrees most with the others is kept (minimum Bayes risk, mt/decoding/mbr.py)."""

    strategy: str = "search"  # search (greedy / beam) | sample
    beam: int = 1  # 1 = greedy
    alpha: float = 0.6  # GNMT length penalty exponent (beam search)
    max_len_a: float = 1.2  # output at most a * source length + b pieces
    max_len_b: int = 10
    nbest: int = 1  # hypotheses returned per sentence (<= beam); with sampling, samples per sentence
    batch_tokens: int = 16000  # source tokens per batch for greedy; divided by the beam size for beam search
    precision: str = "fp32"  # fp32 | bf16 | fp16
    temperature: float = 1.0  # sampling: divides the logits; 0 = always the most likely token (greedy)
    topk: int = 0  # sampling: draw among the k most likely tokens only; 0 = all
    topp: float = 1.0  # sampling: draw within the smallest set of tokens holding this much probability
    epsilon: float = 0.0  # sampling: never draw a token below this probability (the most likely one stays)
    seed: int = 0  # sampling: with each line's number, seeds that line's draws
    cuda_graphs: bool = False  # greedy and beam search in fixed slots, each step a replayed CUDA graph (CUDA)
    min_len: int = 0  # no end of sentence before this many pieces; 0 = off (mt/decoding/constraints.py)
    no_repeat_ngram: int = 0  # no n-gram of this many pieces twice in one output; 0 = off
    tgt_lang: str = ""  # the language to translate into, for a model of several target languages
    split_sentences: bool = False  # translate each line's sentences one by one (mt/decoding/sentences.py)
    mbr: int = 0  # minimum Bayes risk: candidates a line to choose among; 0 = off (mt/decoding/mbr.py)
    mbr_utility: str = "chrf"  # how MBR compares two candidates: sentence chrF or BLEU
    protect: str = DEFAULT_PROTECT  # spans carried through untranslated (mt/decoding/protected_spans.py); none: off

    def __post_init__(self):
        for field in fields(self):  # a value of another type would fail deep inside a search
            value, wanted = getattr(self, field.name), FIELD_TYPES[field.type]
            if isinstance(value, bool) != (field.type == "bool") or not isinstance(value, wanted):
                raise MTError(f"decode setting {field.name}={value!r}: must be {ARTICLE[field.type]}")
        checks = (
            ("strategy", self.strategy in STRATEGIES, f"one of {', '.join(STRATEGIES)}"),
            ("beam", self.beam >= 1, ">= 1"),
            ("nbest", self.nbest >= 1, ">= 1"),
            ("nbest", self.strategy == "sample" or self.nbest <= self.beam, "at most the beam size"),
            ("nbest", self.nbest == 1 or not self.split_sentences, "1 with split_sentences (one translation a line)"),
            ("alpha", self.alpha >= 0, ">= 0"),
            ("max_len_a", self.max_len_a >= 0, ">= 0"),
            ("max_len_b", self.max_len_b >= 1, ">= 1"),
            ("batch_tokens", self.batch_tokens >= 1, ">= 1"),
            ("precision", self.precision in ("fp32", "bf16", "fp16"), "fp32, bf16 or fp16"),
            ("temperature", self.temperature >= 0, ">= 0"),
            ("topk", self.topk >= 0, ">= 0 (0: no cut)"),
            ("topp", 0 < self.topp <= 1, "in (0, 1]"),
            ("epsilon", 0 <= self.epsilon < 1, "in [0, 1) (0: no cut)"),
            ("seed", self.seed >= 0, ">= 0"),
            ("min_len", self.min_len >= 0, ">= 0 (0: off)"),
            ("no_repeat_ngram", self.no_repeat_ngram >= 0, ">= 0 (0: off)"),
            ("mbr", self.mbr == 0 or self.mbr >= 2, "0 (off) or >= 2 candidates a line"),
            ("mbr", self.mbr == 0 or self.nbest == 1, "0 with nbest > 1 (MBR keeps one translation a line)"),
            ("mbr_utility", self.mbr_utility in MBR_UTILITIES, f"one of {', '.join(MBR_UTILITIES)}"),
        )
        kinds_of(self.protect)  # a kind it lacks: one line naming it
        for name, ok, rule in checks:
            if not ok:
                raise MTError(f"decode setting {name}={getattr(self, name)!r}: must be {rule}")

    @property
    def sampling(self) -> bool:
        return self.strategy == "sample"

    @property
    def constraints(self) -> Constraints | None:
        """min_len and no_repeat_ngram as the torch engine's searches take them, None where both are off
        (CTranslate2 takes the values, and runs without torch: imported here)."""
        from mt.decoding.constraints import Constraints

        return Constraints(self.min_len, self.no_repeat_ngram) if self.min_len or self.no_repeat_ngram else None

    @property
    def rows_per_line(self) -> int:
        """Decoder rows one source line occupies: beam hypotheses, or nbest samples."""
        return self.nbest if self.sampling else self.beam

    def for_candidates(self) -> DecodeSettings:
        """The settings that draw MBR's candidates: mbr samples a line, or the mbr best of a beam holding them
        (of each sentence, where split_sentences has split the lines already)."""
        beam = self.beam if self.sampling else max(self.beam, self.mbr)
        return replace(self, mbr=0, nbest=self.mbr, beam=beam, split_sentences=False)

    @classmethod
    def from_config(cls, decode_cfg, **choices) -> DecodeSettings:
        """decode_cfg's values (cfg.decode, or a checkpoint's), each choice that is not None taking precedence."""
        check_setting_names(choices)
        values = {f.name: decode_cfg[f.name] for f in fields(cls) if f.name in decode_cfg}
        values.update({k: v for k, v in choices.items() if v is not None})
        if values.get("strategy", "search") == "search" and values.get("beam", 1) >= 1:  # beam 0: refused below
            values["beam"] = max(values.get("beam", 1), values.get("nbest", 1))
        return cls(**values)

    @classmethod
    def for_scoring(cls, decode_cfg, **choices) -> DecodeSettings:
        """decode_cfg's settings as validation, the choice of alpha and the test score decode: searching
        (greedy or beam), without MBR. A score of random samples means little; MBR would multiply the cost
        of every validation."""
        return cls.from_config(decode_cfg, **{**choices, "strategy": "search", "mbr": 0})

    def updated(self, **choices) -> DecodeSettings:
        """These settings with each choice that is not None in place (validated like the rest)."""
        return replace(self, **{k: v for k, v in choices.items() if v is not None})


SETTING_NAMES = frozenset(field.name for field in fields(DecodeSettings))
# A command-line flag whose setting has another name: the keyword a Python caller may reach for first.
SETTING_OF_FLAG = {"dtype": "precision"}


def check_setting_names(names) -> None:
    """Keywords that are not DecodeSettings fields: one line naming the first, not a TypeError from inside
    the dataclass (and before a model is loaded, where load_translator checks them)."""
    unknown = sorted(set(names) - SETTING_NAMES)
    if unknown:
        name = unknown[0]
        hint = f"--{name.replace('_', '-')}'s setting is {SETTING_OF_FLAG[name]}; " if name in SETTING_OF_FLAG else ""
        raise MTError(f"{name}: not a decoding setting ({hint}one of {', '.join(sorted(SETTING_NAMES))})")


def check_decode_section(decode_cfg) -> None:
    """A run's decode section as translate and mt-serve will read it from final.pt, checked before the run
    trains (its validation and test score search whatever decode.strategy says): one line naming the key."""
    try:
        DecodeSettings.from_config(decode_cfg)
    except MTError as err:
        raise MTError(str(err).replace("decode setting ", "config decode.", 1)) from None


def line_seed(seed: int, line_number: int) -> int:
    """The seed of one input line's sampling draws: a hash of (the settings' seed, the line's number)."""
    import numpy as np

    return int(np.random.SeedSequence([seed, line_number]).generate_state(1)[0])


@dataclass
class Translation:
    text: str
    score: float
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: torch.Tensor | None = None  # (T, S) cross-attention, when asked for


@dataclass
class PairScore:
    """How likely the model finds a given translation: the log-probability (natural log) of each of its
    target pieces, EOS included, given the source and the pieces before it."""

    pieces: list[str]  # the target's pieces, EOS last
    piece_log_probs: list[float]

    @property
    def log_prob(self) -> float:
        """log P(target | source): the sum over its pieces."""
        return float(sum(self.piece_log_probs))

    @property
    def mean_log_prob(self) -> float:
        """Per target piece (EOS included): comparable across lengths, as corpus filtering wants."""
        return self.log_prob / len(self.piece_log_probs)


def check_aligned(lines: list[str], values: list | None, name: str) -> None:
    """One value per line, or a one-line error."""
    if values is not None and len(values) != len(lines):
        raise MTError(f"{name}: {len(values):,} given for {counted(len(lines), 'line')} (one per line)")


def verbatim(prefix: str, prefix_decoded: str, text: str) -> str:
    """The output text beginning with the prefix exactly as the caller wrote it: the tokenizer normalises
    (spaces, unknown characters shown as ⁇), and a user who forced words expects to read them back."""
    if not prefix or not text.startswith(prefix_decoded):
        return text
    rest = text[len(prefix_decoded) :]
    if prefix[-1:].isspace() and rest[:1] == " ":
        rest = rest[1:]
    return prefix + rest
