"""How to decode (DecodeSettings) and what decoding gives (Translation), shared by both engines:
mt/decoding/translator.py (PyTorch) and mt/export/engine.py (CTranslate2), which runs without torch."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode: the search and its limits, batching and precision. Built once, from a config's
    decode section plus any choices of the caller (a command-line flag, validation's beam), and
    handed to the Translator: validation, the test score, `translate` and `mt-evaluate` decode alike."""

    beam: int = 1  # 1 = greedy
    alpha: float = 0.6  # GNMT length penalty exponent (beam search)
    max_len_a: float = 1.2  # output at most a * source length + b pieces
    max_len_b: int = 10
    nbest: int = 1  # hypotheses returned per sentence (<= beam)
    batch_tokens: int = 16000  # source tokens per batch for greedy; divided by the beam size for beam search
    precision: str = "fp32"  # fp32 | bf16 | fp16

    @classmethod
    def from_config(cls, decode_cfg, **choices) -> DecodeSettings:
        """decode_cfg's values (cfg.decode, or a checkpoint's), each choice that is not None taking precedence."""
        values = {f.name: decode_cfg[f.name] for f in fields(cls) if f.name in decode_cfg}
        values.update({k: v for k, v in choices.items() if v is not None})
        values["beam"] = max(values.get("beam", 1), values.get("nbest", 1))
        return cls(**values)


@dataclass
class Translation:
    text: str
    score: float
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: torch.Tensor | None = None  # (T, S) cross-attention, when asked for


class LineTranslator:
    """What both engines offer callers: `translate(lines)` gives the best translation of every line as text;
    `translate_nbest(lines)` gives settings.nbest Translations per line (text, score, pieces, attention)."""

    def translate(self, lines: list[str] | str) -> list[str] | str:
        """The best translation of every line, in order (an empty line gives an empty one). One string in,
        one string out."""
        if isinstance(lines, str):
            return self.translate_nbest([lines])[0][0].text
        return [found[0].text for found in self.translate_nbest(list(lines))]

    def translate_nbest(self, lines: list[str], **options) -> list[list[Translation]]:
        raise NotImplementedError
