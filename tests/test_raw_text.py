"""Files another pipeline prepared (tokenized, escaped, split into subwords) are named in a warning before
training; raw text, the shipped Multi30k's included, is not."""

import re
from pathlib import Path

from mt.data.raw_text import preprocessing_signs, warn_if_preprocessed

from conftest import REPO, TINY_TRAIN, run_cli, write_corpus

MULTI30K = Path(REPO) / "data" / "multi30k"


def moses_like(line: str) -> str:
    """What Moses' tokenizer (with escaping) and its aggressive hyphen splitting make of a line."""
    line = re.sub(r"(\w)-(\w)", r"\1 @-@ \2", line)
    line = re.sub(r"([.,!?;:])", r" \1", line).replace("'", " &apos;")
    return re.sub(r"\s+", " ", line).strip()


def bpe_like(line: str) -> str:
    """subword-nmt's output: long words split, every piece but a word's last marked with @@."""
    return " ".join(w[:3] + "@@ " + w[3:] if len(w) > 5 else w for w in line.split())


def test_raw_text_shows_no_sign_and_prepared_text_shows_its_own():
    for name in ("train.de", "train.en", "valid.de", "valid.en", "test2016.de", "test2016.en"):
        assert preprocessing_signs((MULTI30K / name).read_text(encoding="utf-8").splitlines()) == [], name
    english = (MULTI30K / "valid.en").read_text(encoding="utf-8").splitlines()
    tokenized = preprocessing_signs([moses_like(line + " It's the dog's.") for line in english])
    assert {sign.split(" on ")[0] for sign in tokenized} >= {
        "spaces before commas and full stops",
        "Moses escapes such as &apos;",
    }
    assert preprocessing_signs([bpe_like(line) for line in english])[0].startswith("BPE joiners @@ on ")
    pieces = [" ".join("\u2581" + word for word in line.split()) for line in english]
    assert preprocessing_signs(pieces) == [f"sentencepiece pieces ▁ on {len(english):,} of {len(english):,} lines"]
    some = english[:950] + [bpe_like(line) for line in english[950:1000]]  # 50 of 1,000: at the threshold
    assert preprocessing_signs(some) == []
    assert len(warn_if_preprocessed("x.{de,en}", {"source": english, "target": pieces})) == 1


def test_lowercased_text_is_a_sign_and_a_caseless_script_with_latin_words_is_not():
    german = (MULTI30K / "valid.de").read_text(encoding="utf-8").splitlines()
    lowered = [line.lower() for line in german]
    assert preprocessing_signs(lowered) == [
        f"lowercased text (no capital letter) on {len(german):,} of {len(german):,} lines"
    ]
    half = lowered[:500] + german[500:1000]  # 500 of 1,000: not over half
    assert preprocessing_signs(half) == []
    assert len(preprocessing_signs(lowered[:501] + german[501:1000])) == 1
    chinese = [
        "我用iphone拍照。",
        "他们在公园里散步。",
        "这是一只狗。",
    ] * 100  # a third with Latin letters, none capital
    assert preprocessing_signs(chinese) == []
    assert preprocessing_signs(["12 345", "?!", "Ein Hund."] * 100) == []  # no letters: not lowercased


def test_a_run_names_the_prepared_files_before_training(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    for split in ("train", "test"):
        target = corpus / f"{split}.en"
        lines = target.read_text(encoding="utf-8").splitlines()
        target.write_text("".join(bpe_like(line + " together") + "\n" for line in lines), encoding="utf-8")
    run = tmp_path / "run"
    result = run_cli("mt-tokenizer", "data=files", f"data.dir={corpus}", f"hydra.run.dir={run}", *TINY_TRAIN)
    said = [line for line in (result.stdout + result.stderr).splitlines() if "looks preprocessed" in line]
    warnings = [line for line in said if "BPE joiners" in line]
    assert len(warnings) == 2, said  # the training and test splits' target sides; valid is raw
    assert sum("lowercased text (no capital letter) on" in line for line in said) == 6  # the corpus is in lowercase
    assert any(
        f"{corpus}/train.{{de,en}}: its target side looks preprocessed (BPE joiners @@ on" in w for w in warnings
    )
    assert any(f"{corpus}/test.{{de,en}}: its target side" in w for w in warnings)
