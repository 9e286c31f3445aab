"""Subtitle files (mt/data/subtitles.py, mt/decoding/subtitle_translation.py): SubRip and WebVTT read into
cues and written back as they were but for the cues' text; a sentence over several cues translated whole
and split back where the alignment puts the cue boundaries; dialogue cues line by line."""

import pytest

import mt
from mt.data.subtitles import Cue, Subtitles
from mt.decoding.subtitle_translation import by_share, laid_out
from mt.errors import MTError

from conftest import LEXICON, run_cli

SRT = """1
00:00:01,000 --> 00:00:03,500
ein mann läuft

2
00:00:03,600 --> 00:00:06,000
schnell hier.

3
00:00:06,500 --> 00:00:08,000
- ein hund schläft.
- eine katze isst.

4
00:00:09,000 --> 00:00:11,000
<i>ein kind sitzt dort</i>
heute rot.

5
00:00:12,000 --> 00:00:13,000
♪ 42 ♪
"""

VTT = """WEBVTT - ein film

NOTE ein hund läuft

STYLE
::cue { color: red }

erste
00:01.000 --> 00:03.500 align:start line:0
<v Anna>ein mann läuft.</v>

00:04.000 --> 00:05.000
ein hund
"""


def write(folder, text, name="film.srt", newline="\n", bom=""):
    path = folder / name
    path.write_bytes((bom + text.replace("\n", newline)).encode("utf-8"))
    return path


@pytest.mark.parametrize("newline, bom", [("\n", ""), ("\r\n", "\ufeff")])
def test_cues_are_found_and_the_file_written_back_as_it_was(tmp_path, newline, bom):
    srt = Subtitles(write(tmp_path, SRT, newline=newline, bom=bom))
    assert [cue.text for cue in srt.cues] == [
        "ein mann läuft", "schnell hier.", "- ein hund schläft. - eine katze isst.",
        "<i>ein kind sitzt dort</i> heute rot.", "♪ 42 ♪",
    ]  # fmt: skip
    assert srt.output().encode("utf-8") == (bom + SRT.replace("\n", newline)).encode("utf-8")
    vtt = Subtitles(write(tmp_path, VTT, "film.vtt"))  # the header, NOTE and STYLE hold no cue; a cue may be named
    assert [cue.lines for cue in vtt.cues] == [["<v Anna>ein mann läuft.</v>"], ["ein hund"]]
    assert vtt.output() == VTT


@pytest.mark.parametrize(
    "text, name, message",
    [
        ("1\nein hund\n\n", "a.srt", "a.srt:1: a cue starts with a number, then a timing line"),
        ("1\n00:00:01,000 -> 00:00:02,000\nein hund\n", "a.srt", "a.srt:1: a cue starts with a number"),
        ("1\n00:00:01 --> 00:00:02,000\nein hund\n", "a.srt", "a.srt:2: not a timing line: '00:00:01 --> "),
        ("00:01.000 --> 00:02.000\nein hund\n", "a.vtt", "a.vtt:1: a WebVTT file starts with WEBVTT"),
        (b"1\n00:00:01,000 --> 00:00:02,000\nein \xff\n", "a.srt", "a.srt:3: invalid UTF-8"),
    ],
)
def test_a_file_that_is_no_subtitles_is_one_line_naming_its_line(tmp_path, text, name, message):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(MTError, match=message):
        Subtitles(path)


def test_words_are_shared_out_in_proportion_and_laid_on_the_cues_lines():
    assert by_share("a b c d e f".split(), [3, 3]) == ["a b c", "d e f"]
    assert by_share("a b c d".split(), [5, 1]) == ["a b c", "d"]  # every run gets a word where there are enough
    assert by_share("a b c".split(), [1, 5]) == ["a", "b c"]
    two = Cue(0, ["x", "y"])  # a cue of two lines
    assert laid_out("A man in a red shirt is walking down the street.", two) == [
        "A man in a red shirt is", "walking down the street."
    ]  # fmt: skip
    assert laid_out("Hallo", two) == ["Hallo"]  # one word: one line
    one = Cue(0, ["x"])  # a line of one, unless it would run over 42 characters
    assert laid_out("A man in a red shirt.", one) == ["A man in a red shirt."]
    assert laid_out("A man in a red shirt is walking down the busy street.", one) == [
        "A man in a red shirt is", "walking down the busy street."
    ]  # fmt: skip


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


def test_a_sentence_over_cues_is_translated_whole_and_split_where_its_words_went(translator, tmp_path):
    report = mt.translate_subtitles(translator, write(tmp_path, SRT), str(tmp_path / "film.en.srt"))
    out = (tmp_path / "film.en.srt").read_text(encoding="utf-8")
    blocks = [block.split("\n") for block in out.rstrip("\n").split("\n\n")]
    source = [block.split("\n") for block in SRT.rstrip("\n").split("\n\n")]
    assert [b[:2] for b in blocks] == [b[:2] for b in source]  # numbering and timing as they were
    whole = translator.translate("ein mann läuft schnell hier.")
    assert " ".join([*blocks[0][2:], *blocks[1][2:]]) == whole  # translated as one sentence, no word lost
    assert blocks[0][2:] == [" ".join(LEXICON[w] for w in ["ein", "mann", "läuft"])]  # cut where its words went
    first, second = translator.translate(["ein hund schläft.", "eine katze isst."])
    assert blocks[2][2:] == [f"- {first}", f"- {second}"]  # a dialogue line by line, each its dash
    assert len(blocks[3]) == 4 and blocks[3][2].startswith("<i>") and "</i>" in blocks[3][2] + blocks[3][3]
    assert blocks[4] == source[4]  # no word: copied
    assert (report.translated, report.joined, report.copied) == (4, 2, 1)
    assert "4 cues translated; 2 in sentences over several cues, split back by alignment" in report.summary()


def test_translate_takes_subtitles_and_names_the_output_they_need(trained_run, tmp_path):
    given = ["translate", "-c", str(trained_run), "-i", str(write(tmp_path, VTT, "film.vtt"))]
    done = run_cli(*given, "-o", str(tmp_path / "film.en.vtt"))
    assert "2 cues translated" in done.stderr
    assert (tmp_path / "film.en.vtt").read_text(encoding="utf-8").startswith("WEBVTT - ein film\n\nNOTE ein hund")
    refused = run_cli(*given, "-o", str(tmp_path / "film.txt"), check=False)
    assert refused.returncode == 2 and "a subtitle input is written as subtitle: name the output .srt or .vtt" in (
        refused.stderr
    )


def test_without_attention_a_sentence_is_split_by_the_cues_share_of_its_words(translator, tmp_path):
    chooser = translator.for_call(strategy="search", beam=2, mbr=2)  # minimum Bayes risk shows no attention
    report = mt.translate_subtitles(chooser, write(tmp_path, SRT), str(tmp_path / "film.en.srt"))
    blocks = (tmp_path / "film.en.srt").read_text(encoding="utf-8").split("\n\n")
    words = chooser.translate("ein mann läuft schnell hier.").split()
    cut = round(len(words) * 3 / 5)  # the first cue held 3 of the sentence's 5 words
    assert blocks[0].split("\n")[2:] == [" ".join(words[:cut])] and blocks[1].split("\n")[2:] == [" ".join(words[cut:])]
    assert report.by_position == 2 and "2 of them split by relative position" in report.summary()
