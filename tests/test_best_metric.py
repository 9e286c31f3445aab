"""train.best_metric: BLEU, chrF or perplexity ranks the checkpoints (best.pt, best_stepN.pt, final.pt), and
train.patience waits on it; checkpoints saved before it existed resume as ranked by BLEU."""

import json
import logging
import math
from types import SimpleNamespace

import pytest

from mt.checkpoint import load_checkpoint, training_summary
from mt.cli.info import as_text, describe
from mt.decoding.settings import DecodeSettings
from mt.decoding.tuning import choose_alpha
from mt.inference import load_for_inference
from mt.metrics import score
from mt.training import trainer as trainer_module
from mt.training.budget import Progress, ranking_score, stop_reason
from mt.training.reporting import validation_share_note
from mt.training.run_files import CheckpointKeeper

from conftest import tiny_trainer

# three validations on which BLEU, chrF and perplexity each prefer another step
RECORDS = [
    {"step": 10, "valid_bleu": 20.0, "valid_chrf": 40.0, "valid_ppl": 5.0},
    {"step": 20, "valid_bleu": 18.0, "valid_chrf": 45.0, "valid_ppl": 6.0},
    {"step": 30, "valid_bleu": 19.0, "valid_chrf": 41.0, "valid_ppl": 4.0},
]


@pytest.mark.parametrize(("metric", "best_step"), [("bleu", 10), ("chrf", 20), ("ppl", 30)])
def test_the_metric_chooses_the_best_and_the_kept_checkpoints(tmp_path, metric, best_step):
    saved = []
    keeper = CheckpointKeeper(tmp_path, SimpleNamespace(keep_best=2), lambda with_optimizer: None)
    keeper.save = lambda name, with_optimizer=True: saved.append((name, p.step))
    p = Progress(best_metric=metric)
    improved = []
    for record in RECORDS:
        p.step = record["step"]
        score = ranking_score(record, metric)
        improved.append(p.record_validation(score))
        keeper.keep_best(p, score)
    assert p.best_step == best_step and improved[0]
    assert [name for name, step in saved if step == best_step][0] == "best.pt"
    assert [step for _, step in p.best_kept][0] == best_step and len(p.best_kept) == 2
    assert p.bad_validations == sum(1 for r in RECORDS if r["step"] > best_step)
    tc = SimpleNamespace(max_steps=100, max_epochs=0, max_time=0, patience=p.bad_validations or 1, best_metric=metric)
    name = {"bleu": "BLEU", "chrf": "chrF", "ppl": "perplexity"}[metric]
    if p.bad_validations:
        assert (
            stop_reason(p, tc, False, None) == f"no better valid {name} in {tc.patience} validations (train.patience)"
        )


def test_a_run_ranked_by_perplexity_keeps_the_lowest_and_says_so(tiny_corpus, tmp_path):
    steps = ["train.max_steps=40", "train.valid_every=10", "train.save_every=10", "data.test_split=null"]
    trainer = tiny_trainer(tiny_corpus, tmp_path, "train.best_metric=ppl", *steps)
    trainer.fit()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    lowest = min(records, key=lambda r: r["valid_ppl"])  # the first of equals
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert best["trainer"]["progress"]["step"] == lowest["step"] == trainer.progress.best_step
    assert trainer.progress.best_score == -lowest["valid_ppl"]
    summary = training_summary(best)
    assert summary["best_metric"] == "ppl" and summary["best_value"] == lowest["valid_ppl"]
    said = as_text(describe(tmp_path / "checkpoints" / "best.pt"))
    assert f"best valid perplexity {lowest['valid_ppl']:.2f} at update {lowest['step']}" in said


def test_a_checkpoint_from_before_the_metric_resumes_ranked_by_bleu(caplog):
    old = {"step": 500, "best_bleu": 31.5, "best_step": 400, "best_kept": [[31.5, 400]]}
    p = Progress.from_saved(old)
    assert (p.best_metric, p.best_score, p.best_step) == ("bleu", 31.5, 400)
    assert p.rank_by("bleu") is None and p.best_score == 31.5
    said = p.rank_by("chrf")  # the run goes on ranked by another figure: its next validation is the best
    assert said == "train.best_metric is chrf, was bleu: the next validation starts the ranking anew"
    assert p.best_score == -math.inf and p.best_kept == [] and p.record_validation(10.0)
    final = {"trained": {"step": 500, "epoch": 3, "elapsed_s": 60.0, "best_bleu": 31.5, "best_step": 400}}
    assert training_summary(final)["best_metric"] == "bleu" and training_summary(final)["best_value"] == 31.5


def test_the_length_penalty_is_chosen_on_the_metric(trained_run, tiny_corpus):
    assert json.loads((trained_run / "results.json").read_text())["chosen_by"] == "bleu"
    model, tokenizer, _ = load_for_inference(trained_run / "checkpoints" / "final.pt")
    sources = (tiny_corpus / "valid.de").read_text().splitlines()[:40]
    references = (tiny_corpus / "valid.en").read_text().splitlines()[:40]
    for by in ("bleu", "chrf"):
        chosen, rows = choose_alpha(
            model,
            tokenizer,
            DecodeSettings(beam=3),
            [0.0, 1.0, 3.0],
            sources,
            lambda h: score(h, references),
            "cpu",
            by,
        )
        assert chosen.alpha == max(rows, key=lambda row: row[f"valid_{by}"])["alpha"]  # the first of equals


def test_a_run_says_once_where_validation_takes_much_of_its_time(tiny_corpus, tmp_path, monkeypatch, caplog):
    assert validation_share_note(5.0, 100.0, 1_000) is None  # 5% of the time: nothing to say
    assert validation_share_note(9.0, 1.0, 1_000) is None  # seconds, however large a share: not worth a word
    note = validation_share_note(40.0, 60.0, 20_000)
    assert note.startswith("validation took 40 s, 40% of the time since the last one (20,000 sentences decoded)")
    assert "data.valid_max_sentences=N" in note and "train.valid_every" in note
    asked = []  # the run's figures, with the threshold taken away: is each validation judged, and said once?

    def judged(seconds, trained, sentences):
        asked.append((seconds, trained, sentences))
        return "validation took long"

    monkeypatch.setattr(trainer_module, "validation_share_note", judged)
    steps = ["train.max_steps=6", "train.valid_every=2", "train.save_every=100", "data.test_split=null"]
    with caplog.at_level(logging.WARNING, logger="mt.training.trainer"):
        tiny_trainer(tiny_corpus, tmp_path, *steps).fit()
    assert [m for m in caplog.messages if m == "validation took long"] == ["validation took long"]
    assert len(asked) == 1 and asked[0][0] > 0 and asked[0][1] > 0 and asked[0][2] == 30  # valid's 30 sentences
