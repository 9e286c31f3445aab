"""What `make train` does with no arguments (the base model on a GPU, the CPU preset elsewhere, both on the
shipped Multi30k), where runs go by default, and the learning-rate cool-down that ends a budgeted run at rate 0."""

import json
from dataclasses import fields

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from mt.checkpoint import load_checkpoint
from mt.cli.hydra_task import choose_experiment
from mt.config.model import TransformerConfig
from mt.config.schema import CONFIG_DIR, REPO_DIR, register_configs, run_dir_of, to_dict
from mt.data.sources import load_split
from mt.fastpath.cpu_process import native_bf16
from mt.training.optim import cooldown_factor

from conftest import REPO, TINY_TRAIN, run_cli, tiny_trainer


def default_config(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_the_default_is_the_papers_base_model_on_the_shipped_multi30k():
    cfg = default_config()
    assert cfg.name == "multi30k_base"
    assert (
        cfg.model.encoder_layers,
        cfg.model.decoder_layers,
        cfg.model.d_model,
        cfg.model.heads,
        cfg.model.ffn_dim,
    ) == (6, 6, 512, 8, 2048)
    data = to_dict(cfg)["data"]  # as the run directory and checkpoints store it: an absolute path
    assert (data["source"], data["dir"]) == ("files", str(REPO_DIR / "data" / "multi30k"))
    assert (data["src_lang"], data["tgt_lang"], data["test_split"]) == ("de", "en", "test2016")
    hub = default_config("data=multi30k_hub")
    assert (hub.data.source, hub.data.name) == ("hub", "bentrevett/multi30k")


@pytest.mark.parametrize(("split", "lines"), [("train", 29_000), ("valid", 1_014), ("test2016", 1_000)])
def test_shipped_multi30k_loads_whole(split, lines):
    corpus = load_split(default_config().data, split)
    assert len(corpus) == lines
    assert corpus.src[0].startswith(("Zwei", "Eine", "Ein", "Mehrere")) and corpus.tgt[0][0].isupper()


def test_mt_train_with_no_arguments_picks_the_cpu_preset_here_and_says_so(tmp_path):
    """What the README's `make train` runs on a machine without CUDA, cut to two updates: the CPU preset for
    this CPU (bf16 where it has native bf16, else fp32), chosen and explained in the run's first log lines."""
    bf16_preset, fp32_preset = (
        ("multi30k_cpu", "(no CUDA GPU here", 256),
        ("multi30k_cpu_fp32", "(no CUDA GPU and no native", 192),
    )
    preset, said, width = bf16_preset if native_bf16() else fp32_preset
    run = tmp_path / "default"
    run_cli(
        "mt-train",
        f"hydra.run.dir={run}",
        "train.max_steps=2",
        "train.log_every=1",
        "data.valid_max_sentences=4",
        "decode.max_len_b=2",
        "decode.alpha_candidates=[]",
        "data.test_split=null",
        "data.cache_dir=null",
        "tokenizer.vocab_size=2000",
        "train.subword_sampling=0",
        timeout=900,
    )
    records = [json.loads(line) for line in (run / "train.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2] and all(r["loss"] > 0 for r in records)
    saved = (run / "config.yaml").read_text()
    assert f"name: {preset}\n" in saved and f"d_model: {width}\n" in saved and str(REPO / "data" / "multi30k") in saved
    # Every option of the architecture is written out, defaults included, so the file still says what was
    # trained after a default changes (the preset leaves init and attention_dropout to the schema).
    model = OmegaConf.load(run / "config.yaml").model
    assert (model.arch, model.init, model.attention_dropout, model.norm_first) == ("transformer", "fairseq", 0.0, True)
    assert all(model[f.name] is not None for f in fields(TransformerConfig))
    assert load_checkpoint(run / "checkpoints" / "last.pt")["config"]["model"] == OmegaConf.to_container(model)
    first = (run / "train.log").read_text().splitlines()[0]
    assert f"experiment={preset} {said}" in first and "add experiment=multi30k_base" in first


@pytest.mark.parametrize(
    ("argv", "cuda", "bf16", "chosen", "other"),
    [
        ([], True, True, "multi30k_base", "multi30k_cpu"),
        ([], True, False, "multi30k_base", "multi30k_cpu_fp32"),
        ([], False, True, "multi30k_cpu", "multi30k_base"),
        ([], False, False, "multi30k_cpu_fp32", "multi30k_base"),
        (["train.device=cpu"], True, True, "multi30k_cpu", "multi30k_base"),
        (["train.device=cpu"], True, False, "multi30k_cpu_fp32", "multi30k_base"),
        (["name=x", "train.max_steps=5"], True, False, "multi30k_base", "multi30k_cpu_fp32"),
    ],
)
def test_the_preset_follows_the_machine_unless_one_is_named(argv, cuda, bf16, chosen, other):
    used, message = choose_experiment(argv, cuda, bf16)
    assert used == [f"experiment={chosen}", *argv] and message.startswith(f"experiment={chosen} (")
    assert message.endswith(f'add experiment={other} (make train ARGS="experiment={other}")')
    for named in (["experiment=wmt14_en_de_base"], ["~experiment"], ["+experiment=smoke"], ["--cfg", "job"]):
        assert choose_experiment(argv + named, cuda, bf16) == (argv + named, None)
    named = ["experiment=smoke"]  # kept, except on a CPU without native bf16 (next test)
    kept = bf16 or (cuda and "train.device=cpu" not in argv)
    assert (choose_experiment(argv + named, cuda, bf16) == (argv + named, None)) == kept


@pytest.mark.parametrize(("named", "form"), [("smoke", "smoke_fp32"), ("multi30k_cpu", "multi30k_cpu_fp32")])
def test_a_bf16_cpu_preset_named_on_a_cpu_without_native_bf16_trains_its_fp32_form(named, form):
    argv = ["data.src_lang=en", f"experiment={named}", "train.max_time=60"]
    used, message = choose_experiment(argv, cuda=False, native_bf16=False)
    assert used == ["data.src_lang=en", f"experiment={form}", "train.max_time=60"]
    assert message.startswith(f"experiment={named}: this CPU has no native bf16") and f"experiment={form}" in message
    assert message.endswith("add train.precision=fp32")
    for kept in (argv + ["train.precision=fp32"], argv + ["train.precision=bf16"]):
        assert choose_experiment(kept, cuda=False, native_bf16=False) == (kept, None)
    assert choose_experiment(argv, cuda=True, native_bf16=False) == (argv, None)  # on the GPU
    assert choose_experiment(argv + ["train.device=cpu"], cuda=True, native_bf16=False)[1] is not None


def test_the_fp32_cpu_preset_is_the_cpu_preset_sized_for_fewer_tokens():
    bf16, fp32 = default_config("experiment=multi30k_cpu"), default_config("experiment=multi30k_cpu_fp32")
    assert (bf16.name, fp32.name) == ("multi30k_cpu", "multi30k_cpu_fp32")
    assert (bf16.train.precision, fp32.train.precision) == ("bf16", "fp32")
    narrower = {"dropout": 0.2, "d_model": 192, "ffn_dim": 768}
    assert to_dict(fp32)["model"] == {**to_dict(bf16)["model"], **narrower} and fp32.tokenizer == bf16.tokenizer
    assert fp32.train.max_time == bf16.train.max_time + 180 and fp32.train.max_tokens < bf16.train.max_tokens // 2


def test_the_fp32_smoke_is_smoke_sized_for_fp32_under_smokes_name():
    bf16, fp32 = default_config("experiment=smoke"), default_config("experiment=smoke_fp32")
    assert bf16.name == fp32.name == "smoke" and fp32.train.max_time == bf16.train.max_time
    assert (bf16.train.precision, fp32.train.precision) == ("bf16", "fp32")
    cpu_fp32 = default_config("experiment=multi30k_cpu_fp32")
    assert (fp32.model.d_model, fp32.model.ffn_dim) == (cpu_fp32.model.d_model, cpu_fp32.model.ffn_dim)
    assert fp32.train.max_tokens == cpu_fp32.train.max_tokens and fp32.tokenizer == bf16.tokenizer


def test_the_default_run_directory_names_the_corpus_and_the_preset(tmp_path):
    register_configs()
    assert run_dir_of(["experiment=multi30k_cpu"]) == "runs/multi30k.de-en/multi30k_cpu"
    mine = ["experiment=smoke", "data=files", f"data.dir={tmp_path}/my corpus/", "data.src_lang=fr"]
    assert run_dir_of(mine) == "runs/my_corpus.fr-en/smoke"
    assert run_dir_of(["experiment=smoke", "data=hub", "data.name=org/news"]) == "runs/news.de-en/smoke"


def test_cooldown_factor_falls_linearly_to_zero_over_the_last_share():
    assert cooldown_factor(0.5, 0.0) == cooldown_factor(1.0, 0.0) == 1.0  # off
    assert cooldown_factor(0.0, 0.3) == cooldown_factor(0.7, 0.3) == 1.0
    assert cooldown_factor(0.85, 0.3) == pytest.approx(0.5)
    assert cooldown_factor(1.0, 0.3) == 0.0 and cooldown_factor(1.2, 0.3) == 0.0


def test_budget_used_is_the_share_of_whichever_budget_ends_first(tiny_corpus, tmp_path):
    trainer = tiny_trainer(tiny_corpus, tmp_path, "train.max_steps=1000", "train.max_time=100")
    trainer.progress.step, trainer.progress.elapsed = 100, 50.0
    assert trainer.budget_used() == pytest.approx(0.5)  # time binds
    trainer.progress.step = 800
    assert trainer.budget_used() == pytest.approx(0.8)  # steps bind
    trainer.tc.max_time = 0
    trainer.progress.step = 2000
    assert trainer.budget_used() == 1.0


def test_a_cooled_down_run_ends_at_rate_zero_and_says_how_long_it_takes(tiny_corpus, tmp_path):
    run = tmp_path / "cooled"
    run_cli(
        "mt-train",
        "data=files",
        f"data.dir={tiny_corpus}",
        f"hydra.run.dir={run}",
        *TINY_TRAIN,
        "train.max_steps=40",
        "train.cooldown=0.5",
        "train.log_every=1",
        "data.test_split=null",
    )
    lrs = [json.loads(line)["lr"] for line in (run / "train.jsonl").read_text().splitlines()]
    # TINY_TRAIN: peak 3e-3 at warmup 40. Update s runs with s/40 of the peak, and from the middle of the
    # 40-update budget on, times the share of the cool-down left: (40 - (s - 1)) / 20.
    expected = [3e-3 * s / 40 * min(1.0, (41 - s) / 20) for s in range(1, 41)]
    assert lrs == pytest.approx(expected, rel=1e-9)
    assert "updates left will take about" in (run / "train.log").read_text()
