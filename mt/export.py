"""mt-export: a trained Transformer checkpoint (or several, averaged) as a CTranslate2 model directory,
for deployment where PyTorch is not wanted (int8 on CPUs, fp16 on GPUs), and as a second engine
that must translate the same from the same weights.

    mt-export --checkpoint runs/multi30k.de-en/multi30k_cpu/checkpoints/best.pt --output exported/ --quantization int8
    translate --engine ctranslate2 --checkpoint exported/ < input.de

The export directory holds CTranslate2's model.bin, config.json and vocabularies, the run's
sentencepiece model(s), mt_export.json (decode settings and where the weights came from) and a
README.md saying how to load it without this toolkit.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import torch
from omegaconf import OmegaConf

from mt.decoding.ctranslate2_translator import EXPORT_INFO, import_ctranslate2
from mt.errors import MTError
from mt.inference import load_for_inference
from mt.languages import language_list, languages_of, target_tags
from mt.model import Transformer
from mt.model.layers import sinusoidal_positions

QUANTIZATIONS = ("none", "int8", "int8_float16", "int8_float32", "float16", "bfloat16")
POSITIONS = 4096  # rows of the sinusoid table written out: the longest input or output CTranslate2 can take


def transformer_spec(model: Transformer, tokenizer):
    """The CTranslate2 TransformerSpec holding model's weights: the same maths, layer for layer."""
    import_ctranslate2()  # a one-line error if it is missing
    from ctranslate2.specs import common_spec, transformer_spec

    layers = (len(model.encoder_layers), len(model.decoder_layers))
    spec = transformer_spec.TransformerSpec.from_config(
        layers,
        model.encoder_layers[0].self_attn.heads,
        pre_norm=model.norm_first,
        activation=common_spec.Activation.RELU,
    )
    spec.config.layer_norm_epsilon = model.encoder_layers[0].ffn_sublayer.norm.eps
    spec.config.add_source_eos = True  # our encoder reads the source pieces and EOS
    table = _numpy(_positions(model))
    spec.encoder.embeddings[0].weight = _numpy(model.src_embed.weight)
    spec.encoder.position_encodings.encodings = table
    spec.decoder.embeddings.weight = _numpy(model.tgt_embed.weight)
    spec.decoder.position_encodings.encodings = table
    output = model.output_proj.weight if model.output_proj is not None else model.tgt_embed.weight
    spec.decoder.projection.weight = _numpy(output)
    for ours, theirs in zip(model.encoder_layers, spec.encoder.layer):
        _attention(theirs.self_attention, ours.self_attn, fused_qkv=True)
        _layer_norm(theirs.self_attention.layer_norm, ours.attn_sublayer.norm)
        _feed_forward(theirs.ffn, ours.ffn, ours.ffn_sublayer.norm)
    for ours, theirs in zip(model.decoder_layers, spec.decoder.layer):
        _attention(theirs.self_attention, ours.self_attn, fused_qkv=True)
        _layer_norm(theirs.self_attention.layer_norm, ours.self_sublayer.norm)
        _attention(theirs.attention, ours.cross_attn, fused_qkv=False)
        _layer_norm(theirs.attention.layer_norm, ours.cross_sublayer.norm)
        _feed_forward(theirs.ffn, ours.ffn, ours.ffn_sublayer.norm)
    if model.norm_first:  # the pre-norm stacks end in a layer norm
        _layer_norm(spec.encoder.layer_norm, model.encoder_norm)
        _layer_norm(spec.decoder.layer_norm, model.decoder_norm)
    spec.register_source_vocabulary(tokenizer.src_pieces(range(tokenizer.src_vocab_size)))
    spec.register_target_vocabulary(tokenizer.tgt_pieces(range(tokenizer.tgt_vocab_size)))
    return spec


def export(checkpoints: list[str], output: Path, quantization: str = "none", force: bool = False) -> Path:
    """Write the export directory for checkpoints (averaged when several); returns it."""
    ct2 = import_ctranslate2()
    if quantization not in QUANTIZATIONS:
        raise MTError(f"--quantization {quantization!r}: one of {', '.join(QUANTIZATIONS)}")
    output = Path(output)
    if output.exists() and not force:
        raise MTError(f"{output}: exists; give another --output or --force to replace it")
    if output.exists() and not is_export_or_empty(output):
        raise MTError(f"{output}: not an export directory (no {EXPORT_INFO}); --force replaces only an export")
    model, tokenizer, cfg = load_for_inference(checkpoints)
    if not isinstance(model, Transformer):
        raise MTError(
            f"{checkpoints[0]}: a {cfg.model.arch} model; CTranslate2 has no spec for it, only Transformers export"
        )

    class _Converter(ct2.converters.Converter):
        def _load(self):
            return transformer_spec(model, tokenizer)

    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        _Converter().convert(str(staging / "model"), quantization=None if quantization == "none" else quantization)
        for item in (staging / "model").iterdir():
            item.rename(staging / item.name)
        (staging / "model").rmdir()
        tokenizer.save(staging)
        info = {
            "decode": OmegaConf.to_container(cfg.decode),
            "checkpoints": [str(Path(c).resolve()) for c in checkpoints],
            "quantization": quantization,
            "arch": cfg.model.arch,
            "languages": list(languages_of(cfg.data)),
            "joint_vocabulary": tokenizer.joint,
        }
        (staging / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        readme = _readme(tokenizer.joint, cfg.decode, target_tags(language_list(cfg.data.tgt_lang)))
        (staging / "README.md").write_text(readme, encoding="utf-8")
        if output.exists():
            shutil.rmtree(output)
        staging.rename(output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output


def is_export_or_empty(folder: Path) -> bool:
    """Whether --force may delete folder: what mt-export wrote, or an empty folder (never a run directory, a
    checkout, or a file, that a mistyped --output would name)."""
    return folder.is_dir() and ((folder / EXPORT_INFO).is_file() or not any(folder.iterdir()))


def _positions(model: Transformer) -> torch.Tensor:
    return sinusoidal_positions(torch.arange(POSITIONS), model.d_model)


def _numpy(t: torch.Tensor):
    return t.detach().float().cpu().numpy().copy()


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _numpy(weight)
    if bias is not None:
        spec.bias = _numpy(bias)


def _attention(spec, ours, fused_qkv: bool) -> None:
    """Self-attention: CTranslate2 fuses W^Q, W^K, W^V in one matrix; cross-attention keeps W^Q apart
    and fuses W^K, W^V, as our kv_proj does."""
    if fused_qkv:
        _linear(
            spec.linear[0],
            torch.cat([ours.q_proj.weight, ours.kv_proj.weight]),
            torch.cat([ours.q_proj.bias, ours.kv_proj.bias]),
        )
    else:
        _linear(spec.linear[0], ours.q_proj.weight, ours.q_proj.bias)
        _linear(spec.linear[1], ours.kv_proj.weight, ours.kv_proj.bias)
    _linear(spec.linear[-1], ours.out_proj.weight, ours.out_proj.bias)


def _layer_norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _numpy(norm.weight), _numpy(norm.bias)


def _feed_forward(spec, ffn, norm) -> None:
    _linear(spec.linear_0, ffn.linear1.weight, ffn.linear1.bias)
    _linear(spec.linear_1, ffn.linear2.weight, ffn.linear2.bias)
    _layer_norm(spec.layer_norm, norm)


def _readme(joint: bool, decode, tags: list[str]) -> str:
    models = "spm.model" if joint else "spm.src.model", "spm.model" if joint else "spm.tgt.model"
    languages = (
        f"""
This model translates into several languages: each source starts with the tag of the one wanted and a
space ({", ".join(tags)}), e.g. `"{tags[0]} Ein Hund rennt."`; `translate --tgt-lang` adds it.
"""
        if tags
        else ""
    )
    return f"""# A CTranslate2 export of an mt checkpoint

With this toolkit: `translate --engine ctranslate2 --checkpoint THIS_DIR < input > output`.

Without it (`pip install ctranslate2 sentencepiece`):

```python
import ctranslate2, sentencepiece as spm

src = spm.SentencePieceProcessor(model_file="THIS_DIR/{models[0]}")
tgt = spm.SentencePieceProcessor(model_file="THIS_DIR/{models[1]}")
translator = ctranslate2.Translator("THIS_DIR", device="cpu")  # or "cuda"
pieces = src.encode(["Ein Hund rennt."], out_type=str)
results = translator.translate_batch(pieces, beam_size={decode.beam}, length_penalty={decode.alpha},
                                     max_input_length=0)
print(tgt.decode(results[0].hypotheses[0]))
```

The source end-of-sentence token is added by the model's config (add_source_eos). CTranslate2's length
penalty divides a hypothesis' score by length^alpha; this toolkit's beam search uses GNMT's
((5 + length) / 6)^alpha, so beam outputs can differ slightly; greedy outputs are the same.
{languages}"""
