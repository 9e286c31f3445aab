"""train.ema_decay: an exponential moving average of the weights is what validation, best.pt and stepN.pt
see, training goes on with the weights themselves, and resume keeps both exactly."""

import pytest
import torch

import mt.training.trainer as trainer_module
from mt.checkpoint import load_checkpoint
from mt.cli.info import as_text, describe
from mt.config.schema import check_overrides
from mt.errors import MTError
from mt.training.weight_average import WeightAverage

from conftest import tiny_trainer

COMMON = ["train.log_every=5", "train.valid_every=10", "train.save_every=10", "data.test_split=null"]


def parameters(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_the_average_moves_toward_each_update_and_ignores_a_skipped_one(tiny_corpus, tmp_path):
    trainer = tiny_trainer(tiny_corpus, tmp_path, "train.ema_decay=0.9")
    start = parameters(trainer.model)
    assert all(torch.equal(a, w) for a, w in zip(trainer.ema.average, start))
    for step in (1, 2):
        before = [a.clone() for a in trainer.ema.average]
        assert trainer.train_step()["finite"] and trainer.progress.step == step
        decay = min(0.9, (1 + step) / (10 + step))  # low at first: the initial weights are soon forgotten
        for average, old, weights in zip(trainer.ema.average, before, trainer.model.parameters()):
            torch.testing.assert_close(average, decay * old + (1 - decay) * weights.detach())
    assert any(not torch.equal(a, w) for a, w in zip(trainer.ema.average, trainer.model.parameters()))
    kept = [a.clone() for a in trainer.ema.average]
    real_loss = trainer.batch_loss
    trainer.batch_loss = lambda batch, net=None: tuple(x * float("nan") for x in real_loss(batch, net))
    assert not trainer.train_step()["finite"]
    assert all(torch.equal(a, k) for a, k in zip(trainer.ema.average, kept))


def test_validation_and_kept_checkpoints_hold_the_average_and_last_pt_the_weights(tiny_corpus, tmp_path):
    trainer = tiny_trainer(
        tiny_corpus, tmp_path, "train.ema_decay=0.95", "train.max_steps=20", "train.keep_last=2", *COMMON
    )  # validated at steps 10 and 20
    trainer.fit()
    weights = parameters(trainer.model)
    record = trainer.validate()
    assert all(torch.equal(w, p) for w, p in zip(weights, trainer.model.parameters()))  # put back after
    with trainer.ema.applied():
        assert trainer.validator.loss()[0] == pytest.approx(record["valid_loss"], abs=1e-4)
    assert trainer.validator.loss()[0] != pytest.approx(record["valid_loss"], abs=1e-4)
    names = [name for name, _ in trainer.model.named_parameters()]
    folder = tmp_path / "checkpoints"
    last = load_checkpoint(folder / "last.pt")
    for name, w, average in zip(names, weights, trainer.ema.average):
        assert torch.equal(last["model"][name], w)
        assert torch.equal(last["trainer"]["weight_average"]["average"][names.index(name)], average)
        assert torch.equal(load_checkpoint(folder / "step20.pt")["model"][name], average)
    kept = load_checkpoint(folder / "step10.pt")
    best = load_checkpoint(folder / "best.pt")
    best_step = best["trainer"]["progress"]["step"]
    assert best_step in (10, 20)
    expected = kept["model"] if best_step == 10 else load_checkpoint(folder / "step20.pt")["model"]
    assert all(torch.equal(best["model"][name], expected[name]) for name in names)
    tied = trainer.model.state_dict(keep_vars=True)
    shared = [(a, b) for a in tied for b in tied if a < b and tied[a] is tied[b]]
    assert shared  # the tiny model ties its embeddings: in the files they stay one tensor
    for a, b in shared:
        assert kept["model"][a].data_ptr() == kept["model"][b].data_ptr()
    said = {name: describe(folder / name)["origin"] for name in ("last.pt", "step10.pt")}
    assert said == {
        "last.pt": {"kind": "training", "resumable": True},
        "step10.pt": {**said["step10.pt"], "ema_decay": 0.95},
    }
    assert "weights: their moving average over updates (train.ema_decay 0.95)" in as_text(describe(folder / "best.pt"))


@pytest.mark.parametrize("path", ["eager", "graph"])
def test_a_run_with_an_average_resumes_exactly(tiny_corpus, tmp_path, monkeypatch, path):
    if path == "graph":  # the CUDA-graph path's calls, run eagerly off CUDA
        monkeypatch.setattr(trainer_module.fastpath, "cuda_graphs_off_because", lambda *args: None)
    options = ["train.ema_decay=0.9", "train.valid_every=1000", "train.save_every=1000", "data.test_split=null"]
    straight = tiny_trainer(tiny_corpus, tmp_path / "straight", "train.max_steps=24", *options)
    straight.fit()
    tiny_trainer(tiny_corpus, tmp_path / "resumed", "train.max_steps=11", *options).fit()
    resumed = tiny_trainer(tiny_corpus, tmp_path / "resumed", "train.max_steps=24", *options)
    assert resumed.fit().step == 24
    for a, b in zip(
        [*straight.model.parameters(), *straight.ema.average], [*resumed.model.parameters(), *resumed.ema.average]
    ):
        assert torch.equal(a, b)


def test_an_average_switched_on_at_resume_starts_from_the_weights(tiny_corpus, tmp_path, caplog):
    options = ["train.valid_every=1000", "train.save_every=1000", "data.test_split=null"]
    tiny_trainer(tiny_corpus, tmp_path, "train.max_steps=5", *options).fit()
    resumed = tiny_trainer(tiny_corpus, tmp_path, "train.max_steps=6", "train.ema_decay=0.9", *options)
    with caplog.at_level("INFO"):
        assert resumed.resume()
    assert "holds no weight average: it starts from the weights at this step" in caplog.text
    assert all(torch.equal(a, w) for a, w in zip(resumed.ema.average, resumed.model.parameters()))


def test_the_average_of_a_model_with_tied_weights_is_saved_tied():
    layer = torch.nn.Linear(3, 3)
    model = torch.nn.ModuleDict({"embed": torch.nn.Embedding(3, 3), "out": layer})
    model["out"].weight = model["embed"].weight
    ema = WeightAverage(model, 0.5)
    state = ema.model_state(model)
    assert set(state) == set(model.state_dict()) and state["embed.weight"] is state["out.weight"]


@pytest.mark.parametrize("decay", ["1.0", "-0.1"])
def test_a_decay_outside_0_1_is_one_line(tiny_corpus, decay):
    with pytest.raises(MTError, match=r"config train.ema_decay: must be in \[0, 1\)"):
        check_overrides(["data=files", f"data.dir={tiny_corpus}", f"train.ema_decay={decay}"])
