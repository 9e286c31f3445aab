"""Sentence by sentence (mt/decoding/sentences.py): where a line is cut, that the cut loses nothing, and
that a split line translates as its sentences do one by one, in every strategy and both entry points."""

import random

import pytest

import mt
from mt.data.corpus import ParallelCorpus
from mt.decoding.sentences import join_sentences, several_sentences, several_sentences_note, split_sentences
from mt.decoding.settings import line_seed
from mt.errors import MTError
from mt.training.run import note_several_sentences

from conftest import run_cli


@pytest.mark.parametrize(
    "line, sentences",
    [
        (
            "Ein Hund rennt. Zwei Kinder spielen!  Wer kommt? Ich.",
            ["Ein Hund rennt.", "Zwei Kinder spielen!", "Wer kommt?", "Ich."],
        ),
        ("Wait... What?! (Really.) Yes.", ["Wait...", "What?!", "(Really.)", "Yes."]),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ("Er sagte: „Hallo.“ Dann ging er. »Gut.« Ja.", ["Er sagte: „Hallo.“", "Dann ging er.", "»Gut.«", "Ja."]),
        ("¿Vienes? ¡Claro!", ["¿Vienes?", "¡Claro!"]),
        ('He shouted "Stop! Now!" and ran. Then he left.', ['He shouted "Stop! Now!" and ran.', "Then he left."]),
        ("Er rief: „Halt! Sofort!“ Dann lief er.", ["Er rief: „Halt! Sofort!“", "Dann lief er."]),
        ("« Bonjour. » Il part. Oui.", ["« Bonjour. »", "Il part.", "Oui."]),  # French spaces inside « »
        ("Il pleut. « Tu viens ? » demande-t-il.", ["Il pleut.", "« Tu viens ? » demande-t-il."]),
        ("« Il pleut.\u00a0» Elle part.", ["« Il pleut.\u00a0»", "Elle part."]),
        ("Il dit : « Viens. »", ["Il dit : « Viens. »"]),
        ("我爱你。你好吗？好。", ["我爱你。", "你好吗？", "好。"]),
        ("Он пришёл. Она ушла.", ["Он пришёл.", "Она ушла."]),
        # No boundary: lower case next, initials, ordinals, inner periods, abbreviations, no space, line end.
        ("Es ist kalt. aber schön.", ["Es ist kalt. aber schön."]),
        ("J. K. Rowling schrieb es.", ["J. K. Rowling schrieb es."]),
        ("Am 3. Oktober kam er. Am 12. Mai nicht.", ["Am 3. Oktober kam er.", "Am 12. Mai nicht."]),
        ("Take e.g. Paris or the U.S. Army.", ["Take e.g. Paris or the U.S. Army."]),
        ("Dr. Müller und Prof. Schmidt kamen.", ["Dr. Müller und Prof. Schmidt kamen."]),
        ("Er hält ein Schild „Pop! Tech „ hoch. Ja.", ["Er hält ein Schild „Pop! Tech „ hoch. Ja."]),  # a stray mark
        ("It costs 3.50 euros.Fine.", ["It costs 3.50 euros.Fine."]),
        ("Born in 1990. Then he moved.", ["Born in 1990.", "Then he moved."]),
        ("Ein Hund rennt. ", ["Ein Hund rennt. "]),
        ("", [""]),
        ("   ", ["   "]),
    ],
)
def test_where_a_line_is_cut(line, sentences):
    assert split_sentences(line).sentences == sentences


def test_a_cut_loses_nothing():
    """Sentences and separators put back together give the line, character for character, whatever it holds."""
    rng = random.Random(0)
    alphabet = "aZ. !?…\"'»«„“”()[]\t 3。？Éé¿"
    for _ in range(3000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        split = split_sentences(line)
        assert len(split.separators) == len(split.sentences) - 1
        assert all(sentence for sentence in split.sentences[:-1] + split.sentences[1:])
        assert "".join(s + sep for s, sep in zip(split.sentences, split.separators + [""])) == line


def test_joining():
    assert join_sentences(["A dog runs.", "Two kids play."], [" "]) == "A dog runs. Two kids play."
    assert join_sentences(["One.", "Two."], ["\t  "]) == "One. Two."  # one space, whatever separated them
    assert join_sentences(["狗在跑。", "猫在睡。"], [""]) == "狗在跑。猫在睡。"  # after 。 with no space: none
    assert join_sentences(["A dog runs.", "A cat sleeps."], [""]) == "A dog runs. A cat sleeps."
    assert join_sentences(["", "Two.", "", "Four."], [" ", " ", " "]) == "Two. Four."  # no doubled space


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


# Paragraphs of the tiny corpus's words; each sentence's translation alone is the ground truth.
PARAGRAPHS = [
    ["hund läuft rot.", "Katze schläft hier.", "Kind isst heute!"],
    ["ein hund springt dort schnell."],
    [""],
    ["blau klein?", "Groß rot langsam."],
]


def by_hand(translator, paragraphs) -> list[str]:
    """Each sentence translated as a line of its own, the translations joined with a space."""
    return [" ".join(t for t in translator.translate(sentences) if t) for sentences in paragraphs]


@pytest.mark.parametrize(
    "settings",
    [dict(beam=1), dict(beam=3, alpha=1.0), dict(strategy="sample", seed=3, topk=5)],
    ids=["greedy", "beam", "sample"],
)
def test_a_split_line_translates_as_its_sentences_do(translator, settings):
    one_by_one = translator.with_settings(translator.settings.updated(**settings))
    split = one_by_one.with_settings(one_by_one.settings.updated(split_sentences=True))
    found = split.translate_nbest([" ".join(sentences) for sentences in PARAGRAPHS])
    parts = []
    for i, sentences in enumerate(PARAGRAPHS):
        seeds = None
        if one_by_one.settings.sampling:  # the line's seed draws its first sentence and seeds the others
            seed = line_seed(one_by_one.settings.seed, i)
            seeds = [seed if j == 0 else line_seed(seed, j) for j in range(len(sentences))]
        parts.append([hyps[0] for hyps in one_by_one.translate_nbest(sentences, seeds=seeds)])
    assert [f[0].text for f in found] == [" ".join(p.text for p in part if p.text) for part in parts]
    assert [f[0].score for f in found] == pytest.approx([sum(p.score for p in part) for part in parts], abs=1e-4)
    assert [f[0].tgt_pieces for f in found] == [[x for p in part for x in p.tgt_pieces] for part in parts]
    assert found[2][0].text == "" and len(found) == len(PARAGRAPHS)
    if one_by_one.settings.sampling:  # a line of one sentence samples as it does unsplit
        assert found[1][0].text == one_by_one.translate_nbest([PARAGRAPHS[1][0]], first_line=1)[0][0].text


def test_sampling_draws_each_line_alike_in_any_batch(translator):
    sampling = translator.settings.updated(strategy="sample", seed=1, split_sentences=True)
    lines = [" ".join(sentences) for sentences in PARAGRAPHS]
    together = translator.with_settings(sampling).translate(lines)
    alone = [
        translator.with_settings(sampling).translate_nbest([line], first_line=i)[0][0].text
        for i, line in enumerate(lines)
    ]
    assert together == alone


def test_a_prefix_starts_the_first_sentence(translator):
    split = translator.with_settings(translator.settings.updated(split_sentences=True))
    lines = ["hund läuft. Katze schläft.", "rot blau. Kind isst."]
    found = [r[0].text for r in split.translate_nbest(lines, prefixes=["the cat", ""])]
    first = translator.translate_nbest(["hund läuft."], prefixes=["the cat"])[0][0].text
    assert found[0] == " ".join(t for t in [first, translator.translate("Katze schläft.")] if t)
    assert found[1] == split.translate(lines[1])


def test_refused_where_a_line_would_need_one_sentence(translator):
    with pytest.raises(MTError, match="nbest=2: must be 1 with split_sentences"):
        translator.settings.updated(beam=2, nbest=2, split_sentences=True)
    split = translator.with_settings(translator.settings.updated(split_sentences=True))
    with pytest.raises(MTError, match="attention maps and alignments"):
        split.translate_nbest(["hund läuft."], attention_layer=-1)


def test_translate_and_evaluate_take_the_flag(trained_run, translator, tmp_path):
    checkpoint = str(trained_run / "checkpoints" / "final.pt")
    lines = [" ".join(sentences) for sentences in PARAGRAPHS]
    text = "".join(line + "\n" for line in lines)
    out = run_cli("translate", "-c", checkpoint, "--beam", "1", "--split-sentences", input_text=text)
    assert out.stdout.splitlines() == by_hand(translator, PARAGRAPHS)
    assert "greedy, sentence by sentence" in out.stderr and "note:" not in out.stderr
    whole = run_cli("translate", "-c", checkpoint, "--beam", "1", input_text=text)
    assert "note: 2 of 4 lines hold several sentences" in whole.stderr and "--split-sentences" in whole.stderr
    typed = run_cli(
        "translate", "-c", checkpoint, "--beam", "1", "--interactive", input_text=text
    )  # said once, at once
    assert typed.stdout == whole.stdout and typed.stderr.count("note:") == 1
    assert typed.stderr.startswith("note: the line holds several sentences, translated whole")
    cut = run_cli("translate", "-c", checkpoint, "--split-sentences", "--max-src-len", "2", input_text=text)
    assert len(cut.stdout.splitlines()) == len(lines) and "6 sentences were longer than 2 pieces" in cut.stderr
    refused = run_cli("translate", "-c", checkpoint, "--split-sentences", "--nbest", "2", input_text=text, check=False)
    assert refused.returncode != 0 and refused.stderr.strip().count("\n") == 0 and "--split-sentences" in refused.stderr
    (tmp_path / "src").write_text(text, encoding="utf-8")
    (tmp_path / "ref").write_text("".join(t + "\n" for t in by_hand(translator, PARAGRAPHS)), encoding="utf-8")
    scored = run_cli(
        "mt-evaluate",
        "-c",
        checkpoint,
        "--beam",
        "1",
        "--src",
        str(tmp_path / "src"),
        "--ref",
        str(tmp_path / "ref"),
        "--split-sentences",
        "--output",
        str(tmp_path / "hyp"),
    )
    assert (tmp_path / "hyp").read_text(encoding="utf-8").splitlines() == by_hand(translator, PARAGRAPHS)
    assert "sentence by sentence" in scored.stdout + scored.stderr and "note:" not in scored.stderr
    whole = run_cli(
        "mt-evaluate", "-c", checkpoint, "--beam", "1", "--src", str(tmp_path / "src"), "--ref", str(tmp_path / "ref")
    )
    assert f"note: {tmp_path / 'src'}: 2 of 4 lines hold several sentences" in whole.stderr


def test_the_python_api_warns_of_lines_of_several_sentences_translated_whole(translator, caplog):
    lines = [" ".join(sentences) for sentences in PARAGRAPHS]
    with caplog.at_level("WARNING"):
        translator.translate(lines)
        translator.translate(lines, split_sentences=True)
        translator.translate("hund läuft rot.")
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and said[0].startswith("2 of 4 lines hold several sentences, translated whole")
    assert said[0].endswith("split_sentences=True translates them one by one")


def test_lines_of_several_sentences_are_counted_and_said(caplog):
    lines = ["Ein Hund rennt. Eine Katze schläft.", "Dr. Müller kam.", "", "Wer? Ich!"]
    assert several_sentences(lines) == 2 and several_sentences(lines[1:3]) == 0
    assert several_sentences_note(1, 3).startswith("note: 1 of 3 lines holds several sentences, translated whole")
    assert several_sentences_note(1, 1).startswith("note: the line holds several sentences")
    held_out = [ParallelCorpus(lines, lines, "valid.de"), ParallelCorpus(lines[1:3], lines[1:3], "test.de")]
    with caplog.at_level("WARNING"):
        note_several_sentences(held_out)
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and said[0].startswith("data: valid.de: 2 of 4 lines hold several sentences")
    assert said[0].endswith("decode.split_sentences=true translates them one by one")
