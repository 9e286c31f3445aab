"""Several languages in one model (data.src_lang / data.tgt_lang lists): every direction trained on at once,
sources tagged with their target language only where there are several targets, each direction tested on
its own, and the target named when translating (CLI, Python, HTTP), else one line."""

import json
from pathlib import Path
from xml.dom import minidom

import pytest
from omegaconf import OmegaConf

import mt
from mt.config.schema import Config, DataConfig, corpus_label
from mt.config.validation import validate
from mt.data.concatenation import TAG, Repeated, tempered_sizes
from mt.data.corpus import ParallelCorpus, read_shards
from mt.data.prepare import load_training_split
from mt.data.sources import joined, load_directions, pair_files
from mt.data.tokenizer import UNK, Tokenizer
from mt.errors import MTError
from mt.languages import directions, into, pair_subset, target_tag
from mt.metrics import pooled_score, score
from mt.training.validation import Validator, bleu_tokenizations

from conftest import make_pairs, run_cli, train_tiny

REVERSED = "rv"  # a second target language: English with its words in reverse order


def write_languages(folder: Path, sizes=None) -> Path:
    """A multi-way corpus: {split}.de, {split}.en and {split}.rv line-aligned (rv: en's words reversed)."""
    sizes = sizes or {"train": 600, "valid": 30, "test": 20}
    folder.mkdir(parents=True, exist_ok=True)
    for seed, (split, n) in enumerate(sizes.items()):
        pairs = make_pairs(n, seed)
        sides = {
            "de": [s for s, _ in pairs],
            "en": [t for _, t in pairs],
            REVERSED: [" ".join(t.split()[::-1]) for _, t in pairs],
        }
        for lang, lines in sides.items():
            (folder / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


def data_config(**values):
    return OmegaConf.merge(OmegaConf.structured(DataConfig), values)


def test_directions_are_every_source_into_every_other_target_and_only_several_targets_are_tagged():
    assert directions(data_config(src_lang=["de", "fr"], tgt_lang="en")) == [("de", "en"), ("fr", "en")]
    both_ways = data_config(src_lang=["de", "en"], tgt_lang=["de", "en"])
    assert directions(both_ways) == [("de", "en"), ("en", "de")]
    lines = ["Ein Hund.", "", "  "]
    assert into(lines, "", ("de", "en")) == lines  # one target: nothing to say
    assert into(lines, "en", ("de", ["en", "fr"])) == ["<2en> Ein Hund.", "", "  "]  # blank lines stay blank
    with pytest.raises(MTError, match=r"translates into en, fr: name the target language"):
        into(lines, "", ("de", ["en", "fr"]))
    with pytest.raises(MTError, match=r"target language 'es': this model translates into en$"):
        into(lines, "es", ("de", "en"))


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(src_lang="en", tgt_lang="en"), r"data.src_lang: must differ from data.tgt_lang"),
        (dict(src_lang=["de", "de"], tgt_lang="en"), r"data.src_lang: names a language twice"),
        (dict(src_lang=[], tgt_lang="en"), r"data.src_lang: must be a language code"),
        (dict(src_lang="de", tgt_lang=["en", "fr x"]), r"data.tgt_lang: must be a language code"),
    ],
)
def test_bad_languages_are_one_line(values, message):
    cfg = OmegaConf.structured(Config)
    cfg.data = data_config(source="files", dir="x", **values)
    with pytest.raises(MTError, match=message):
        validate(cfg)


def test_a_dataset_configuration_can_name_each_direction():
    assert pair_subset("{src}-en", "fr", "en") == "fr-en" and pair_subset("{tgt}-{src}", "en", "de") == "de-en"
    assert pair_subset("de-en", "fr", "en") == "de-en" and pair_subset(None, "fr", "en") is None


def test_the_run_directory_names_every_language():
    assert corpus_label("files", None, "data/m30k", ["de", "fr"], "en") == "m30k.de+fr-en"
    assert corpus_label("files", None, "data/m30k", "de", "en") == "m30k.de-en"


def test_files_named_for_their_language_pair_win_in_either_order(tmp_path):
    for name in ("train.de", "train.en", "train.en-fr.en", "train.en-fr.fr"):
        (tmp_path / name).write_text("x\n")
    assert pair_files(tmp_path, "train", "de", "en")[:2] == (tmp_path / "train.de", tmp_path / "train.en")
    assert pair_files(tmp_path, "train", "fr", "en")[:2] == (tmp_path / "train.en-fr.fr", tmp_path / "train.en-fr.en")
    assert pair_files(tmp_path, "train", "fr", "en")[2] == f"{tmp_path}/train.en-fr.{{fr,en}}"


def test_every_direction_is_a_part_of_the_training_corpus_tagged_with_its_target(tmp_path):
    folder = write_languages(tmp_path, {"train": 7, "synthetic": 3})
    lines = {lang: (folder / f"train.{lang}").read_text().splitlines() for lang in ("de", "en", REVERSED)}
    one_to_many = load_training_split(
        data_config(source="files", dir=str(folder), src_lang="de", tgt_lang=["en", REVERSED]), 1000
    ).in_memory()
    assert one_to_many.src == [f"<2en> {s}" for s in lines["de"]] + [f"<2rv> {s}" for s in lines["de"]]
    assert one_to_many.tgt == lines["en"] + lines[REVERSED]
    many_to_one = load_training_split(
        data_config(source="files", dir=str(folder), src_lang=["de", REVERSED], tgt_lang="en"), 1000
    )
    assert many_to_one.source_symbols == []  # one target: no tags
    assert many_to_one.in_memory().src == lines["de"] + lines[REVERSED]
    with_bt = load_training_split(
        data_config(
            source="files",
            dir=str(folder),
            src_lang="de",
            tgt_lang=["en", REVERSED],
            train_split=["train", "synthetic"],
            tagged_splits=["synthetic"],
        ),
        1000,
    )
    assert with_bt.source_symbols == ["<2en>", "<2rv>", TAG]
    assert with_bt.in_memory().src[-1].startswith(f"<2rv> {TAG} ")
    valid = load_directions(
        data_config(source="files", dir=str(folder), src_lang="de", tgt_lang=["en", REVERSED]), "train"
    )
    assert list(valid) == ["de-en", "de-rv"] and valid["de-rv"].src[0] == f"<2rv> {lines['de'][0]}"


def test_a_dataset_gives_each_direction_its_columns(tmp_path):
    import datasets

    rows = {
        split: {lang: [f"{lang} {split} {i}" for i in range(5)] for lang in ("de", "fr", "en")}
        for split in ("train", "valid")
    }
    saved = tmp_path / "saved"
    datasets.DatasetDict({k: datasets.Dataset.from_dict(v) for k, v in rows.items()}).save_to_disk(str(saved))
    cfg = data_config(source="hub", name=str(saved), src_lang="en", tgt_lang=["de", "fr"])
    memory = load_training_split(cfg, 100).in_memory()
    assert memory.src == [f"<2de> en train {i}" for i in range(5)] + [f"<2fr> en train {i}" for i in range(5)]
    assert memory.tgt == rows["train"]["de"] + rows["train"]["fr"]
    assert load_directions(cfg, "valid")["en-fr"].tgt == rows["valid"]["fr"]


def test_validation_takes_its_share_of_every_direction_and_scores_each(tmp_path):
    folder = write_languages(tmp_path, {"valid": 6})
    cfg = data_config(source="files", dir=str(folder), src_lang="de", tgt_lang=["en", REVERSED])
    valid = joined(load_directions(cfg, "valid"))
    assert valid.sections == {"de-en": (0, 6), "de-rv": (6, 12)}
    capped = Validator(None, None, None, valid, None, "cpu", None, 100, max_sentences=4)
    assert capped.sources == valid.src[0:2] + valid.src[6:8]  # not the first 4 of one direction
    assert capped.sections == {"de-en": (0, 2), "de-rv": (2, 4)}


def test_validation_splits_each_directions_words_as_its_target_language_is_written():
    cfg = OmegaConf.structured(Config)
    cfg.data = data_config(src_lang="de", tgt_lang=["en", "zh"])
    assert bleu_tokenizations(cfg) == {"de-en": "13a", "de-zh": "zh"}
    english = ["a dog runs in the snow", "two children play"]
    chinese = ["我喜欢吃苹果和梨。", "今天天气很好，我们去公园散步吧。"]
    hypotheses = ["a dog runs", "two children play", "我喜欢吃苹果和香蕉。", "今天天气很好，我们去公园吧。"]
    valid = ParallelCorpus(["s"] * 4, english + chinese, "valid", sections={"de-en": (0, 2), "de-zh": (2, 4)})
    validator = Validator(None, None, None, valid, None, "cpu", None, 100, bleu_tokenize=bleu_tokenizations(cfg))
    parts = [(0, 2, "13a"), (2, 4, "zh")]
    assert validator.score(hypotheses) == pooled_score(hypotheses, english + chinese, parts)
    cfg.decode.bleu_tokenize = "char"  # a setting: every direction's
    assert set(bleu_tokenizations(cfg).values()) == {"char"}
    one = ParallelCorpus(["s"] * 2, chinese, "valid")  # one direction: no sections
    alone = Validator(None, None, None, one, None, "cpu", None, 100, bleu_tokenize={"de-zh": "zh"})
    assert alone.score(hypotheses[2:]) == score(hypotheses[2:], chinese, "zh")


def test_a_repeated_part_reads_its_lines_round_and_round_across_shards():
    part = ParallelCorpus([f"s{i}" for i in range(5)], [f"t{i}" for i in range(5)], "p", "d", shard_lines=2)
    repeated = Repeated(part, 12)
    assert len(repeated) == 12 and repeated.shards == 6 and repeated.digest() != part.digest()
    src, tgt = read_shards(repeated, range(repeated.shards))
    assert src == [f"s{i % 5}" for i in range(12)] and tgt == [f"t{i % 5}" for i in range(12)]
    assert repeated.shard(2) == (["s4", "s0"], ["t4", "t0"])  # a shard across the end of a round
    assert repeated.tokenizer_sample("src") == part.tokenizer_sample("src")  # the tokenizer sees each line once
    with pytest.raises(ValueError):
        Repeated(part, 4)


def test_direction_temperature_evens_out_directions_and_leaves_no_line_out(tmp_path):
    assert tempered_sizes({"a": 1000, "b": 100}, 1) == {"a": 1000, "b": 100}
    assert tempered_sizes({"a": 1000, "b": 100}, 5) == {"a": 1000, "b": 631}  # 1000 * 0.1 ** 0.2
    assert tempered_sizes({"a": 1000, "b": 100}, float("inf")) == {"a": 1000, "b": 1000}
    folder = write_languages(tmp_path / "big", {"train": 12})
    for lang in ("de", REVERSED):  # de -> rv has 3 pairs of its own, de -> en 12
        lines = (folder / f"train.{lang}").read_text().splitlines(keepends=True)
        (folder / f"train.de-{REVERSED}.{lang}").write_text("".join(lines[:3]))
    cfg = dict(source="files", dir=str(folder), src_lang="de", tgt_lang=["en", REVERSED])
    plain = load_training_split(data_config(**cfg), 1000)
    assert len(plain) == 15
    equal = load_training_split(data_config(**cfg, direction_temperature=float("inf")), 1000)
    assert len(equal) == 24 and "(x4.00)" in equal.origin and equal.digest() != plain.digest()
    memory = equal.in_memory()
    assert memory.src[12:] == plain.in_memory().src[12:] * 4  # every rv pair four times, in its order
    assert sorted(equal.tokenizer_sample("tgt")) == sorted(plain.tokenizer_sample("tgt"))
    bad = OmegaConf.structured(Config)
    bad.data = data_config(**cfg, direction_temperature=0.5)
    with pytest.raises(MTError, match=r"data.direction_temperature: must be >= 1"):
        validate(bad)


@pytest.fixture(scope="module")
def one_to_many(tmp_path_factory) -> Path:
    """A tiny model trained de -> en and de -> rv through mt-train."""
    folder = write_languages(tmp_path_factory.mktemp("languages") / "m3")
    run = tmp_path_factory.mktemp("run")
    train_tiny(folder, run, f"data.tgt_lang=[en,{REVERSED}]", "train.max_steps=400")
    return run


def test_a_one_to_many_run_tests_each_direction_and_its_tokenizer_holds_each_tag(one_to_many):
    results = json.loads((one_to_many / "results.json").read_text())
    assert results["mean_of"] == ["de-en", "de-rv"]
    assert results["bleu"] == round(
        (results["directions"]["de-en"]["bleu"] + results["directions"]["de-rv"]["bleu"]) / 2, 2
    )
    assert (one_to_many / "test.de-en.hyp").is_file() and (one_to_many / "test.de-rv.hyp").is_file()
    tokenizer = Tokenizer.load(one_to_many / "tokenizer")
    assert all(tokenizer.src.piece_to_id(target_tag(t)) != UNK for t in ("en", REVERSED))
    assert "--tgt-lang en" in (one_to_many / "train.log").read_text()  # the command it logs names a target
    last = json.loads((one_to_many / "metrics.jsonl").read_text().splitlines()[-1])
    assert list(last["valid_bleu_by_direction"]) == ["de-en", "de-rv"]


def test_translate_asks_for_the_target_and_keeps_line_alignment(one_to_many):
    sources = [line for line in make_pairs(12, seed=7) for line in (line[0], "")]
    text = "".join(line + "\n" for line in sources)
    refused = run_cli("translate", "-c", str(one_to_many), "-q", input_text=text, check=False)
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
    assert "translates into en, rv: name the target language" in refused.stderr and not refused.stdout
    outputs = {}
    for lang in ("en", REVERSED):
        found = run_cli("translate", "-c", str(one_to_many), "-q", "--tgt-lang", lang, input_text=text)
        outputs[lang] = found.stdout.split("\n")[:-1]
        assert len(outputs[lang]) == len(sources) and all(not outputs[lang][i] for i in range(1, len(sources), 2))
    # The tag decides the output: reversed English comes back reversed more often than not.
    en, rv = outputs["en"][::2], outputs[REVERSED][::2]
    assert sum(a != b for a, b in zip(en, rv)) >= len(en) // 2, (en, rv)
    assert sum(b.split()[:1] == a.split()[-1:] for a, b in zip(en, rv)) >= len(en) // 2, (en, rv)


def test_python_http_evaluate_and_score_name_the_target_too(one_to_many, tmp_path):
    pytest.importorskip("uvicorn")
    from serving import RunningServer

    translator = mt.load_translator(one_to_many, device="cpu")
    line = make_pairs(1, seed=9)[0][0]
    by_flag = run_cli("translate", "-c", str(one_to_many), "-q", "--tgt-lang", REVERSED, input_text=line + "\n").stdout
    assert translator.translate(line, tgt_lang=REVERSED) == by_flag.strip()
    with pytest.raises(MTError, match="name the target language"):
        translator.translate(line)
    found = translator.with_settings(translator.settings.updated(tgt_lang=REVERSED)).translate_nbest(
        [line], attention_layer=-1
    )[0][0]
    own = translator.tokenizer.src_pieces(translator.tokenizer.encode_src([line])[0]) + ["</s>"]
    assert found.src_pieces == own and found.attention.shape[1] == len(own)  # the tag's pieces left out
    server = RunningServer(translator)
    try:
        status, answer = server.translate({"lines": [line]})
        assert status == 422 and "tgt_lang:" in answer["error"] and "name the target language" in answer["error"]
        status, answer = server.translate({"lines": [line], "tgt_lang": REVERSED})
        assert status == 200 and answer["translations"] == [by_flag.strip()]
        status, answer = server.request("POST", "/score", {"lines": [line], "targets": ["x"], "tgt_lang": "fr"})
        assert status == 422 and "'fr': this model translates into en, rv" in answer["error"]
        status, health = server.request("GET", "/health")
        assert health["languages"] == {"source": "de", "target": ["en", REVERSED]}
    finally:
        server.stop()
    # Every direction, with the run's own beam and one more: each setting's mean over the directions.
    results = json.loads((one_to_many / "results.json").read_text())
    beams = [str(results["beam"]), str(results["beam"] + 1)]
    evaluated = run_cli("mt-evaluate", "-c", str(one_to_many), "--beam", *beams, "--json", str(tmp_path / "s.json"))
    own, wider = json.loads((tmp_path / "s.json").read_text())
    assert own["mean_of"] == ["de-en", "de-rv"] and own["bleu"] == results["bleu"], evaluated.stdout
    assert {d: r["bleu"] for d, r in own["directions"].items()} == {
        d: r["bleu"] for d, r in results["directions"].items()
    }
    assert wider["beam"] == results["beam"] + 1 and wider["bleu"] == round(
        sum(r["bleu"] for r in wider["directions"].values()) / 2, 2
    )
    assert "direction de-rv:" in evaluated.stdout and f"best mean BLEU: {max(own['bleu'], wider['bleu']):.2f}" in (
        evaluated.stdout
    )
    corpus = Path(OmegaConf.load(one_to_many / "config.yaml").data.dir)
    files = [f"--src={corpus / 'test.de'}", f"--ref={corpus / f'test.{REVERSED}'}", f"--json={tmp_path / 'f.json'}"]
    run_cli("mt-evaluate", "-c", str(one_to_many), "--direction", f"de-{REVERSED}", *files)  # tagged as the split is
    assert json.loads((tmp_path / "f.json").read_text())["bleu"] == own["directions"][f"de-{REVERSED}"]["bleu"]
    missing = run_cli("mt-evaluate", "-c", str(one_to_many), *files, check=False)
    assert missing.returncode == 2 and "--src: give --direction, one of the model's directions (de-en, de-rv)" in (
        missing.stderr
    )
    (tmp_path / "glossary.tsv").write_text("hund\tdog\n", encoding="utf-8")
    glossed = run_cli("mt-evaluate", "-c", str(one_to_many), f"--glossary={tmp_path / 'glossary.tsv'}", check=False)
    assert glossed.returncode == 2 and "give --direction, one of the model's (de-en, de-rv)" in glossed.stderr
    src, tgt = tmp_path / "src", tmp_path / "tgt"
    src.write_text(line + "\n")
    tgt.write_text(by_flag)
    scored = {
        lang: float(
            run_cli(
                "mt-score", "-c", str(one_to_many), "--src", str(src), "--tgt", str(tgt), "-q", "--tgt-lang", lang
            ).stdout
        )
        for lang in ("en", REVERSED)
    }
    assert scored[REVERSED] > scored["en"]  # its own translation is likelier in the language it was made for


def test_an_export_of_a_model_of_several_targets_asks_for_one_and_decodes_as_torch_does(one_to_many, tmp_path):
    pytest.importorskip("ctranslate2")
    exported = tmp_path / "exported"
    run_cli("mt-export", "-c", str(one_to_many), "-o", str(exported))
    assert "<2en>, <2rv>" in (exported / "README.md").read_text()  # how to ask for a language without us
    text = "".join(s + "\n" for s, _ in make_pairs(8, seed=11))
    for lang in ("en", REVERSED):
        ours = run_cli("translate", "-c", str(one_to_many), "-q", "--beam", "1", "--tgt-lang", lang, input_text=text)
        theirs = run_cli(
            "translate", "--engine", "ctranslate2", "-c", str(exported), "-q", "--beam", "1", "--tgt-lang", lang,
            input_text=text,
        )  # fmt: skip
        assert theirs.stdout == ours.stdout
    refused = run_cli("translate", "--engine", "ctranslate2", "-c", str(exported), "-q", input_text=text, check=False)
    assert refused.returncode == 2 and "name the target language" in refused.stderr


def test_an_xliff_documents_files_are_translated_into_their_own_target_languages(one_to_many, tmp_path):
    translator = mt.load_translator(one_to_many, device="cpu")
    lines = [pair[0] for pair in make_pairs(2, seed=11)]
    files = "".join(
        f'<file original="{lang}" source-language="de" target-language="{lang}" datatype="plaintext"><body>'
        f'<trans-unit id="1"><source>{line}</source></trans-unit></body></file>'
        for lang, line in zip(("en", REVERSED), lines)
    )
    (tmp_path / "doc.xlf").write_text(f'<xliff version="1.2">{files}</xliff>', encoding="utf-8")
    report = mt.translate_xliff(translator, tmp_path / "doc.xlf", str(tmp_path / "out.xlf"))
    targets = [t.firstChild.data for t in minidom.parse(str(tmp_path / "out.xlf")).getElementsByTagName("target")]
    assert report.translated == 2 and targets == [translator.translate(lines[0], tgt_lang="en"),
                                                  translator.translate(lines[1], tgt_lang=REVERSED)]  # fmt: skip
    unnamed = f'<xliff version="2.0" srcLang="de"><file id="f"><unit id="u"><segment><source>{lines[0]}</source>'
    (tmp_path / "unnamed.xlf").write_text(unnamed + "</segment></unit></file></xliff>", encoding="utf-8")
    with pytest.raises(MTError, match="name the target language"):
        mt.translate_xliff(translator, tmp_path / "unnamed.xlf", str(tmp_path / "out.xlf"))
