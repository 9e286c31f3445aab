"""Fine-tuning (train.init_from): the parent's weights, tokenizer and architecture; a fresh optimizer; one-line
refusals of options that contradict the parent; exact resume after SIGTERM."""

import json

import pytest
import torch
from hydra import compose, initialize_config_dir

from mt.checkpoint import load_checkpoint
from mt.config.model import build_model
from mt.config.schema import CONFIG_DIR, register_configs
from mt.data.batching import collate
from mt.data.order import DataOrder
from mt.data.prepare import encode_splits, prepare
from mt.data.tokenizer import PAD
from mt.errors import MTError
from mt.inference import load_for_inference
from mt.training import finetune
from mt.training.budget import Progress
from mt.training.finetune import inherit_parent, load_parent_weights
from mt.training.loss import label_smoothed_loss
from mt.training.trainer import Trainer

from conftest import cli_path, run_cli, sigterm_after, write_corpus

# Fine-tune settings small enough for a test; dropout off so that a step's loss is a pure function of weights.
FINETUNE = [
    "experiment=finetune",
    "train.max_tokens=600",
    "train.precision=fp32",
    "train.threads=1",
    "train.subword_sampling=0",
    "train.log_every=1",
    "data.cache_dir=null",
    "decode=greedy",
    "decode.alpha_candidates=[]",
    "model.dropout=0",
]


@pytest.fixture(scope="module")
def domain_corpus(tmp_path_factory):
    """Other sentences of the same toy language: a new domain for the tiny parent."""
    return write_corpus(tmp_path_factory.mktemp("domain"), {"train": 200, "valid": 20, "test": 20})


def finetune_args(parent, corpus, run_dir, *more):
    return [
        "data=files",
        f"data.dir={corpus}",
        f"hydra.run.dir={run_dir}",
        f"train.init_from={parent}",
        *FINETUNE,
        *more,
    ]


def test_the_first_update_starts_from_the_parents_loss(trained_run, domain_corpus, tmp_path):
    """The fine-tune's first update is taken at the parent's weights: its loss on its first batch is the
    parent's loss on that batch (and not a fresh model's)."""
    parent = trained_run / "checkpoints" / "final.pt"
    overrides = [o for o in finetune_args(parent, domain_corpus, tmp_path) if not o.startswith("hydra.")]
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    inherit_parent(cfg, overrides)
    data = prepare(cfg, tmp_path)
    train, valid = encode_splits(cfg, data)
    model = build_model(cfg.model, data.tokenizer)
    fresh = build_model(cfg.model, data.tokenizer)
    load_parent_weights(model, cfg)
    trainer = Trainer(cfg, model, data.tokenizer, train, valid, data.valid, tmp_path, torch.device("cpu"))

    pairs, indices = DataOrder(train, cfg.train.max_tokens, cfg.train.seed).take(Progress(), 1)[0]
    batch = collate(pairs, indices)
    tokens = int(pairs.tgt_lens[indices].sum() + len(indices))

    def loss_of(net):
        net.eval()
        with torch.no_grad():
            logits = net(batch.src, batch.tgt_in)
            return float(label_smoothed_loss(logits, batch.tgt_out, cfg.train.label_smoothing, pad_id=PAD)[0]) / tokens

    parents, _, _ = load_for_inference(parent)
    first = trainer.train_step()["loss"]
    assert first == pytest.approx(loss_of(parents), rel=1e-4)
    assert abs(first - loss_of(fresh)) > 0.5  # a model not started from the parent is far off
    assert trainer.progress.step == 1 and trainer.optimizer.state_dict()["state"][0]["step"] == 1  # fresh Adam


def test_a_finetune_takes_the_parents_tokenizer_and_architecture(trained_run, domain_corpus, tmp_path):
    parent = trained_run / "checkpoints" / "final.pt"
    run = tmp_path / "ft"
    result = run_cli("mt-train", *finetune_args(parent, domain_corpus, run, "model.dropout=0.2", "train.max_steps=3"))
    state = load_checkpoint(parent)
    assert (run / "tokenizer" / "spm.model").read_bytes() == state["tokenizer"]["src"]  # not trained anew
    assert "tokenizer: the parent's" in result.stdout and "training sentencepiece" not in result.stdout
    child = load_checkpoint(run / "checkpoints" / "last.pt")
    assert child["tokenizer"] == state["tokenizer"]
    theirs, mine = state["config"]["model"], child["config"]["model"]
    assert {k: v for k, v in mine.items() if k != "dropout"} == {k: v for k, v in theirs.items() if k != "dropout"}
    assert mine["dropout"] == 0.2  # regularisation may be set anew
    assert child["config"]["train"]["init_from"] == str(parent)
    assert child["trainer"]["progress"]["step"] == 3
    # the parent's own score on the new validation set comes first, at step 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["step"] == 0


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("model.d_model=32", "model.d_model=32 (the parent's: 64)"),
        ("model=rnn_attention", "model.arch=rnn_attention (the parent's: transformer)"),
        ("tokenizer.vocab_size=80", "tokenizer.vocab_size=80 (the parent's: 100)"),
    ],
)
def test_an_option_contradicting_the_parent_is_one_line_and_writes_nothing(
    trained_run, domain_corpus, tmp_path, option, named
):
    run = tmp_path / "ft"
    result = run_cli(
        "mt-train", *finetune_args(trained_run / "checkpoints" / "final.pt", domain_corpus, run, option), check=False
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and named in result.stderr and "keeps its parent's" in result.stderr
    assert not run.exists()


def test_finetune_without_a_parent_is_one_line(domain_corpus, tmp_path):
    result = run_cli("mt-train", "experiment=finetune", "data=files", f"data.dir={domain_corpus}", check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "train.init_from" in result.stderr
    missing = run_cli("mt-train", *finetune_args(tmp_path / "nope.pt", domain_corpus, tmp_path / "ft"), check=False)
    assert missing.returncode == 2 and "train.init_from: " in missing.stderr and "no such checkpoint" in missing.stderr


def test_a_parent_model_is_a_run_directorys_identity(trained_run, domain_corpus, tmp_path):
    """A run directory fine-tuned from one parent is not continued from another."""
    run = tmp_path / "ft"
    run_cli(
        "mt-train", *finetune_args(trained_run / "checkpoints" / "final.pt", domain_corpus, run, "train.max_steps=2")
    )
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    other = run_cli(
        "mt-train",
        *finetune_args(trained_run / "checkpoints" / "best.pt", domain_corpus, run, "train.max_steps=4"),
        check=False,
    )
    assert other.returncode == 2 and "train.init_from" in other.stderr
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_a_finetune_resumes_exactly_after_sigterm(trained_run, domain_corpus, tmp_path):
    parent = trained_run / "checkpoints" / "final.pt"
    common = ["train.max_steps=50", "train.save_every=1000", "train.valid_every=1000", "data.test_split=null"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    run_cli("mt-train", *finetune_args(parent, domain_corpus, straight, *common))
    sigterm_after(
        [cli_path("mt-train"), *finetune_args(parent, domain_corpus, stopped, *common)], stopped / "train.jsonl"
    )
    assert 15 <= load_checkpoint(stopped / "checkpoints" / "last.pt")["trainer"]["progress"]["step"] < 50
    run_cli("mt-train", *finetune_args(parent, domain_corpus, stopped, *common))
    a = load_checkpoint(straight / "checkpoints" / "last.pt")["model"]
    b = load_checkpoint(stopped / "checkpoints" / "last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_inherit_parent_names_what_it_cannot_read(tmp_path):
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=[f"train.init_from={tmp_path / 'x.pt'}"])
    (tmp_path / "x.pt").write_text("not a checkpoint")
    with pytest.raises(MTError, match=r"^train.init_from: .*x.pt: not a readable checkpoint"):
        inherit_parent(cfg, [])


@pytest.mark.parametrize(("given", "sampling"), [([], 0.0), (["train.subword_sampling=0.1"], 0.1)])
def test_a_bpe_parent_fine_tunes_without_sampling_unless_bpe_dropout_is_asked_for(
    trained_run, domain_corpus, monkeypatch, given, sampling
):
    """The preset's subword sampling is unigram sampling's setting; for a BPE parent it is turned off, and
    BPE-dropout runs only when train.subword_sampling is given."""
    real_parent = finetune.load_parent

    def bpe_parent(path):
        parent = real_parent(path)
        parent["config"]["tokenizer"]["type"] = "bpe"
        return parent

    monkeypatch.setattr(finetune, "load_parent", bpe_parent)
    overrides = [
        "experiment=finetune", "data=files", f"data.dir={domain_corpus}",
        f"train.init_from={trained_run / 'checkpoints' / 'final.pt'}", *given,
    ]  # fmt: skip
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    assert cfg.train.subword_sampling == 0.1  # the preset's
    inherit_parent(cfg, overrides)
    assert cfg.tokenizer.type == "bpe" and cfg.train.subword_sampling == sampling
