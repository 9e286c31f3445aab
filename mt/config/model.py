"""Model options per architecture, and the builder from a config to a model.

`model=` presets (configs/model/) set the options of one architecture; each architecture has its
own schema below, with its defaults and checks. An option of another architecture
(`model=rnn_attention model.heads=16`) is an error that names the key and the architecture.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from mt.errors import MTError


@dataclass
class TransformerConfig:
    """The encoder-decoder Transformer (Vaswani et al. 2017)."""

    encoder_layers: int = 6
    decoder_layers: int = 6
    d_model: int = 512
    heads: int = 8
    ffn_dim: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    norm_first: bool = False  # False: post-norm, the paper's; True: pre-norm
    tie_embeddings: bool = True
    # fairseq: fairseq's scales (query/key/value sqrt(2) narrower than Xavier, feed-forward at nn.Linear's
    # default), ended multi30k_cpu_fp32 and smoke at a lower valid loss; xavier: every projection Xavier-uniform
    init: str = "fairseq"

    def check(self) -> None:
        _check(self.init in ("xavier", "fairseq"), "init", "must be xavier or fairseq")
        for key in ("encoder_layers", "decoder_layers", "d_model", "heads", "ffn_dim"):
            _check(getattr(self, key) > 0, key, "must be positive")
        _check(self.d_model % self.heads == 0, "heads", f"must divide model.d_model={self.d_model}")
        _check(self.d_model % 2 == 0, "d_model", "must be even (sinusoidal positions)")
        for key in ("dropout", "attention_dropout", "activation_dropout"):
            _check(0 <= getattr(self, key) < 1, key, "must be in [0, 1)")


@dataclass
class RNNAttentionConfig:
    """The attention RNN baseline (Bahdanau et al. 2015): a bidirectional encoder, one decoder cell."""

    d_model: int = 256
    encoder_layers: int = 1
    dropout: float = 0.2
    rnn_cell: str = "gru"  # gru | lstm
    attention: str = "bahdanau"  # bahdanau (additive) | general | dot
    tie_embeddings: bool = True

    def check(self) -> None:
        _check(self.d_model > 0 and self.d_model % 2 == 0, "d_model", "must be positive and even (two directions)")
        _check(self.encoder_layers > 0, "encoder_layers", "must be positive")
        _check(0 <= self.dropout < 1, "dropout", "must be in [0, 1)")
        _check(self.rnn_cell in ("gru", "lstm"), "rnn_cell", "must be gru or lstm")
        _check(self.attention in ("bahdanau", "general", "dot"), "attention", "must be bahdanau, general or dot")


ARCHITECTURES = {"transformer": TransformerConfig, "rnn_attention": RNNAttentionConfig}


def model_options(model_cfg, strict: bool = True) -> TransformerConfig | RNNAttentionConfig:
    """The options of cfg.model's architecture: the values set (not None), the rest its defaults.

    strict: an option set for another architecture is an error; not strict (a checkpoint's config,
    written before architectures had their own schema), it is dropped.
    """
    values = dict(model_cfg)
    arch = values.pop("arch", "transformer")
    if arch not in ARCHITECTURES:
        raise MTError(f"config model.arch: unknown architecture {arch!r} ({' or '.join(ARCHITECTURES)})")
    schema = ARCHITECTURES[arch]
    own = {f.name for f in fields(schema)}
    foreign = sorted(k for k, v in values.items() if v is not None and k not in own)
    if foreign and strict:
        raise MTError(
            f"config model.{foreign[0]}: the {arch} architecture has no such option "
            f"(its options: {', '.join(sorted(own))})"
        )
    options = schema(**{k: v for k, v in values.items() if v is not None and k in own})
    options.check()
    return options


def with_defaults(model_cfg) -> dict:
    """cfg.model with every option of its architecture given, defaults included: what a run records, so that
    its config.yaml and checkpoints still say what was trained once a default changes."""
    return {"arch": dict(model_cfg).get("arch", "transformer"), **asdict(model_options(model_cfg))}


def changed_model_options(saved: dict, current: dict) -> list[str]:
    """The model options in which two configs (a checkpoint's, this run's) differ."""
    if saved.get("arch", "transformer") != current.get("arch", "transformer"):
        return ["arch"]
    a, b = asdict(model_options(saved, strict=False)), asdict(model_options(current, strict=False))
    return [k for k in b if a[k] != b[k]]


def build_model(model_cfg, tokenizer):
    """The model cfg.model describes, sized to the tokenizer's vocabularies."""
    from mt.model import RNNAttention, Transformer  # here: config checks stay free of torch

    arch = dict(model_cfg).get("arch", "transformer")
    cls = {"transformer": Transformer, "rnn_attention": RNNAttention}[arch]
    return cls(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, **asdict(model_options(model_cfg, strict=False)))


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise MTError(f"config model.{key}: {message}")
