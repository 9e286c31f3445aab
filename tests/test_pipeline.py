"""End to end through the real entry points: mt-train, translate, mt-evaluate."""

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from mt.checkpoint import load_checkpoint
from mt.config.schema import check_overrides
from mt.data.lines import read_lines
from mt.errors import MTError, StoppedAfter

from conftest import REPO, TINY_TRAIN, cli_path, run_cli, train_tiny, write_corpus


def test_run_directory_holds_what_the_readme_promises(trained_run):
    assert (trained_run / "checkpoints" / "best.pt").is_file()
    assert (trained_run / "checkpoints" / "last.pt").is_file()
    assert list((trained_run / "tb").glob("events.out.tfevents.*"))
    assert (trained_run / "tokenizer" / "spm.model").is_file()
    assert (trained_run / "config.yaml").is_file()
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [100, 200, 300]
    assert {"step", "valid_loss", "valid_bleu", "valid_chrf"} <= records[0].keys()
    train_log = [json.loads(line) for line in (trained_run / "train.jsonl").read_text().splitlines()]
    assert {"step", "loss", "lr", "grad_norm", "tgt_tokens_per_s", "peak_mem_mib"} <= train_log[0].keys()
    assert 100 < train_log[-1]["peak_mem_mib"] < 64 * 1024
    assert train_log[-1]["loss"] < train_log[0]["loss"]
    # The tiny model learns its word-for-word lexicon.
    assert records[-1]["valid_bleu"] > 60, records
    results = json.loads((trained_run / "results.json").read_text())
    assert results["bleu"] > 60 and "tok:13a" in results["bleu_signature"]
    # the held-out splits checked against the training pairs (the tiny corpus's short pairs recur), said and kept
    assert "held out: " in (trained_run / "train.log").read_text()
    shared = results["held_out_in_training"]
    assert set(shared) == {"valid", "test"} and shared["test"]["pairs"] == 30
    assert all(0 <= s["in_training"] + s["source_only"] <= s["pairs"] for s in shared.values())


def test_tensorboard_lists_the_runs_settings_beside_its_scores(trained_run):
    """TensorBoard's HParams tab: the run's main settings and those its command line set, and the scalars
    (valid and test scores) to show beside them."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    found, scalars = {}, {}
    for path in sorted((trained_run / "tb").glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(value.tensor.float_val[:1] or [value.simple_value])
                if value.metadata.plugin_data.plugin_name == "hparams":
                    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    found[data.WhichOneof("data")] = data
    assert set(found) == {"experiment", "session_start_info", "session_end_info"}
    metrics = [m.name.tag for m in found["experiment"].experiment.metric_infos]
    assert metrics == ["valid/best_bleu", "valid/bleu", "valid/chrf", "valid/loss", "test/bleu", "test/chrf"]
    assert set(metrics) <= set(scalars)  # each one a curve the run wrote
    # the table shows each curve's last value: the best validation's is the best so far, where valid/bleu's is the last
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    best_so_far = [max(r["valid_bleu"] for r in records[: i + 1]) for i in range(len(records))]
    assert [v[0] for v in scalars["valid/best_bleu"]] == pytest.approx(best_so_far, abs=1e-4)
    settings = found["session_start_info"].session_start_info.hparams
    assert settings["train.max_steps"].number_value == 300  # set on its command line
    assert settings["model"].string_value == "transformer_small"  # a group chosen there
    assert settings["model.d_model"].number_value == 64 and settings["train.precision"].string_value == "fp32"
    assert settings["model.arch"].string_value == "transformer"  # a main setting, given or not
    assert "experiment" not in settings  # ~experiment: deleted, not a value


def test_translate_keeps_line_alignment(trained_run, tmp_path):
    lines = [
        "ein hund läuft",
        "",
        "eine katze schläft hier",
        "   ",
        "ein mann\rsitzt",
        "klein\u2028rot",
        "",
        "rot\u2029blau",
        "hund\x0ckatze",
        "nul\x00byte",
        "tab\there",
        "zero\u200bwidth",
        "no\u00a0break",
        "\ufeffbom mid-file",
        "\x85next line",
        "ein " * 400,
    ]
    source = tmp_path / "in.de"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = run_cli(
        "translate", "--checkpoint", str(trained_run / "checkpoints" / "best.pt"), "--input", str(source), "--beam", "3"
    )
    output_lines = out.stdout.split("\n")
    assert output_lines[-1] == "" and len(output_lines) - 1 == len(lines)
    assert output_lines[0] == "a dog runs"
    assert output_lines[1] == "" and output_lines[6] == ""
    # stdin, greedy, a last line without a newline still counts
    out = run_cli(
        "translate",
        "-c",
        str(trained_run / "checkpoints" / "best.pt"),
        "--beam",
        "1",
        input_text="ein hund läuft\n\nein kind",
    )
    assert out.stdout == "a dog runs\n\na child\n"


def test_translate_streams_in_chunks_with_the_same_output(trained_run, tiny_corpus, tmp_path):
    """Chunks of 3 lines give what one chunk gives: order, empty lines, n-best line numbers, heatmap names."""
    best = str(trained_run / "checkpoints" / "best.pt")
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:10]
    lines[2:2], lines[7:7] = ["", ""], ["\ufeffbom", ""]
    source = tmp_path / "in.de"
    source.write_bytes(("\ufeff" + "".join(x + "\n" for x in lines)).encode())  # a BOM at the start is no text
    outputs = {}
    for size in ("3", "100000"):
        args = ["--input", str(source), "--beam", "2", "--chunk-lines", size]
        whole = run_cli("translate", "-c", best, *args, "--attention-dir", str(tmp_path / size)).stdout
        nbest = run_cli("translate", "-c", best, *args, "--nbest", "2").stdout
        outputs[size] = (whole, nbest, sorted(p.name for p in (tmp_path / size).iterdir()))
    whole, nbest, heatmaps = outputs["3"]
    assert outputs["3"] == outputs["100000"]
    assert whole.count("\n") == len(lines) and whole.split("\n")[2:4] == ["", ""]
    assert [row.split("\t")[0] for row in nbest.splitlines()] == [str(i) for i in range(len(lines)) for _ in "ab"]
    assert "000011.svg" in heatmaps and "000002.svg" not in heatmaps  # named by line; empty lines have none
    packed = tmp_path / "out.en.gz"  # written compressed, as its name says
    run_cli("translate", "-c", best, "--input", str(source), "--beam", "2", "--chunk-lines", "3", "-o", str(packed))
    assert gzip.decompress(packed.read_bytes()).decode() == whole


def test_translate_keeps_what_it_wrote_before_a_bad_line(trained_run, tmp_path):
    """Streaming: a bad byte in a later chunk stops with its line number; the chunks before it are written."""
    source, out = tmp_path / "in.de", tmp_path / "out.en"
    source.write_bytes(b"ein hund\nein kind\nrot\nblau\nein \xff mann\nhund\n")
    best = str(trained_run / "checkpoints" / "best.pt")
    result = run_cli("translate", "-c", best, "-i", str(source), "-o", str(out), "--chunk-lines", "2", check=False)
    assert result.returncode == 2 and result.stderr.strip() == f"error: {source}:5: invalid UTF-8 (byte 0xff)"
    assert out.read_text(encoding="utf-8").count("\n") == 4
    early = run_cli("translate", "-c", best, "-i", str(source), "-o", str(tmp_path / "x.en"), check=False)
    assert early.returncode == 2 and not (tmp_path / "x.en").exists()  # in the first chunk: nothing is written


def test_several_checkpoints_are_averaged_on_load(trained_run, tmp_path):
    ckpts = trained_run / "checkpoints"
    out = run_cli("translate", "-c", str(ckpts / "best.pt"), str(ckpts / "last.pt"), input_text="ein hund läuft\n")
    assert out.stdout == "a dog runs\n"
    result = run_cli(
        "translate", "-c", str(ckpts / "best.pt"), str(tmp_path / "nope.pt"), check=False, input_text="x\n"
    )
    assert result.returncode == 2 and "nope.pt: no such checkpoint" in result.stderr


def test_a_run_directory_stands_for_its_model(trained_run, tmp_path):
    """`-c RUN` decodes with the run's final.pt; a run that has not ended gives its best.pt and says so in one
    warning line; a folder that is neither is one error line."""
    lines = "ein hund läuft\nrot\n"
    final = run_cli("translate", "-c", str(trained_run / "checkpoints" / "final.pt"), "-q", input_text=lines)
    assert run_cli("translate", "-c", str(trained_run), "-q", input_text=lines).stdout == final.stdout
    assert run_cli("translate", "-c", str(trained_run / "checkpoints"), "-q", input_text=lines).stdout == final.stdout
    unfinished = tmp_path / "unfinished"
    (unfinished / "checkpoints").mkdir(parents=True)
    shutil.copy(trained_run / "checkpoints" / "best.pt", unfinished / "checkpoints" / "best.pt")
    best = run_cli("translate", "-c", str(trained_run / "checkpoints" / "best.pt"), "-q", input_text=lines)
    result = run_cli("translate", "-c", str(unfinished), "-q", input_text=lines)
    assert result.stdout == best.stdout
    said = f"{unfinished}: the run has not ended (no checkpoints/final.pt); its best so far: {unfinished}/checkpoints"
    assert result.stderr == f"warning: {said}/best.pt\n"
    result = run_cli("mt-evaluate", "-c", str(tmp_path), check=False)
    assert result.returncode == 2 and result.stderr == (
        f"error: {tmp_path}: is a directory, expected a checkpoint file or a run directory with checkpoints/final.pt\n"
    )
    (unfinished / "checkpoints" / "best.pt").rename(unfinished / "checkpoints" / "last.pt")  # no validation yet
    result = run_cli("translate", "-c", str(unfinished), input_text=lines, check=False)
    assert result.returncode == 2 and result.stderr == (
        f"error: {unfinished}: no checkpoints/final.pt or best.pt; "
        "name one of its checkpoint files (checkpoints/last.pt)\n"
    )


def test_translate_nbest_format(trained_run):
    out = run_cli(
        "translate",
        "-c",
        str(trained_run / "checkpoints" / "best.pt"),
        "--beam",
        "4",
        "--nbest",
        "3",
        input_text="ein hund läuft\nrot\n",
    )
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [(str(i), str(k)) for i in range(2) for k in range(3)]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    assert rows[0][3] == "a dog runs"


def test_translate_errors_are_one_line(trained_run, tmp_path):
    result = run_cli("translate", "-c", str(tmp_path / "missing.pt"), check=False, input_text="x\n")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "missing.pt: no such checkpoint" in result.stderr
    foreign = tmp_path / "foreign.pt"
    foreign.write_bytes(b"not a checkpoint at all")
    result = run_cli("translate", "-c", str(foreign), check=False, input_text="x\n")
    assert result.returncode == 2 and "not a readable checkpoint (not a file torch.save wrote)" in result.stderr
    bad = tmp_path / "bad.de"
    bad.write_bytes(b"ein hund\nein \xff kind\n")
    result = run_cli("translate", "-c", str(trained_run / "checkpoints" / "best.pt"), "-i", str(bad), check=False)
    assert result.returncode == 2 and "bad.de:2: invalid UTF-8" in result.stderr
    for flag, value, least in [("--alpha", "-1", 0), ("--max-len-a", "-1", 0), ("--max-len-b", "0", 1),
                               ("--batch-tokens", "0", 1), ("--max-src-len", "0", 1)]:  # fmt: skip
        result = run_cli("translate", "-c", str(trained_run / "checkpoints" / "best.pt"), flag, value, check=False,
                         input_text="ein hund\n")  # fmt: skip
        assert result.returncode == 2 and result.stderr.strip() == f"error: {flag} must be >= {least}"
    result = run_cli("mt-evaluate", "-c", str(trained_run / "checkpoints" / "best.pt"), "--split", "test",
                     "--alpha", "1", "-1", check=False)  # fmt: skip
    assert result.returncode == 2 and result.stderr.strip() == "error: --alpha must be >= 0"


@pytest.mark.parametrize(
    "command", [["translate"], ["mt-evaluate", "--split", "test"], ["mt-export", "-o", "export"], ["mt-serve"]]
)
def test_every_command_shows_the_traceback_with_debug_and_one_line_without(command, tmp_path):
    command = [str(tmp_path / arg) if arg == "export" else arg for arg in command]
    missing = ["-c", str(tmp_path / "missing.pt")]
    plain = run_cli(*command, *missing, check=False, input_text="x\n")
    assert plain.returncode == 2 and plain.stderr.strip().startswith("error: ") and "Traceback" not in plain.stderr
    debug = run_cli(*command, *missing, "--debug", check=False, input_text="x\n")
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "missing.pt" in debug.stderr


def test_an_output_that_cannot_be_written_is_one_line_before_any_decoding(trained_run, tiny_corpus, tmp_path):
    """A missing folder, a folder in the file's place, or a file the command reads (under any name; a run
    directory stands for its checkpoints, a split for its files) is refused before any decoding; a full disk
    while writing names the output; mt-evaluate checks --output and --json before it decodes."""
    best = str(trained_run / "checkpoints" / "best.pt")
    for flag, path, said in [
        ("-o", tmp_path / "no" / "out.en", f"--output {tmp_path / 'no' / 'out.en'}: the folder {tmp_path / 'no'} does"),
        ("-o", tmp_path, f"--output {tmp_path}: is a directory, expected a file to write"),
    ]:
        result = run_cli("translate", "-c", best, flag, str(path), check=False, input_text="ein hund\n")
        assert result.returncode == 2 and result.stderr.startswith(f"error: {said}"), result.stderr
        assert result.stderr.count("\n") == 1
    for flag in ("--output", "--json"):
        result = run_cli("mt-evaluate", "-c", best, "--split", "test", flag, str(tmp_path / "no" / "x"), check=False)
        assert result.returncode == 2 and result.stderr.startswith(f"error: {flag} {tmp_path / 'no' / 'x'}: the folder")
        assert "BLEU" not in result.stdout  # refused before decoding
    text = tmp_path / "text.de"
    text.write_text("ein hund\n" * 3000)  # more than a chunk: writing into it would empty it before it is read
    alias = tmp_path / "alias.de"
    alias.symlink_to(text)
    reference = tiny_corpus / "test.en"
    references = reference.read_text()
    choosing = ["--src", str(text), "--ref", str(text), "--choose-on", "test", "--alpha", "0", "1"]
    for command, said in [
        (["translate", "-c", best, "-i", str(text), "-o", str(alias)], f"--output {alias}: is the --input file too"),
        (["mt-score", "-c", best, "--src", str(text), "--tgt", str(text), "-o", str(text)], "is the --src file too"),
        (["mt-evaluate", "--hyp", str(text), "--ref", str(text), "--json", str(alias)], "is the --ref file too"),
        (["translate", "-c", best, "-i", str(text), "-o", best], f"--output {best}: is the --checkpoint file too"),
        (["translate", "-c", str(trained_run), "-i", str(text), "-o", best], "is the --checkpoint file too"),
        (["mt-evaluate", "-c", best, "--split", "test", "-o", str(reference)], "is the --split test file too"),
        (["mt-evaluate", "-c", best, *choosing, "--json", str(reference)], "is the --split test file too"),
    ]:
        result = run_cli(*command, check=False)
        assert result.returncode == 2 and result.stderr.startswith("error: ") and said in result.stderr, result.stderr
        assert "BLEU" not in result.stdout  # refused before decoding
    assert text.read_text() == "ein hund\n" * 3000 and Path(best).stat().st_size > 1000
    assert reference.read_text() == references
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = run_cli("translate", "-c", best, "--attention-dir", str(blocker / "maps"), check=False, input_text="x\n")
    assert result.returncode == 2 and result.stderr == f"error: {blocker / 'maps'}: Not a directory\n"  # any OSError
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            result = subprocess.run([cli_path("translate"), "-c", best, "-q"], input="ein hund\n", stdout=full,
                                    stderr=subprocess.PIPE, text=True, cwd=REPO)  # fmt: skip
        assert result.returncode == 2 and result.stderr == "error: <stdout>: writing failed (No space left on device)\n"


def test_evaluate_prints_bleu_chrf_and_signature(trained_run):
    out = run_cli("mt-evaluate", "-c", str(trained_run / "checkpoints" / "best.pt"), "--split", "test")
    assert "BLEU" in out.stdout and "chrF" in out.stdout and "nrefs:1|case:mixed" in out.stdout


def test_evaluate_refuses_files_of_different_lengths_before_decoding(trained_run, tiny_corpus, tmp_path):
    best_pt = str(trained_run / "checkpoints" / "best.pt")
    source = tiny_corpus / "test.de"
    short_ref = tmp_path / "short.en"
    short_ref.write_text("".join(line + "\n" for line in (tiny_corpus / "test.en").read_text().splitlines()[:-1]))
    for args in (["-c", best_pt, "--src", str(source)], ["--hyp", str(source)]):
        result = run_cli("mt-evaluate", *args, "--ref", str(short_ref), check=False)
        assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
        assert f"{args[-2]} {source} has 30 lines but --ref {short_ref} has 29" in result.stderr


def test_evaluate_sweeps_decoding_settings_with_one_model_load(trained_run, tiny_corpus, tmp_path):
    best_pt = str(trained_run / "checkpoints" / "best.pt")
    # Two test lines to a line: longer than any training pair, so the model is unsure; and alpha 8 against 0,
    # a length penalty that makes beam search prefer long outputs: the settings matter on any host's arithmetic.
    for lang in ("de", "en"):
        lines = (tiny_corpus / f"test.{lang}").read_text().splitlines()
        (tmp_path / f"pairs.{lang}").write_text("".join(f"{a} {b}\n" for a, b in zip(lines, lines[1:] + lines[:1])))
    src, ref = str(tmp_path / "pairs.de"), str(tmp_path / "pairs.en")
    sweep = run_cli("mt-evaluate", "-c", best_pt, "--src", src, "--ref", ref, "--beam", "1", "4", "--alpha", "0", "8",
                    "--json", str(tmp_path / "sweep.json"))  # fmt: skip
    rows = json.loads((tmp_path / "sweep.json").read_text())
    assert [(r["beam"], r["alpha"]) for r in rows] == [(1, 0), (1, 8), (4, 0), (4, 8)]
    assert sweep.stdout.count("BLEU = ") == 4 and "(beam 4, alpha 8)" in sweep.stdout
    hyps = []
    for row in (rows[0], rows[3]):  # each row scores what translate gives with its settings
        hyps.append(str(tmp_path / f"beam{row['beam']}.en"))
        run_cli("translate", "-c", best_pt, "-i", src, "-o", hyps[-1], "-q",
                "--beam", str(row["beam"]), "--alpha", str(row["alpha"]))  # fmt: skip
    # scored from the files, the second against the first by paired bootstrap resampling
    scored = run_cli(
        "mt-evaluate", "--hyp", *hyps, "--ref", ref, "--samples", "100", "--json", str(tmp_path / "c.json")
    )
    assert rows[0]["bleu_detail"] in scored.stdout and rows[3]["bleu_detail"] in scored.stdout
    assert rows[0]["bleu_detail"] != rows[3]["bleu_detail"]  # the settings matter here, so the check above bites
    compared = json.loads((tmp_path / "c.json").read_text())
    assert (compared["baseline"], compared["samples"]) == (hyps[0], 100)
    assert [(r["hyp"], r["bleu"], "bleu_p" in r) for r in compared["systems"]] == [
        (hyps[0], rows[0]["bleu"], False),
        (hyps[1], rows[3]["bleu"], True),
    ]
    assert f"{hyps[1]}: BLEU {rows[3]['bleu']:.2f} ± " in scored.stdout and "bs:100|" in scored.stdout
    best = max(rows, key=lambda r: r["bleu"])
    assert f"best BLEU: {best['bleu']:.2f} with beam {best['beam']}, alpha {best['alpha']:g}" in sweep.stdout
    refused = run_cli("mt-evaluate", "-c", best_pt, "--split", "test", "--alpha", "0", "1", "-o",
                      str(tmp_path / "hyp"), check=False)  # fmt: skip
    assert refused.returncode == 2 and "--output takes the translations of one setting" in refused.stderr


def test_evaluate_chooses_on_one_split_and_scores_another(trained_run, tmp_path):
    best_pt = str(trained_run / "checkpoints" / "best.pt")
    out = run_cli("mt-evaluate", "-c", best_pt, "--split", "test", "--beam", "4", "--alpha", "8", "0",
                  "--choose-on", "valid", "--json", str(tmp_path / "chosen.json"))  # fmt: skip
    result = json.loads((tmp_path / "chosen.json").read_text())
    assert result["chosen_on"] == "valid" and [row["alpha"] for row in result["sweep"]] == [8, 0]
    assert result["sweep"][0]["bleu"] != result["sweep"][1]["bleu"]  # alpha matters here, so the choice bites
    best = max(result["sweep"], key=lambda row: row["bleu"])
    assert result["alpha"] == best["alpha"] and f"chosen on valid: beam 4, alpha {best['alpha']:g}" in out.stdout
    for row in result["sweep"]:  # the sweep is valid's scores, the result test's score at the choice
        run_cli("mt-evaluate", "-c", best_pt, "--split", "valid", "--beam", "4", "--alpha", str(row["alpha"]),
                "--json", str(tmp_path / "row.json"))  # fmt: skip
        assert json.loads((tmp_path / "row.json").read_text())["bleu_detail"] == row["bleu_detail"]
    run_cli("mt-evaluate", "-c", best_pt, "--split", "test", "--beam", "4", "--alpha", str(best["alpha"]),
            "--json", str(tmp_path / "test.json"))  # fmt: skip
    assert json.loads((tmp_path / "test.json").read_text())["bleu_detail"] == result["bleu_detail"]
    refused = run_cli("mt-evaluate", "-c", best_pt, "--split", "test", "--choose-on", "valid", check=False)
    assert refused.returncode == 2 and "--choose-on needs several --beam or --alpha values" in refused.stderr


def test_the_run_chooses_its_length_penalty_on_valid(tiny_corpus, tmp_path):
    run = tmp_path / "run"
    candidates = [8.0, 0.0, 1.0]
    log = train_tiny(tiny_corpus, run, "train.max_steps=150", "decode=beam", "decode.beam=4",
                     f"decode.alpha_candidates=[{','.join(map(str, candidates))}]")  # fmt: skip
    results = json.loads((run / "results.json").read_text())
    sweep = results["alpha_sweep_on_valid"]
    assert [row["alpha"] for row in sweep] == candidates
    assert len({row["valid_bleu"] for row in sweep}) > 1  # alpha matters to this model, so the choice bites
    chosen = max(sweep, key=lambda row: row["valid_bleu"])["alpha"]  # the first of equals
    assert results["alpha"] == chosen and f"length penalty chosen on valid: {chosen:g}" in log.stdout
    # each row is mt-evaluate's score of valid at that alpha (one sweep, a row per alpha)
    checked = run_cli("mt-evaluate", "-c", str(run / "checkpoints" / results["checkpoint"]), "--split", "valid",
                      "--alpha", *map(str, candidates), "--json", str(tmp_path / "rows.json"))  # fmt: skip
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [(r["alpha"], r["bleu"]) for r in rows] == [(r["alpha"], r["valid_bleu"]) for r in sweep], checked.stdout
    # The choice is final.pt's own: translate uses it without being told, as the test score did. The
    # checkpoint it came from (best.pt or averaged.pt) is left as it was written.
    assert results["checkpoint"] == "final.pt"
    state = torch.load(run / "checkpoints" / "final.pt", weights_only=True)
    assert state["config"]["decode"]["alpha"] == chosen
    source = torch.load(run / "checkpoints" / results["final_from"], weights_only=True)
    assert source["config"]["decode"]["alpha"] == 0.6  # the preset's, not the choice
    hyp = tmp_path / "test.en"
    # The log's last line is the command that translates with the run's model (its final.pt), as typed here.
    command = log.stdout.splitlines()[-1].split("to translate with it: ")[1]
    program = Path(cli_path("translate"))
    program = program.relative_to(REPO) if program.is_relative_to(REPO) else program  # .venv/bin/translate
    assert command == f"{program} -c {run} < input.txt > output.txt", command
    typed = subprocess.run(command.replace("input.txt", str(tiny_corpus / "test.de")).replace("output.txt", str(hyp)),
                           shell=True, cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert typed.returncode == 0 and hyp.read_text() == (run / "test.hyp").read_text(), typed.stderr
    # the command refuses what check_overrides refuses (test_config_errors)
    with pytest.raises(MTError, match="decode.alpha_candidates: the length penalty only acts in beam search"):
        check_overrides(["data=files", f"data.dir={tiny_corpus}", *TINY_TRAIN, "decode.alpha_candidates=[0.6,1.0]"])


def test_rerun_resumes_from_last_checkpoint(tiny_corpus, tmp_path):
    """Stopped at step 20 then resumed to 40: the same losses as one uninterrupted run to 40."""
    common = [
        "train.log_every=1",
        "train.save_every=10",
        "train.valid_every=1000",
        "data.test_split=null",
        f"data.cache_dir={tmp_path / 'cache'}",
    ]  # the second run reads the memory-mapped encoding
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train_tiny(tiny_corpus, straight, "train.max_steps=40", *common)
    train_tiny(tiny_corpus, resumed, "train.max_steps=20", *common)
    second = train_tiny(tiny_corpus, resumed, "train.max_steps=40", *common)
    assert "resumed from" in second.stdout + second.stderr

    def losses(run):
        return {r["step"]: r["loss"] for r in map(json.loads, (run / "train.jsonl").read_text().splitlines())}

    assert losses(resumed) == losses(straight)


def test_a_run_directory_holding_another_run_is_refused_before_anything_in_it_changes(tiny_corpus, tmp_path):
    run = tmp_path / "run"
    train_tiny(tiny_corpus, run, "train.max_steps=5", "data.test_split=null")

    def the_runs_files():  # every file: Hydra's .hydra/ and log and the lock's holder too
        return {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}

    before = the_runs_files()
    other = write_corpus(tmp_path / "other", {"train": 300, "valid": 30, "test": 30})
    for overrides, named in (
        (["model.ffn_dim=96"], ["model.ffn_dim"]),
        (["tokenizer.vocab_size=40", f"data.dir={other}"], ["data.dir", "tokenizer.vocab_size"]),  # each named
    ):
        result = train_tiny(tiny_corpus, run, "train.max_steps=10", *overrides, check=False)
        errors = [line for line in (result.stdout + result.stderr).splitlines() if "error" in line.lower()]
        assert result.returncode == 2 and len(errors) == 1, result.stdout + result.stderr
        assert f"{run}: holds another run" in errors[0] and all(key in errors[0] for key in named), errors[0]
        assert the_runs_files() == before  # byte for byte
    # the same settings still resume
    again = train_tiny(tiny_corpus, run, "train.max_steps=6", "data.test_split=null")
    assert "resumed from" in again.stdout + again.stderr


def test_a_run_directory_is_refused_when_its_training_text_changed_under_the_same_path(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    run = tmp_path / "run"
    train_tiny(corpus, run, "train.max_steps=5", "data.test_split=null")
    kept = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and {"checkpoints", "tokenizer"} & set(p.parts)}
    kept[run / "config.yaml"] = (run / "config.yaml").read_bytes()
    write_corpus(corpus, {"train": 500, "valid": 30, "test": 30})  # same files, other text
    result = train_tiny(corpus, run, "train.max_steps=10", "data.test_split=null", check=False)
    assert result.returncode == 2 and "differs in the training text" in result.stdout + result.stderr
    assert {p: p.read_bytes() for p in kept} == kept


def test_config_errors(tiny_corpus, tmp_path):
    """mt-train refuses a bad override in one line with status 2, whether Hydra's schema refuses it (an unknown
    key, a badly typed value) or our checks do (a value out of range); the others are checked as it checks."""
    for override, said in (
        ("train.no_such_key=1", "no_such_key"),
        ("model.heads=5", "model.heads: must divide"),
        # read only by translate and mt-serve, from final.pt: checked before training, not after it
        ("decode.strategy=smaple", "config decode.strategy='smaple': must be one of search, sample"),
        # validation's BLEU would fail at the first validation
        ("decode.bleu_tokenize=13b", "decode.bleu_tokenize=13b: not one of sacreBLEU's tokenizations (none, zh, 13a"),
    ):
        result = train_tiny(tiny_corpus, tmp_path, override, check=False)
        assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    data = ["data=files", f"data.dir={tiny_corpus}", *TINY_TRAIN]
    for overrides, said in (
        (["train.precision=fp8"], "config train.precision: must be fp32, bf16 or fp16"),
        (["train.max_tokens=lots"], "max_tokens"),
        (["tokenizer.type=bpe", "train.subword_sampling=1"], "train.subword_sampling: with a BPE tokenizer is BPE-dro"),
        (["model.heads=5"], "model.heads: must divide model.d_model=64"),
        (["train.seed=-1"], "config train.seed: must be >= 0"),
        (["train.eps=0"], "config train.eps: must be positive"),
        (["data.valid_max_sentences=-1"], "config data.valid_max_sentences: must be >= 0"),
        (["tokenizer.max_sentences=0"], "config tokenizer.max_sentences: must be >= 1"),
    ):
        with pytest.raises(MTError, match=said):
            check_overrides([*data, *overrides])


def test_bad_data_is_a_clear_error(tmp_path):
    from conftest import write_corpus

    corpus = write_corpus(tmp_path / "c", {"train": 20, "valid": 5, "test": 5})
    with open(corpus / "train.en", "a", encoding="utf-8") as f:
        f.write("one line too many\n")
    result = train_tiny(corpus, tmp_path / "run", check=False)
    assert result.returncode == 2
    assert "train.de has 20 lines but" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    debug = train_tiny(corpus, tmp_path / "run", "--debug", check=False)
    assert debug.returncode != 0
    assert "Traceback" in debug.stderr and "train.de has 20 lines but" in debug.stderr


def test_attention_heatmaps_and_alignments(trained_run, tmp_path):
    out = run_cli(
        "translate",
        "-c",
        str(trained_run / "checkpoints" / "best.pt"),
        "--alignments",
        "--attention-dir",
        str(tmp_path / "att"),
        input_text="ein hund läuft\n\nkatze rot\n",
    )
    rows = out.stdout.split("\n")[:-1]
    assert len(rows) == 3 and rows[1] == "\t"
    text, alignment = rows[0].split("\t")
    assert text == "a dog runs"
    pairs = [tuple(map(int, p.split("-"))) for p in alignment.split()]
    assert pairs == sorted(set(pairs))  # source-target word pairs, in order
    assert {s for s, _ in pairs} == {t for _, t in pairs} == {0, 1, 2}  # every word of both has a link
    pieces = run_cli(
        "translate", "-c", str(trained_run / "checkpoints" / "best.pt"), "--alignments", "pieces",
        input_text="ein hund läuft\n",
    )  # fmt: skip
    pairs = [tuple(map(int, p.split("-"))) for p in pieces.stdout.split("\t")[1].split()]
    assert [t for _, t in pairs] == list(range(len(pairs)))  # one source piece per target piece
    assert all(0 <= s <= 3 for s, _ in pairs)  # 3 source pieces + EOS
    assert sorted(p.name for p in (tmp_path / "att").iterdir()) == ["000000.svg", "000002.svg"]
    svg = (tmp_path / "att" / "000000.svg").read_text()
    assert svg.startswith("<svg") and "▁hund" in svg and "▁dog" in svg
    # a layer or head the model lacks (2 decoder layers, 4 heads) is one line, before any output
    for flag, said in (
        (["--attention-layer", "2"], "attention layer 2: the model has 2 decoder layers (0 to 1; -1: last)"),
        (["--attention-layer", "-3"], "attention layer -3: the model has 2 decoder layers"),
        (["--attention-head", "4"], "attention head 4: the model's cross-attention has 4 heads (0 to 3)"),
    ):
        best = str(trained_run / "checkpoints" / "best.pt")
        result = run_cli("translate", "-c", best, "--alignments", *flag, input_text="rot\n", check=False)
        assert result.returncode == 2 and result.stdout == "" and result.stderr.startswith(f"error: {said}")
        assert len(result.stderr.splitlines()) == 1


def test_ctrl_c_says_how_many_lines_are_written(trained_run, tmp_path, tiny_corpus):
    """translate writes chunk by chunk; Ctrl-C says how many lines the output holds, each one complete."""
    import re
    import signal
    import time

    source, output = tmp_path / "in.de", tmp_path / "out.en"
    source.write_text((tiny_corpus / "train.de").read_text(encoding="utf-8") * 40, encoding="utf-8")
    command = [cli_path("translate"), "-c", str(trained_run / "checkpoints" / "best.pt"), "-i", str(source),
               "-o", str(output), "--chunk-lines", "20", "--beam", "4"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.time() + 120
    while time.time() < deadline and (not output.exists() or output.read_text().count("\n") < 20):
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    pattern = r"interrupted: the first ([\d,]+) lines are written in (.+?)(, and maybe some of the next ones)?"
    said = re.fullmatch(pattern, err.strip().splitlines()[-1])
    assert said and said.group(2) == str(output), err
    written, total = int(said.group(1).replace(",", "")), len(read_lines(source))
    assert 20 <= written < total and written % 20 == 0
    lines = output.read_text(encoding="utf-8").count("\n")
    assert lines >= written if said.group(3) else lines == written


def test_ctrl_c_message_reads_right_at_every_count():
    """The Ctrl-C line at none, one and many done, stopped between chunks or while writing one."""
    cases = [(done, writing) for done in (0, 1, 2000) for writing in (False, True)]
    said = {(done, writing): str(StoppedAfter(done, "line", "out.en", writing)) for done, writing in cases}
    assert said == {
        (0, False): "no line is written in out.en yet",
        (0, True): "no line is sure to be written in out.en yet, though some of the first ones may be",
        (1, False): "the first line is written in out.en",
        (1, True): "the first line is written in out.en, and maybe some of the next ones",
        (2000, False): "the first 2,000 lines are written in out.en",
        (2000, True): "the first 2,000 lines are written in out.en, and maybe some of the next ones",
    }
    assert str(StoppedAfter(3, "score", None)) == "the first 3 scores are written"


def test_over_long_lines_are_truncated_and_counted(trained_run):
    long_line = " ".join(["ein hund läuft"] * 50)
    out = run_cli(
        "translate",
        "-c",
        str(trained_run / "checkpoints" / "best.pt"),
        "--max-src-len",
        "20",
        input_text=f"{long_line}\nrot\n\n",
    )
    assert len(out.stdout.split("\n")) - 1 == 3
    assert "1 line was longer than 20 pieces and was truncated" in out.stderr


def test_interactive_mode_answers_line_by_line(trained_run):
    out = run_cli(
        "translate",
        "-c",
        str(trained_run / "checkpoints" / "best.pt"),
        "--interactive",
        input_text="ein hund läuft\n\nkatze\n",
    )
    assert out.stdout == "a dog runs\n\ncat\n"


def test_keep_best_last_and_average(tiny_corpus, tmp_path):
    run = tmp_path / "run"
    train_tiny(
        tiny_corpus,
        run,
        "train.max_steps=120",
        "train.valid_every=20",
        "train.save_every=20",
        "train.keep_best=3",
        "train.keep_last=2",
        "train.average_last=2",
    )
    ckpts = run / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("step*.pt")) == ["step100.pt", "step120.pt"]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    top3 = sorted(metrics, key=lambda r: (-r["valid_bleu"], r["step"]))[:3]
    assert sorted(p.name for p in ckpts.glob("best_step*.pt")) == sorted(f"best_step{r['step']}.pt" for r in top3)
    assert (ckpts / "averaged.pt").is_file()
    results = json.loads((run / "results.json").read_text())
    assert results["checkpoint"] == "final.pt" and results["final_from"] in ("best.pt", "averaged.pt")
    final, source = load_checkpoint(ckpts / "final.pt"), load_checkpoint(ckpts / results["final_from"])
    assert final["final_from"] == results["final_from"] and "trainer" not in final
    assert all(torch.equal(final["model"][k], source["model"][k]) for k in source["model"])
    out = run_cli(
        "python",
        "scripts/average_checkpoints.py",
        "--run",
        str(run),
        "--best",
        "2",
        "--output",
        str(tmp_path / "avg.pt"),
    )
    assert "averaged 2 checkpoints" in out.stdout
    translated = run_cli("translate", "-c", str(tmp_path / "avg.pt"), input_text="ein hund\n")
    assert translated.stdout.count("\n") == 1


def test_a_checkpoint_with_a_config_key_this_version_lacks_is_one_line(trained_run, tmp_path):
    """E.g. a checkpoint written by a newer version: the file and the key, not OmegaConf's traceback."""
    state = torch.load(trained_run / "checkpoints" / "best.pt", weights_only=True)
    state["config"]["decode"]["option_from_the_future"] = 3
    torch.save(state, tmp_path / "newer.pt")
    for command in (["translate"], ["mt-evaluate", "--split", "test"]):
        result = run_cli(*command, "-c", str(tmp_path / "newer.pt"), check=False, input_text="ein hund\n")
        assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
        assert "newer.pt: its config does not fit this version of mt" in result.stderr
        assert "option_from_the_future" in result.stderr


def test_a_tokenizer_that_does_not_fit_the_weights_is_refused(trained_run, tmp_path):
    """A checkpoint whose tokenizer was swapped for one with another vocabulary: one clear line, exit 2."""
    from mt.checkpoint import load_checkpoint, save_checkpoint
    from mt.config.schema import from_dict
    from mt.data.sources import load_split
    from mt.data.tokenizer import build_tokenizer

    state = load_checkpoint(trained_run / "checkpoints" / "best.pt")
    cfg = from_dict(state["config"])
    rows = state["model"]["src_embed.weight"].shape[0]
    cfg.tokenizer.vocab_size = 40
    other = build_tokenizer(cfg.tokenizer, load_split(cfg.data, "train"), tmp_path / "tokenizer")
    assert other.src_vocab_size != rows
    state["tokenizer"] = other.state_dict()
    save_checkpoint(state, tmp_path / "mixed.pt")
    result = run_cli("translate", "-c", str(tmp_path / "mixed.pt"), check=False, input_text="ein hund\n")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert (
        f"mixed.pt: its tokenizer has {other.src_vocab_size} source / {other.tgt_vocab_size} target pieces "
        f"but the model's src_embed.weight has {rows} rows"
    ) in result.stderr


def test_a_reader_that_stops_early_gets_no_traceback(trained_run):
    """`translate ... | head -1`: the closed pipe ends translate quietly."""
    import subprocess
    import threading

    from conftest import cli_path

    proc = subprocess.Popen(
        [cli_path("translate"), "-c", str(trained_run / "checkpoints" / "best.pt"), "-q"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def feed():  # as a shell pipeline does, beside the reader: translate streams, so it writes while it reads
        try:
            proc.stdin.write("ein hund läuft\n" * 20000)  # more output than a pipe buffer holds
            proc.stdin.close()
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    assert proc.stdout.readline() == "a dog runs\n"
    proc.stdout.close()
    assert proc.wait(timeout=300) in (0, 141)  # 141: it was still writing when the pipe closed
    assert "Traceback" not in proc.stderr.read()
