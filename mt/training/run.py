"""One training run from its config to its results: device, data, model, training, then the final
checkpoint (final.pt: best.pt or the average of the last ones, whichever validates better, with its
length penalty chosen on valid) and its test score."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch.utils.tensorboard import SummaryWriter

from mt.checkpoint import average_checkpoint_files, save_final
from mt.config.model import build_model
from mt.data.held_out_from_train import drawn_sizes
from mt.data.overlap import check_held_out, recorded
from mt.data.prepare import drops_held_out, encode_splits, prepare, sets_to_compare
from mt.decoding.sentences import several_sentences, several_sentences_note
from mt.decoding.translator import DecodeSettings, Translator
from mt.decoding.tuning import choose_alpha
from mt.errors import MTError
from mt.fastpath import decode_precision
from mt.inference import load_for_inference
from mt.languages import language_list
from mt.metrics import mean_over, score
from mt.training.budget import METRIC_NAMES, ranking_score, shown
from mt.training.distributed import Dist, barrier
from mt.training.finetune import load_parent_weights
from mt.training.trainer import Trainer
from mt.training.validation import Validator, bleu_tokenizations

log = logging.getLogger(__name__)


def pick_device(name: str, dist: Dist) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise MTError("train.device=cuda but no CUDA device is available")
    if name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", dist.local_rank)


def finish(
    cfg: DictConfig, chosen: Path, out_dir: Path, valid: Validator, tests: dict, device, step: int, overlaps=None
) -> Path:
    """Make the run's final checkpoint from the chosen one (best.pt or averaged.pt): choose its length
    penalty on valid (decode.alpha_candidates) and write checkpoints/final.pt with it, then translate the
    test split once with final.pt, in each direction (tests: "de-en" -> its pairs); write test.hyp
    (test.de-en.hyp, ... with several directions), results.json (with overlaps, what the held-out sets share
    with the training split, where counted) and test/bleu, test/chrf at the last step to TensorBoard.
    Returns final.pt."""
    final = chosen.parent / "final.pt"
    settings = DecodeSettings.for_scoring(cfg.decode, precision=decode_precision(device, cfg.train.precision))
    sweep = []
    if cfg.decode.alpha_candidates or tests:  # nothing to decode: final.pt is a copy
        model, tokenizer, _ = load_for_inference(chosen)
    if cfg.decode.alpha_candidates:
        by = "chrf" if cfg.train.best_metric == "chrf" else "bleu"  # perplexity: no length penalty changes it
        settings, sweep = choose_alpha(
            model, tokenizer, settings, cfg.decode.alpha_candidates, valid.sources, valid.score, device, by
        )
    save_final(chosen, final, settings.alpha)
    log.info("final checkpoint: %s (from %s, length penalty %g)", final, chosen.name, settings.alpha)
    if not tests:
        return final
    translator = Translator(model, tokenizer, settings, device)
    found, bleu_tokenize = {}, bleu_tokenizations(cfg)
    for direction, test in tests.items():
        results = translator.translate_nbest(test.src, progress=True)
        hypotheses = [r[0].text for r in results]
        name = "test.hyp" if len(tests) == 1 else f"test.{direction}.hyp"
        (out_dir / name).write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
        found[direction] = score(hypotheses, test.tgt, bleu_tokenize[direction])
        log.info(
            "test %s%s (%s, beam %d, alpha %g): BLEU %.2f | chrF %.2f",
            cfg.data.test_split,
            f" {direction}" if len(tests) > 1 else "",
            chosen.name,
            settings.beam,
            settings.alpha,
            found[direction].bleu,
            found[direction].chrf,
        )
    summary = {
        "split": cfg.data.test_split,
        "checkpoint": final.name,
        "final_from": chosen.name,
        "chosen_by": cfg.train.best_metric,  # best.pt against averaged.pt, on valid
        "beam": settings.beam,
        "alpha": settings.alpha,
        **({"alpha_sweep_on_valid": sweep} if sweep else {}),
        **({"held_out_in_training": {name: asdict(o) for name, o in overlaps.items()}} if overlaps else {}),
        **({"held_out_left_out_of_training": drops_held_out(cfg.data)} if overlaps else {}),
        **({"drawn_from_train": drawn} if (drawn := drawn_sizes(cfg.data)) else {}),
    }
    if len(found) == 1:
        summary.update(next(iter(found.values())).as_dict())
        bleu, chrf = summary["bleu"], summary["chrf"]
    else:  # each direction's scores, and their mean over directions on top, as scripts read one run's
        each = {d: s.as_dict() for d, s in found.items()}
        summary.update(**mean_over(each), directions=each)
        bleu, chrf = summary["bleu"], summary["chrf"]
        log.info("test %s, mean over %d directions: BLEU %.2f | chrF %.2f", cfg.data.test_split, len(found), bleu, chrf)
    (out_dir / "results.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    with SummaryWriter(str(out_dir / "tb")) as writer:
        writer.add_scalar("test/bleu", bleu, step)
        writer.add_scalar("test/chrf", chrf, step)
        if len(found) > 1:
            for direction, scores in found.items():
                writer.add_scalar(f"test/bleu_{direction}", scores.bleu, step)
    log.info("%s", next(iter(found.values())).bleu_signature)
    return final


def choose_checkpoint(cfg: DictConfig, trainer: Trainer, ckpt_dir: Path) -> Path:
    """best.pt, or the average of the last train.average_last checkpoints if it validates better (on
    train.best_metric). The trainer's model keeps its own weights."""
    best = ckpt_dir / "best.pt"
    steps = trainer.progress.last_kept[-cfg.train.average_last :] if cfg.train.average_last else []
    if len(steps) < 2:
        return best
    averaged = ckpt_dir / "averaged.pt"
    average_checkpoint_files([ckpt_dir / f"step{s}.pt" for s in steps], averaged)
    model, _, _ = load_for_inference(averaged)
    trained = {name: value.clone() for name, value in trainer.model.state_dict().items()}
    trainer.model.load_state_dict(model.state_dict())
    try:
        p = trainer.progress
        record = trainer.validator.run(p.step, p.epoch, p.elapsed)  # the averaged weights as loaded
    finally:
        trainer.model.load_state_dict(trained)
    metric = cfg.train.best_metric
    score = ranking_score(record, metric)
    log.info(
        "averaged steps %s: valid %s %.2f (best.pt %.2f)",
        steps,
        METRIC_NAMES[metric],
        shown(score, metric),
        shown(p.best_score, metric),
    )
    return averaged if score > p.best_score else best


def translate_command(out_dir: Path, data_cfg=None) -> str:
    """The command that translates with a run's model, as the user can type it here (paths relative to the
    working directory when below it), into its first target language where it has several."""

    def shown(path: Path) -> str:
        path = path.absolute()
        if not path.is_relative_to(Path.cwd()):
            return shlex.quote(str(path))
        relative = str(path.relative_to(Path.cwd()))
        return shlex.quote(relative if "/" in relative else f"./{relative}")  # a bare name: looked up on PATH

    command = Path(sys.executable).parent / "translate"  # beside the interpreter: the venv's bin/
    program = shown(command) if command.exists() else "translate"
    targets = language_list(data_cfg.tgt_lang) if data_cfg is not None else []
    into = f" --tgt-lang {targets[0]}" if len(targets) > 1 else ""
    return f"{program} -c {shown(out_dir)}{into} < input.txt > output.txt"


def note_several_sentences(held_out: list) -> None:
    """A warning for held-out lines of several sentences, which validation and the test score translate
    whole unless decode.split_sentences says otherwise: said before the run spends its budget."""
    for corpus in held_out:
        count = several_sentences(corpus.src)
        if count:
            note = several_sentences_note(count, len(corpus), corpus.origin, "decode.split_sentences=true")
            log.warning("data: %s", note.removeprefix("note: "))


def train_and_score(cfg: DictConfig, out_dir: Path, dist: Dist, device: torch.device) -> None:
    """Tokenizer, encoded data, model, training, then the test score of the final checkpoint."""
    if not dist.is_main:
        barrier(dist)  # rank 0 trains (or checks) the tokenizer first; the others then reuse it
    data = prepare(cfg, out_dir, write_config=dist.is_main)
    if dist.is_main:
        d = cfg.data
        if not cfg.decode.split_sentences:
            note_several_sentences([data.valid, *data.tests.values()])
        compared = sets_to_compare(d, data)
        if compared:
            data.held_out_in_training = check_held_out(
                data.train, compared, d.cache_dir, d.pool_pairs, drops_held_out(d)
            )
    if dist.is_main:  # with several ranks, rank 0 encodes every shard into the cache before the others read it
        train, valid = encode_splits(cfg, data, background=not dist.enabled)
        barrier(dist)
    else:
        train, valid = encode_splits(cfg, data, background=False)
    try:
        train_with(cfg, data, train, valid, out_dir, dist, device)
    finally:
        if hasattr(train, "close"):
            train.close()  # its helper processes; a run that ends before its encoder leaves the rest to the next


def train_with(cfg: DictConfig, data, train, valid, out_dir: Path, dist: Dist, device: torch.device) -> None:
    tok = data.tokenizer
    model = build_model(cfg.model, tok)
    if cfg.train.init_from:
        load_parent_weights(model, cfg)  # a resumed fine-tune then takes its own last.pt's
    n_params = sum(p.numel() for p in model.parameters())
    log.info(
        "model: %s, %.1fM parameters, run directory %s%s",
        cfg.model.arch,
        n_params / 1e6,
        out_dir,
        f", {dist.world} processes" if dist.enabled else "",
    )
    trainer = Trainer(cfg, model, tok, train, valid, data.valid, out_dir, device, dist)
    trainer.fit()
    if dist.is_main:
        chosen = choose_checkpoint(cfg, trainer, out_dir / "checkpoints")
        if chosen.exists():
            compared = sets_to_compare(cfg.data, data)
            overlaps = data.held_out_in_training or (compared and recorded(data.train, compared, cfg.data.cache_dir))
            finish(cfg, chosen, out_dir, trainer.validator, data.tests, device, trainer.progress.step, overlaps)
            log.info("to translate with it: %s", translate_command(out_dir, cfg.data))
