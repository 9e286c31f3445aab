"""`make train`: data -> tokenizer -> model -> training -> test-set BLEU, all in one run directory.

    mt-train experiment=smoke                          # or: make train ARGS="experiment=smoke"

Rerunning the same command on the same run directory resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig
from torch.utils.tensorboard import SummaryWriter

from mt.checkpoint import average_checkpoint_files, load_for_inference
from mt.config.model import build_model
from mt.config.schema import CONFIG_DIR, check_overrides, register_configs
from mt.data.batching import EncodedCorpus, cached_encode, encode_corpus
from mt.data.prepare import Prepared, exit_on_user_error, prepare, run_dir
from mt.data.subword_sampling import SampledSegmentations
from mt.decoding.translator import DecodeSettings, Translator
from mt.decoding.tuning import choose_alpha, store_alpha
from mt.errors import MTError, report_errors, take_debug_flag
from mt.fastpath import decode_precision, training_precision, tune_process
from mt.metrics import score
from mt.training.distributed import Dist, barrier, init_from_env, shutdown
from mt.training.run_lock import RunDirLock
from mt.training.trainer import Trainer
from mt.training.validation import Validator

log = logging.getLogger(__name__)


def pick_device(name: str, dist: Dist) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise MTError("train.device=cuda but no CUDA device is available")
    if name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", dist.local_rank)


def score_final(cfg: DictConfig, checkpoint: Path, out_dir: Path, valid: Validator, test, device, step: int) -> None:
    """Decode with the final checkpoint: choose its length penalty on valid (decode.alpha_candidates),
    then translate the test split once; write test.hyp, results.json and test/bleu, test/chrf at the
    last step to TensorBoard."""
    if test is None and not cfg.decode.alpha_candidates:
        return
    model, tokenizer, _ = load_for_inference([str(checkpoint)])
    settings = DecodeSettings.from_config(cfg.decode, precision=decode_precision(device, cfg.train.precision))
    sweep = []
    if cfg.decode.alpha_candidates:
        settings, sweep = choose_alpha(
            model, tokenizer, settings, cfg.decode.alpha_candidates, valid.sources, valid.references, device
        )
        store_alpha(checkpoint, settings.alpha)
    if test is None:
        return
    results = Translator(model, tokenizer, settings, device).translate(test.src, progress=True)
    hypotheses = [r[0].text for r in results]
    (out_dir / "test.hyp").write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    scores = score(hypotheses, test.tgt)
    summary = {
        "split": cfg.data.test_split,
        "checkpoint": checkpoint.name,
        "beam": settings.beam,
        "alpha": settings.alpha,
        **({"alpha_sweep_on_valid": sweep} if sweep else {}),
        **scores.as_dict(),
    }
    (out_dir / "results.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    with SummaryWriter(str(out_dir / "tb")) as writer:
        writer.add_scalar("test/bleu", scores.bleu, step)
        writer.add_scalar("test/chrf", scores.chrf, step)
    log.info(
        "test %s (%s, beam %d, alpha %g): BLEU %.2f | chrF %.2f",
        cfg.data.test_split,
        checkpoint.name,
        settings.beam,
        settings.alpha,
        scores.bleu,
        scores.chrf,
    )
    log.info("%s", scores.bleu_signature)


def final_checkpoint(cfg: DictConfig, trainer: Trainer, ckpt_dir: Path) -> Path:
    """best.pt, or the average of the last train.average_last checkpoints if its validation BLEU is higher."""
    best = ckpt_dir / "best.pt"
    steps = trainer.progress.last_kept[-cfg.train.average_last :] if cfg.train.average_last else []
    if len(steps) < 2:
        return best
    averaged = ckpt_dir / "averaged.pt"
    average_checkpoint_files([ckpt_dir / f"step{s}.pt" for s in steps], averaged)
    model, _, _ = load_for_inference([str(averaged)])
    trainer.model.load_state_dict(model.state_dict())
    bleu = trainer.validate(writer=None)["valid_bleu"]
    log.info("averaged steps %s: valid BLEU %.2f (best.pt %.2f)", steps, bleu, trainer.progress.best_bleu)
    return averaged if bleu > trainer.progress.best_bleu else best


def encode_splits(cfg: DictConfig, data: Prepared) -> tuple[EncodedCorpus | SampledSegmentations, EncodedCorpus]:
    """Training pairs encoded, filtered and cached (data.train's text is let go), or segmented anew
    each epoch (train.subword_sampling); and the validation pairs."""
    start, origin = time.perf_counter(), data.train.origin
    if cfg.train.subword_sampling:
        train = SampledSegmentations(
            data.tokenizer,
            data.train,
            cfg.train.subword_sampling,
            cfg.train.seed,
            cfg.data.max_len,
            cfg.data.max_len_ratio,
            workers=torch.get_num_threads(),  # the CPU share this run may use (train.threads, OMP_NUM_THREADS)
        )
        first, report = train.with_report(0)
        log.info(
            "train: epoch 0 sampled in %.1fs (%.1f target pieces per sentence)",
            time.perf_counter() - start,
            first.tgt_lens.mean(),
        )
        pairs = len(first)
    else:
        train, report = cached_encode(
            data.tokenizer, data.train, cfg.data.max_len, cfg.data.max_len_ratio, cfg.data.cache_dir
        )
        log.info("train: encoded in %.1fs", time.perf_counter() - start)
        data.train = None  # from here on the encoded arrays suffice: let the text go (GBs for WMT-size data)
        pairs = len(train)
    log.info("train filter: %s", report)
    if not pairs:
        raise MTError(f"{origin}: no training pairs left after filtering ({report})")
    valid, valid_report = encode_corpus(data.tokenizer, data.valid)
    if valid_report.empty:
        log.info("valid: %d pairs with an empty side are left out of the validation loss", valid_report.empty)
    return train, valid


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
@exit_on_user_error
def hydra_main(cfg: DictConfig) -> None:
    """Train a model as configured; rerunning on the same run directory resumes.
    Under torchrun, every process trains on its share of each update; rank 0 writes the files."""
    out_dir = run_dir()
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    dist = init_from_env(use_cuda=cfg.train.device != "cpu" and torch.cuda.is_available())
    if not dist.is_main:
        logging.getLogger().setLevel(logging.WARNING)  # one voice: rank 0's
    device = pick_device(cfg.train.device, dist)
    if cfg.train.precision == "fp16" and device.type != "cuda":
        raise MTError("train.precision=fp16 needs CUDA; on CPU use bf16 or fp32")
    precision = training_precision(device, cfg.train.precision)
    if precision != cfg.train.precision:
        log.warning(
            "train.precision=%s: this CPU has no native bf16 (AVX512-BF16, AMX), where bf16 runs many times "
            "slower than fp32: training in %s",
            cfg.train.precision,
            precision,
        )
        cfg.train.precision = precision
    tune_process(device, training=True)
    torch.manual_seed(cfg.train.seed)
    finished = False
    try:
        with RunDirLock(out_dir) if dist.is_main else contextlib.nullcontext():  # one process per run directory
            train_and_score(cfg, out_dir, dist, device)
        finished = True
    finally:
        shutdown(dist, finished)


def train_and_score(cfg: DictConfig, out_dir: Path, dist: Dist, device: torch.device) -> None:
    """Tokenizer, encoded data, model, training, then the test score of the final checkpoint."""
    if not dist.is_main:
        barrier(dist)  # rank 0 trains (or checks) the tokenizer first; the others then reuse it
    data = prepare(cfg, out_dir, write_config=dist.is_main)
    if dist.is_main:
        barrier(dist)
    tok = data.tokenizer
    train, valid = encode_splits(cfg, data)
    model = build_model(cfg.model, tok)
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
        final = final_checkpoint(cfg, trainer, out_dir / "checkpoints")
        if final.exists():
            score_final(cfg, final, out_dir, trainer.validator, data.test, device, trainer.progress.step)


@report_errors
def main() -> None:
    """mt-train (through mt.cli.commands, which answers --help first) and `python -m mt.train` (torchrun)."""
    take_debug_flag(sys.argv)
    register_configs()
    check_overrides(sys.argv[1:])
    hydra_main()


if __name__ == "__main__":
    main()
