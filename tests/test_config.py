"""Every shipped preset composes into a valid config (a typo in a key is an error here, not on a GPU)."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from mt.config.schema import CONFIG_DIR, register_configs
from mt.config.validation import validate
from mt.errors import MTError

EXPERIMENTS = sorted(p.stem for p in (Path(CONFIG_DIR) / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_presets_compose_and_validate(experiment):
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={experiment}"])
    if experiment == "finetune":  # it needs the model to start from
        with pytest.raises(MTError, match="train.init_from: is required"):
            validate(cfg)
        cfg.train.init_from = "runs/x/checkpoints/final.pt"
    validate(cfg)
    assert cfg.name == {"smoke_fp32": "smoke"}.get(experiment, experiment)  # smoke's fp32 form keeps its name


def test_wmt14_preset_is_the_papers_base_setup():
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["experiment=wmt14_en_de_base"])
    assert (cfg.model.encoder_layers, cfg.model.d_model, cfg.model.heads, cfg.model.ffn_dim) == (6, 512, 8, 2048)
    assert 24_000 <= cfg.train.max_tokens * cfg.train.update_freq * 8 <= 26_000  # per side, on 8 GPUs
    assert (cfg.train.warmup, cfg.train.max_steps, cfg.decode.beam, cfg.decode.alpha) == (4000, 100_000, 4, 0.6)
    assert (cfg.data.name, cfg.data.subset, cfg.train.average_last) == ("wmt/wmt14", "de-en", 5)


def test_bf16_weights_need_bf16_training():
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["train.bf16_weights=true", "train.precision=fp32"])
        with pytest.raises(MTError, match="train.bf16_weights: needs train.precision=bf16"):
            validate(cfg)
        validate(compose("config", overrides=["train.bf16_weights=true", "train.precision=bf16"]))
