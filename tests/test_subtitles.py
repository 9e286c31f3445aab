"""Subtitle files (mt/data/subtitles.py, mt/decoding/subtitle_translation.py): SubRip and WebVTT read into
cues and written back as they were but for the cues' text; a sentence over several cues translated whole
and split back where the alignment puts the cue boundaries; dialogue cues line by line."""

import pytest

import mt
from mt.data.cues import Cue
from mt.data.subtitles import Subtitles, read_subtitles
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


ASS = """[Script Info]
; ein hund
ScriptType: v4.00+

[V4+ Styles]
Format: Name, Fontname, Fontsize
Style: Default,Arial,20

[Events]
Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text
Dialogue: 0,0:00:01.00,0:00:03.50,Default,Anna,0,0,0,,ein mann läuft
Dialogue: 0,0:00:03.60,0:00:06.00,Default,Anna,0,0,0,,{\\i1}schnell{\\i0}, hier.
Comment: 0,0:00:06.00,0:00:07.00,Default,,0,0,0,,ein hund
Dialogue: 0,0:00:06.00,0:00:08.00,Default,Ben,0,0,0,,ein hund schläft\\Nheute rot
Dialogue: 0,0:00:08.50,0:00:09.50,Default,Anna,0,0,0,,eine katze isst.
Dialogue: 0,0:00:10.00,0:00:11.00,Sign,,0,0,0,,{\\p1}m 0 0 l 10 0{\\p0}
Dialogue: 0,0:00:12.00,0:00:13.00,Default,,0,0,0,,{\\k20}ein{\\k30}hund
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
    ass = read_subtitles(write(tmp_path, ASS, "film.ass", newline=newline, bom=bom))  # Dialogue lines, cut at \N
    assert [cue.lines for cue in ass.cues][2:4] == [["ein hund schläft", "heute rot"], ["eine katze isst."]]
    assert [(cue.start, cue.end, cue.voice) for cue in ass.cues][:3] == [
        (1.0, 3.5, "Default/Anna"), (3.6, 6.0, "Default/Anna"), (6.0, 8.0, "Default/Ben")
    ]  # fmt: skip
    assert [cue.kept for cue in ass.cues] == [False] * 4 + [True] * 2  # a drawing, karaoke
    assert ass.output().encode("utf-8") == (bom + ASS.replace("\n", newline)).encode("utf-8")


@pytest.mark.parametrize(
    "text, name, message",
    [
        ("1\nein hund\n\n", "a.srt", "a.srt:1: a cue starts with a number, then a timing line"),
        ("1\n00:00:01,000 -> 00:00:02,000\nein hund\n", "a.srt", "a.srt:1: a cue starts with a number"),
        ("1\n00:00:01 --> 00:00:02,000\nein hund\n", "a.srt", "a.srt:2: not a timing line: '00:00:01 --> "),
        ("00:01.000 --> 00:02.000\nein hund\n", "a.vtt", "a.vtt:1: a WebVTT file starts with WEBVTT"),
        (b"1\n00:00:01,000 --> 00:00:02,000\nein \xff\n", "a.srt", "a.srt:3: invalid UTF-8"),
        ("[Events]\n", "a.ass", "a.ass:1: a SubStation Alpha file starts with \\[Script Info\\]"),
        ("[Script Info]\n[Events]\nDialogue: 0,0:00:01.00,0:00:02.00,x\n", "a", "a:3: a Dialogue line before the "),
        ("[Script Info]\n[Events]\nFormat: Start, End\n", "a.ass", "a.ass:3: a Format line names Start and End, and"),
        (f"{ASS}Dialogue: 0,0:00:01.00,ein hund\n", "a.ass", "a.ass:18: a Dialogue line of 3 fields; Format names 10"),
        (f"{ASS}Dialogue: 0,1.00,0:00:02.00,,,,,,,x\n", "a.ass", "a.ass:18: Start: not a time .*: '1.00'"),
    ],
)
def test_a_file_that_is_no_subtitles_is_one_line_naming_its_line(tmp_path, text, name, message):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(MTError, match=message):
        read_subtitles(path)


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
    for other in ("film.txt", "film.srt"):  # a WebVTT file written as WebVTT, not as text or SubRip
        refused = run_cli(*given, "-o", str(tmp_path / other), check=False)
        assert refused.returncode == 2 and "a WebVTT input is written as WebVTT: name the output .vtt" in refused.stderr
    given = ["translate", "-c", str(trained_run), "-i", str(write(tmp_path, ASS, "film.ass"))]
    assert "4 cues translated" in run_cli(*given, "-o", str(tmp_path / "film.en.ssa")).stderr  # .ass or .ssa
    refused = run_cli(*given, "-o", str(tmp_path / "film.en.srt"), check=False)
    assert "a SubStation Alpha input is written as SubStation Alpha: name the output .ass or .ssa" in refused.stderr


def test_without_attention_a_sentence_is_split_by_the_cues_share_of_its_words(translator, tmp_path):
    chooser = translator.for_call(strategy="search", beam=2, mbr=2)  # minimum Bayes risk shows no attention
    report = mt.translate_subtitles(chooser, write(tmp_path, SRT), str(tmp_path / "film.en.srt"))
    blocks = (tmp_path / "film.en.srt").read_text(encoding="utf-8").split("\n\n")
    words = chooser.translate("ein mann läuft schnell hier.").split()
    cut = round(len(words) * 3 / 5)  # the first cue held 3 of the sentence's 5 words
    assert blocks[0].split("\n")[2:] == [" ".join(words[:cut])] and blocks[1].split("\n")[2:] == [" ".join(words[cut:])]
    assert report.by_position == 2 and "2 of them split by relative position" in report.summary()


def test_substation_cues_join_for_one_voice_and_keep_their_codes_lines_drawings_and_karaoke(translator, tmp_path):
    report = mt.translate_subtitles(translator, write(tmp_path, ASS, "film.ass"), str(tmp_path / "film.en.ass"))
    out = (tmp_path / "film.en.ass").read_text(encoding="utf-8").split("\n")
    source = ASS.split("\n")
    translated = [10, 11, 13, 14]  # the Dialogue lines with words, but a drawing and karaoke; not a Comment
    assert [line for i, line in enumerate(out) if i not in translated] == [
        line for i, line in enumerate(source) if i not in translated
    ]  # fmt: skip
    heads = [out[i].rsplit(",,", 1)[0] for i in translated]
    assert heads == [source[i].rsplit(",,", 1)[0] for i in translated]  # each line's fields but its text
    whole = translator.translate(r"ein mann läuft {\i1}schnell{\i0}, hier.")  # the tag kind is SubStation's too
    assert " ".join(line.rsplit(",,", 1)[1] for line in out[10:12]) == whole
    ben = translator.translate("ein hund schläft heute rot")  # alone: Anna's next cue is not Ben's
    assert out[13].endswith(",," + "\\N".join(laid_out(ben, Cue(0, ["x", "y"]))))  # on two lines, as it was
    assert out[14].endswith(",," + translator.translate("eine katze isst."))
    assert (report.translated, report.joined, report.copied) == (4, 2, 2)  # a drawing and karaoke copied


@pytest.mark.parametrize("start, joined", [("00:00:03,900", 2), ("00:00:04,000", 0), ("00:00:00,500", 0)])
def test_cues_apart_by_a_pause_or_shown_together_are_not_one_sentence(translator, tmp_path, start, joined):
    srt = f"1\n00:00:00,500 --> 00:00:02,000\nein mann läuft\n\n2\n{start} --> 00:00:09,000\nschnell hier.\n"
    report = mt.translate_subtitles(translator, write(tmp_path, srt), str(tmp_path / "film.en.srt"))
    assert report.joined == joined  # 1.9 s apart: one sentence; 2 s: a pause; shown together: two of them


def test_webvtt_voices_are_not_joined_and_its_timestamps_are_kept_from_the_model(translator, tmp_path):
    cues = ["<v Anna>ein mann läuft", "<v Ben>ein hund schläft.", "eine katze <00:03.500>isst."]
    vtt = "WEBVTT\n" + "".join(f"\n00:0{i}.000 --> 00:0{i}.900\n{cue}\n" for i, cue in enumerate(cues, 1))
    unprotected = translator.for_call(protect="none")  # subtitles' codes are kept all the same
    report = mt.translate_subtitles(unprotected, write(tmp_path, vtt, "film.vtt"), str(tmp_path / "film.en.vtt"))
    last = (tmp_path / "film.en.vtt").read_text(encoding="utf-8").rstrip("\n").split("\n")[-1]
    assert report.joined == 0  # Anna's cue does not run on into Ben's
    assert last.count("<00:03.500>") == 1 and " ".join(last.replace("<00:03.500>", " ").split()) == (
        translator.translate("eine katze isst.")
    )
