"""Validation during training: the teacher-forced loss, BLEU and chrF of decoded translations, and
what a user reviews afterwards (TensorBoard scalars, sample translations and attention heatmaps,
metrics.jsonl, valid.hyp)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import torch

from mt import fastpath
from mt.data.batching import EncodedCorpus, collate, token_batches
from mt.data.corpus import ParallelCorpus
from mt.decoding.translator import DecodeSettings, Translator
from mt.languages import direction_name, directions
from mt.metrics import DEFAULT_TOKENIZE, Scores, bleu_tokenize, pooled_score, score

SAMPLES = 3  # sample translations shown in TensorBoard
HEATMAPS = 2  # sentences whose cross-attention is drawn
PIXELS = 8  # heatmap pixels per (target, source) cell


class Validator:
    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        data: EncodedCorpus,
        text: ParallelCorpus,
        settings: DecodeSettings,
        device: torch.device,
        batch_loss: Callable,
        max_tokens: int,
        max_sentences: int = 0,
        bleu_tokenize: dict[str, str] | None = None,
    ):
        """batch_loss(batch) -> summed (loss, nll), as training computes it; settings decode the
        BLEU translations and the heatmaps' sentences alike; bleu_tokenize: how BLEU splits each
        direction's target text into words (bleu_tokenizations; default 13a)."""
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.data, self.settings, self.batch_loss, self.max_tokens = data, settings, batch_loss, max_tokens
        # several directions (text.sections): the first max_sentences / n of each, scored each on its own too
        sections = text.sections or {"": (0, len(text))}
        share = -(-max_sentences // len(sections)) if max_sentences else None
        self.sources, self.references, self.sections = [], [], {}
        for direction, (start, stop) in sections.items():
            stop = min(stop, start + share) if share else stop
            self.sections[direction] = (len(self.sources), len(self.sources) + stop - start)
            self.sources += text.src[start:stop]
            self.references += text.tgt[start:stop]
        tokenize = bleu_tokenize or {}
        only = next(iter(tokenize.values())) if len(tokenize) == 1 else DEFAULT_TOKENIZE
        self.tokenize = {direction: tokenize.get(direction, only) for direction in self.sections}

    @classmethod
    def for_training(cls, cfg, model, tokenizer, data: EncodedCorpus, text: ParallelCorpus, device, batch_loss):
        """The validation a run's config asks for: decode.valid_beam, in the precision fastpath picks."""
        settings = DecodeSettings.for_scoring(
            cfg.decode,
            beam=cfg.decode.valid_beam,
            precision=fastpath.decode_precision(device, cfg.train.precision),
        )
        return cls(
            model,
            tokenizer,
            data,
            text,
            settings,
            device,
            batch_loss,
            cfg.train.max_tokens,
            cfg.data.valid_max_sentences,
            bleu_tokenizations(cfg),
        )

    def score(self, hypotheses: list[str]) -> Scores:
        """BLEU and chrF of translations of all the validation sources, in order, against their references."""
        parts = [(start, stop, self.tokenize[d]) for d, (start, stop) in self.sections.items()]
        return pooled_score(hypotheses, self.references, parts)

    @torch.no_grad()
    def loss(self) -> tuple[float, float]:
        """Teacher-forced (label-smoothed loss, nll) per target token."""
        self.model.eval()
        loss_sum = nll_sum = tokens = 0.0
        v = self.data
        for idx in token_batches(v.src_lens, v.tgt_lens, self.max_tokens):
            batch = collate(v, idx).to(self.device)
            loss, nll = self.batch_loss(batch)
            loss_sum, nll_sum, tokens = loss_sum + float(loss), nll_sum + float(nll), tokens + batch.num_tgt_tokens
        return loss_sum / tokens, nll_sum / tokens

    def run(self, step: int, epoch: int, elapsed: float, writer=None, run_dir: Path | None = None) -> dict:
        """The validation record of the model as it is now. With a writer (TensorBoard) and run_dir it
        is also reported; without, it is a side evaluation (e.g. of averaged weights)."""
        loss, nll = self.loss()
        translator = Translator(self.model, self.tokenizer, self.settings, self.device)
        hypotheses = [r[0].text for r in translator.translate_nbest(self.sources)]
        scores = self.score(hypotheses)
        record = {
            "step": step,
            "epoch": epoch,
            "valid_loss": round(loss, 4),
            "valid_nll": round(nll, 4),
            "valid_ppl": round(math.exp(min(nll, 50)), 3),
            "valid_bleu": scores.bleu,
            "valid_chrf": scores.chrf,
            "bleu_signature": scores.bleu_signature,
            "elapsed": round(elapsed, 1),
        }
        if len(self.sections) > 1:
            record["valid_bleu_by_direction"] = {
                direction: score(hypotheses[start:stop], self.references[start:stop], self.tokenize[direction]).bleu
                for direction, (start, stop) in self.sections.items()
            }
        if writer is not None:
            self._report(record, hypotheses, translator, writer, run_dir)
        return record

    def _report(self, record: dict, hypotheses: list[str], translator: Translator, writer, run_dir: Path) -> None:
        step = record["step"]
        for key in ("loss", "ppl", "bleu", "chrf"):
            writer.add_scalar(f"valid/{key}", record[f"valid_{key}"], step)
        for direction, bleu in record.get("valid_bleu_by_direction", {}).items():
            writer.add_scalar(f"valid/bleu_{direction}", bleu, step)
        samples = "\n\n".join(
            f"**src:** {s}  \n**ref:** {r}  \n**hyp:** {h}"
            for s, r, h in list(zip(self.sources, self.references, hypotheses))[:SAMPLES]
        )
        writer.add_text("valid/samples", samples, step)
        for i, shown in enumerate(translator.translate_nbest(self.sources[:HEATMAPS], attention_layer=-1)):
            if shown[0].attention is not None:
                # cross-attention of the last decoder layer: target rows x source columns
                image = shown[0].attention.repeat_interleave(PIXELS, 0).repeat_interleave(PIXELS, 1)
                writer.add_image(f"valid/attention_{i}", image[None].clamp(0, 1), step)
        with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        (run_dir / "valid.hyp").write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")


def bleu_tokenizations(cfg) -> dict[str, str]:
    """How BLEU splits each of a run's directions' target text into words ({"de-en": "13a"}): as
    decode.bleu_tokenize says, else as suits the target language (mt.metrics.bleu_tokenize)."""
    return {direction_name(s, t): bleu_tokenize(t, cfg.decode.bleu_tokenize) for s, t in directions(cfg.data)}
