"""Scores as sacreBLEU gives them, words split as the target language is written, and the paired significance
test that says whether two systems differ."""

import gzip
import importlib.util
import json
import random

import pytest
from sacrebleu.metrics import BLEU

from mt.cli.evaluate import language_of
from mt.data.tokenizer import Tokenizer
from mt.errors import MTError
from mt.metrics import (
    bleu_tokenize,
    check_bleu_tokenize,
    paired_test,
    pooled_score,
    score,
    score_references,
    term_use,
)

from conftest import LEXICON, make_pairs, run_cli, train_tiny


@pytest.fixture(scope="module")
def systems():
    """References and four systems: the references with every 7th line garbled, with every 2nd, the first
    again under another name, and the first with one line other."""
    references = [t for _, t in make_pairs(200, seed=5)]
    rng = random.Random(0)

    def garbled(every):
        shuffled = [" ".join(rng.sample(r.split(), len(r.split()))) for r in references]
        return [s if i % every == 0 else r for i, (r, s) in enumerate(zip(references, shuffled))]

    good, worse = garbled(7), garbled(2)
    near = [*good[:3], references[3] + " here", *good[4:]]  # one line other than good's
    return references, [("good", good), ("worse", worse), ("good again", list(good)), ("near", near)]


def test_a_paired_test_tells_a_real_difference_from_none(systems):
    references, named = systems
    rows, signatures, samples = paired_test(named, [references], samples=200)
    assert samples == 200 and "bs:200" in signatures[0] and "bs:200" in signatures[1]
    for row, (name, hypotheses) in zip(rows, named):  # the scores are the ones mt-evaluate prints
        plain = score(hypotheses, references)
        assert (row["hyp"], row["bleu"], row["chrf"]) == (name, plain.bleu, plain.chrf)
    base, worse, same, near = rows
    assert "bleu_p" not in base and worse["bleu"] < base["bleu"]
    assert worse["bleu_p"] < 0.05 and worse["chrf_p"] < 0.05  # every 2nd line garbled: not chance
    assert same["bleu_p"] == same["chrf_p"] == 1.0  # no difference at all
    assert near["bleu"] != base["bleu"] and near["bleu_p"] > 0.05 and near["chrf_p"] > 0.05  # a line: chance
    assert all(r["bleu_ci"] > 0 and r["chrf_ci"] > 0 for r in rows)
    assert paired_test(named, [references], samples=200)[0] == rows  # seeded: the same every time


# Chinese text has no spaces between words: split at spaces and punctuation (13a), a sentence is one "word".
CHINESE_REFS = ["我喜欢吃苹果和梨。", "今天天气很好，我们去公园散步吧。", "他每天早上跑步。"]
CHINESE_HYPS = ["我喜欢吃苹果和香蕉。", "今天天气很好，我们去公园吧。", "他每天早上跑步。"]


def test_bleu_splits_words_as_the_target_language_is_written():
    assert bleu_tokenize("en") == bleu_tokenize("de") == bleu_tokenize(None) == "13a"
    assert {bleu_tokenize(code) for code in ("zh", "zh-Hant", "zh_TW", "ZHO", "cmn")} == {"zh"}
    mecab = importlib.util.find_spec("MeCab") is not None
    assert bleu_tokenize("ja") == bleu_tokenize("jpn") == ("ja-mecab" if mecab else "char")
    assert {bleu_tokenize(code) for code in ("th", "th-TH", "tha", "lo", "km", "my", "mya")} == {"char"}
    assert bleu_tokenize("th", "flores200") == "flores200"
    thai_refs = ["ฉันรักแมวของฉันมาก", "เด็กสองคนเล่นฟุตบอลในสวน"]  # "I love my cat a lot", "two children play ..."
    thai_hyps = ["ฉันรักหมาของฉันมาก", thai_refs[1]]  # one word off ("dog"), one line exact
    assert score(thai_hyps, thai_refs).bleu == 0 and score(thai_hyps, thai_refs, bleu_tokenize("th")).bleu > 80
    assert bleu_tokenize("zh", "intl") == bleu_tokenize("en", "intl") == "intl"  # a setting overrides
    by_spaces, by_language = score(CHINESE_HYPS, CHINESE_REFS), score(CHINESE_HYPS, CHINESE_REFS, bleu_tokenize("zh"))
    assert by_spaces.bleu < 35 and by_language.bleu > 60  # two lines a word off: all but one "word" wrong at 13a
    assert "tok:zh" in by_language.bleu_signature and by_spaces.chrf == by_language.chrf  # chrF splits nothing


def test_a_pooled_score_splits_each_languages_lines_its_own_way():
    english = [t for _, t in make_pairs(20, seed=3)]
    english_hyps = [" ".join(line.split()[:-1]) or line for line in english]
    zh, plain = BLEU(tokenize="zh").tokenizer, BLEU(tokenize="13a").tokenizer
    assert all(zh(line) == plain(line) for line in english + english_hyps)  # so "zh" on all lines is the truth
    hypotheses, references = CHINESE_HYPS + english_hyps, CHINESE_REFS + english
    parts = [(0, 3, "zh"), (3, len(references), "13a")]
    pooled, truth = pooled_score(hypotheses, references, parts), score(hypotheses, references, "zh")
    assert (pooled.bleu, pooled.chrf) == (truth.bleu, truth.chrf) and "tok:13a+zh" in pooled.bleu_signature
    all_13a = pooled_score(hypotheses, references, [(0, 3, "13a"), (3, len(references), "13a")])
    assert all_13a == score(hypotheses, references) and all_13a.bleu != pooled.bleu  # each part's own way counts


def test_a_tokenization_named_is_tried_before_it_is_needed():
    check_bleu_tokenize(None)
    check_bleu_tokenize("intl")
    with pytest.raises(MTError, match=r"^decode.bleu_tokenize=13b: not one of sacreBLEU's tokenizations \(none, "):
        check_bleu_tokenize("13b")
    with pytest.raises(MTError, match=r"^--bleu-tokenize 13b: not one of"):
        check_bleu_tokenize("13b", "--bleu-tokenize")
    if importlib.util.find_spec("MeCab") is None:
        with pytest.raises(MTError, match=r"ja-mecab: sacreBLEU cannot use it here \(.*sacrebleu\[ja\]"):
            check_bleu_tokenize("ja-mecab")


def test_mt_evaluate_splits_words_by_the_references_language(tmp_path):
    hyp, ref = tmp_path / "out.txt", tmp_path / "test.zh.gz"
    hyp.write_text("".join(line + "\n" for line in CHINESE_HYPS), encoding="utf-8")
    with gzip.open(ref, "wt", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in CHINESE_REFS))
    said = run_cli("mt-evaluate", "--hyp", str(hyp), "--ref", str(ref), "--json", str(tmp_path / "s.json"))
    assert "tok:zh" in said.stdout and json.loads((tmp_path / "s.json").read_text())["bleu"] > 60
    plain = run_cli("mt-evaluate", "--hyp", str(hyp), "--ref", str(ref), "--bleu-tokenize", "13a")
    assert "tok:13a" in plain.stdout
    bad = run_cli("mt-evaluate", "--hyp", str(hyp), "--ref", str(ref), "--bleu-tokenize", "13b", check=False)
    assert bad.returncode == 2 and "--bleu-tokenize 13b: not one of" in bad.stderr
    assert language_of("data/test.zh") == language_of("test.zh.xz") == "zh" and language_of("hyp") == ""


def test_a_run_into_chinese_keeps_its_punctuation_and_scores_chinese_words(tmp_path):
    """The choices reach every part of a run: its tokenizer (text as written), validation (metrics.jsonl) and
    the test score (results.json)."""
    characters = dict(zip(sorted(LEXICON.values()), "狗猫人女男孩跑走吃看红蓝大小快慢树房水山"))
    corpus = tmp_path / "de_zh"
    corpus.mkdir()
    for seed, (split, n) in enumerate({"train": 300, "valid": 20, "test": 20}.items()):
        pairs = make_pairs(n, seed)
        (corpus / f"{split}.de").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        chinese = [
            "".join(characters[w] for w in t.split()[:2]) + "，" + "".join(characters[w] for w in t.split()[2:]) + "！"
            for _, t in pairs
        ]
        (corpus / f"{split}.zh").write_text("".join(line + "\n" for line in chinese), encoding="utf-8")
    run = tmp_path / "run"
    said = train_tiny(corpus, run, "data.tgt_lang=zh", "train.max_steps=20", "train.valid_every=10")
    assert "normalization identity" in said.stdout + said.stderr
    tokenizer = Tokenizer.load(run / "tokenizer")
    assert tokenizer.decode_tgt(tokenizer.encode_tgt(["狗猫，跑！"])) == ["狗猫，跑！"]  # not NFKC's "狗猫,跑!"
    validations = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert validations and all("tok:zh" in v["bleu_signature"] for v in validations)
    assert "tok:zh" in json.loads((run / "results.json").read_text())["bleu_signature"]
    said = run_cli("mt-info", str(run)).stdout  # the model says both
    assert "for both sides, normalization identity\n" in said and "BLEU " in said and "(tok:zh), chrF" in said


def test_several_references_each_line_matches_any_of_them(tmp_path):
    """Each hypothesis line is one of its two references, in turn: against both it is perfect, against either
    alone it is not."""
    first = [t for _, t in make_pairs(40, seed=8)]
    second = [" ".join(line.split()[::-1]) for line in first]  # another way of saying it
    hypotheses = [a if i % 2 else b for i, (a, b) in enumerate(zip(first, second))]
    both = score_references(hypotheses, [first, second])
    assert both.bleu == 100.0 and both.chrf == 100.0 and "nrefs:2" in both.bleu_signature
    assert max(score(hypotheses, first).bleu, score(hypotheses, second).bleu) < 80
    files = {}
    for name, lines in (("hyp.en", hypotheses), ("a.en", first), ("b.en", second), ("short.en", first[:-1])):
        files[name] = tmp_path / name
        files[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    said = run_cli("mt-evaluate", "--hyp", str(files["hyp.en"]), "--ref", str(files["a.en"]), str(files["b.en"]))
    assert "BLEU 100.00 | chrF 100.00" in said.stdout and "nrefs:2" in said.stdout
    compared = run_cli("mt-evaluate", "--hyp", str(files["a.en"]), str(files["hyp.en"]), "--samples", "50",
                       "--ref", str(files["a.en"]), str(files["b.en"]))  # fmt: skip
    assert "nrefs:2|bs:50" in compared.stdout and f"{files['hyp.en']}: BLEU 100.00 ±" in compared.stdout
    bad = run_cli("mt-evaluate", "--hyp", str(files["hyp.en"]), "--ref", str(files["a.en"]), str(files["short.en"]),
                  check=False)  # fmt: skip
    assert (
        bad.returncode == 2 and f"--ref {files['short.en']} has 39 lines but --ref {files['a.en']} has 40" in bad.stderr
    )


def test_term_use_counts_the_terms_a_translation_holds_as_whole_words():
    hyps = ["the dog sat on the mat.", "hot dogs, a cat and a dog-cat", "a New York hotel", "nothing asked"]
    terms = [["dog", "mat"], ["dog", "cat"], ["New York", "Boston"], []]
    use = term_use(hyps, terms, "en")  # "dogs" holds no "dog"; "dog-cat" holds both, as words
    assert (use.held, use.asked, use.lines, use.lines_lacking) == (5, 6, 3, 1)
    assert use.as_dict() == {"terms_held": 5, "terms_asked": 6, "term_accuracy": 83.33}
    assert str(use) == "terms: 5 of 6 held (83.3%); 1 of 3 lines with terms lack one or more"
    assert term_use(["the dogs"], [["dog"]], "en").held == 0
    assert term_use(["我的汽车很好"], [["汽车"]], "zh").held == 1  # no spaces between words: anywhere
    assert term_use(["我的汽车很好"], [["汽车"]], "de").held == 0
    assert term_use(["x"], [[]], "en").as_dict()["term_accuracy"] is None and "none asked" in str(
        term_use([], [], "en")
    )
    with pytest.raises(ValueError, match="2 hypotheses for 1 lines of terms"):
        term_use(["a", "b"], [["a"]], "en")
