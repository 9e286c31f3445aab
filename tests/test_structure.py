"""The seams a maintainer changes things at: the run-directory lock, per-architecture model options,
one decode-settings object, and console scripts that answer --help without importing torch."""

import os
import re
import socket
import subprocess
import sys
import textwrap

import pytest
from omegaconf import OmegaConf

from mt.config.model import RNNAttentionConfig, TransformerConfig, model_options
from mt.config.schema import check_overrides
from mt.decoding.settings import check_decode_section
from mt.decoding.translator import DecodeSettings
from mt.errors import MTError
from mt.training.run_lock import RunDirLock

from conftest import REPO, run_cli, tiny_trainer, train_tiny

# ---- the run-directory lock ------------------------------------------------------------------


def test_a_second_lock_on_a_run_directory_is_refused_naming_the_holder(tmp_path):
    with RunDirLock(tmp_path):
        with pytest.raises(MTError, match=f"in use by pid {os.getpid()} on {socket.gethostname()}"):
            RunDirLock(tmp_path).acquire()
    with RunDirLock(tmp_path):  # released: free again
        pass


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    (tmp_path / ".lock").write_text("pid 999999 on a-host-long-gone\n")
    with RunDirLock(tmp_path):
        assert (tmp_path / ".lock").read_text() == f"pid {os.getpid()} on {socket.gethostname()}\n"


def test_a_run_directory_that_cannot_be_made_is_one_line_before_anything_runs(tiny_corpus, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = train_tiny(tiny_corpus, blocker / "run", check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"error: run directory {blocker / 'run'}: {blocker} is a file, not a folder\n"


def test_mt_train_on_a_run_directory_in_use_exits_2_with_one_line(tiny_corpus, tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from mt.training.run_lock import RunDirLock
            with RunDirLock({str(tmp_path)!r}):
                print("locked", flush=True)
                time.sleep(120)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = train_tiny(tiny_corpus, tmp_path, "train.max_steps=2", check=False)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2
    output = result.stdout + result.stderr  # Hydra's log handler writes to stdout
    errors = [line for line in output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, output
    assert f"in use by pid {holder.pid} on {socket.gethostname()}" in errors[0]
    assert not (tmp_path / "checkpoints").exists()  # refused before any work


# ---- per-architecture model options ----------------------------------------------------------


@pytest.mark.parametrize(
    "preset, foreign, arch",
    [
        ("rnn_attention", "model.heads=16", "rnn_attention"),
        ("rnn_attention", "model.norm_first=true", "rnn_attention"),
        ("transformer_base", "model.rnn_cell=lstm", "transformer"),
        ("transformer_small", "model.attention=dot", "transformer"),
    ],
)
def test_an_option_of_another_architecture_is_an_error_naming_key_and_architecture(preset, foreign, arch):
    with pytest.raises(MTError) as err:
        check_overrides(["~experiment", f"model={preset}", foreign])
    message = str(err.value)
    assert "\n" not in message
    assert foreign.split("=")[0] in message and f"the {arch} architecture" in message


def test_each_architecture_has_its_own_defaults_and_checks():
    assert model_options({"arch": "rnn_attention"}) == RNNAttentionConfig()
    assert model_options({"arch": "transformer", "heads": 4, "d_model": 64}) == TransformerConfig(heads=4, d_model=64)
    with pytest.raises(MTError, match="model.heads: must divide model.d_model=64"):
        model_options({"arch": "transformer", "heads": 5, "d_model": 64})
    with pytest.raises(MTError, match="model.rnn_cell: must be gru or lstm"):
        model_options({"arch": "rnn_attention", "rnn_cell": "elman"})
    # a checkpoint's config from before the split held every option: another architecture's are dropped
    old = {"arch": "rnn_attention", "d_model": 64, "heads": 8, "ffn_dim": 2048, "rnn_cell": "lstm"}
    assert model_options(old, strict=False) == RNNAttentionConfig(d_model=64, rnn_cell="lstm")


@pytest.mark.parametrize(
    "override, said",
    [
        ("trian.lr=1e-3", "Key 'trian' not in 'Config'; did you mean train.lr?"),
        ("train.max_step=5", "not in 'TrainConfig'; did you mean train.max_steps?"),
        ("tokenizer.vocabsize=4000", "did you mean tokenizer.vocab_size?"),
        ("totally.unrelated=3", "Key 'totally' not in 'Config'"),
        ("+train.warmpu=100", "train.warmpu: no such setting, so a run would ignore it; did you mean train.warmup?"),
        ("+notes=abc", "notes: no such setting, so a run would ignore it"),
    ],
)
def test_a_setting_the_schema_lacks_is_refused_with_the_one_meant(override, said):
    """A misspelt key names the setting it resembles; one added with + (which Hydra accepts into any
    section) is refused rather than ignored."""
    with pytest.raises(MTError) as err:
        check_overrides([override])
    assert str(err.value).endswith(said) and "\n" not in str(err.value)
    if "did you mean" not in said:
        assert "did you mean" not in str(err.value)


def test_the_model_presets_validate():
    for preset in ("transformer_base", "transformer_small", "rnn_attention"):
        check_overrides(["~experiment", f"model={preset}"])


# ---- one decode-settings object --------------------------------------------------------------


def test_decode_settings_come_from_the_config_with_the_callers_choices_on_top():
    dc = OmegaConf.create(
        {"beam": 5, "alpha": 0.6, "max_len_a": 1.2, "max_len_b": 10, "batch_tokens": 900, "valid_beam": 1}
    )
    assert DecodeSettings.from_config(dc) == DecodeSettings(beam=5, batch_tokens=900)
    assert DecodeSettings.from_config(dc, beam=None, alpha=0.0, precision="bf16") == DecodeSettings(
        beam=5, alpha=0.0, batch_tokens=900, precision="bf16"
    )
    assert DecodeSettings.from_config(dc, beam=1, nbest=3).beam == 3  # n-best needs a beam that wide
    with pytest.raises(MTError, match="decode setting beam=0: must be >= 1"):  # not quietly greedy
        DecodeSettings.from_config(dc, beam=0)
    # a run's decode section, checked before it trains: named as the config key
    for key, value, said in (("topp", 1.5, r"decode.topp=1.5: must be in \(0, 1\]"), ("min_len", -1, "decode.min_len")):
        with pytest.raises(MTError, match=f"^config {said}"):
            check_decode_section(OmegaConf.merge(dc, {key: value}))
    check_decode_section(dc)


class RecordingWriter:
    """Stands in for TensorBoard's SummaryWriter: keeps what validation reports."""

    def __init__(self):
        self.images, self.scalars = {}, {}

    def add_scalar(self, tag, value, step):
        self.scalars[tag] = value

    def add_text(self, tag, text, step):
        pass

    def add_image(self, tag, image, step):
        self.images[tag] = image


@pytest.mark.parametrize("max_len_b", [2, 4])
def test_validation_heatmaps_decode_with_the_runs_decode_settings(tiny_corpus, tmp_path, max_len_b):
    """An untrained model writes until its length limit: the heatmaps' rows show which limit ruled."""
    trainer = tiny_trainer(tiny_corpus, tmp_path, "decode.max_len_a=0", f"decode.max_len_b={max_len_b}")
    writer = RecordingWriter()
    trainer.validate(writer)
    assert writer.images, "no heatmap written"
    for image in writer.images.values():
        target_rows = image.shape[1] // 8  # 8 pixels a cell; EOS has a row
        assert target_rows <= max_len_b + 1


# ---- console scripts -------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["translate", "evaluate", "score", "train", "tokenizer", "export", "serve", "info"])
def test_help_answers_without_importing_torch(entry):
    code = textwrap.dedent(f"""
        import sys
        sys.argv = ["{entry}", "--help"]
        from mt.cli import commands as cli
        try:
            cli.{entry}()
        except SystemExit as stop:
            assert stop.code in (0, None), stop.code
        assert "torch" not in sys.modules, "--help imported torch"
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage" in result.stdout.lower() or "override" in result.stdout.lower(), result.stdout[:500]


@pytest.mark.parametrize("command", ["translate", "evaluate", "score", "info", "export", "serve"])
def test_every_option_is_listed_under_what_it_is_for(command):
    """translate and mt-evaluate have some 30 and 20 options: each in a titled group of --help (help and
    --debug aside); every command takes --debug, and each example of its help parses."""
    from mt.cli import parsers

    parser = getattr(parsers, f"{command}_parser")()
    ungrouped = [a.option_strings[0] for a in parser._optionals._group_actions if a.dest not in ("help", "debug")]
    assert ungrouped == [] or command in ("score", "info", "export", "serve")  # fewer options stand in one list
    examples = parser.epilog.split("examples:\n")[1].splitlines()[:-1]
    assert examples
    for example in examples:
        args = re.split("[#<>]", example)[0].split()[1:]
        assert not parser.parse_args(args).debug  # a usage error exits: fails the test
        assert parser.parse_args([*args, "--debug"]).debug


def test_a_usage_error_is_one_line_naming_the_option_an_unknown_one_resembles(capsys):
    from mt.cli import parsers

    for argv, said in [
        (["-c", "m.pt", "--beem", "3"], "unrecognized arguments: --beem 3 (did you mean --beam?)"),
        (
            ["-c", "m.pt", "--no-repeat-ngrams=3"],
            "unrecognized arguments: --no-repeat-ngrams=3 (did you mean --no-repeat-ngram?)",
        ),
        (["-c", "m.pt", "--zzz"], "unrecognized arguments: --zzz (see translate --help)"),
        (["-c", "m.pt", "--alpha", "abc"], "argument --alpha: invalid float value: 'abc' (see translate --help)"),
        ([], "the following arguments are required: --checkpoint/-c (see translate --help)"),
    ]:
        with pytest.raises(SystemExit) as exited:
            parsers.translate_parser().parse_args(argv)
        assert exited.value.code == 2
        assert capsys.readouterr().err == f"translate: error: {said}\n"


def test_mt_train_help_gives_examples_the_presets_and_a_presets_config():
    """Hydra's stock help ("train is powered by Hydra") replaced by the toolkit's: what the command does, examples,
    the groups with their options, and the config of the preset asked for."""
    helped = run_cli("mt-train", "--help").stdout
    assert helped.startswith("mt-train: Hydra overrides in") and "  mt-train experiment=smoke " in helped
    presets = "finetune, multi30k_base, multi30k_cpu, multi30k_cpu_fp32, smoke, smoke_fp32, wmt14_en_de_base"
    assert f"experiment: {presets}" in helped
    assert "== Config of experiment=multi30k_base " in helped and "\nname: multi30k_base\n" in helped
    smoke = run_cli("mt-train", "experiment=smoke", "--help").stdout
    assert "== Config of experiment=smoke " in smoke and "\n  max_time: 480.0\n" in smoke
    assert run_cli("mt-tokenizer", "--help").stdout.startswith("mt-tokenizer: Hydra overrides in")
