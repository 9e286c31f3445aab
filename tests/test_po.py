"""Gettext PO catalogues (mt/data/po.py, mt/decoding/po_translation.py): read and written back line for
line, untranslated messages translated line by line with their placeholders and accelerator keys kept,
plural forms filled as the language has them, new translations marked fuzzy; bad files one line naming
file and line."""

import gettext
import random
import shutil
import subprocess

import pytest

import mt
from mt.data.po import Catalogue, parse_entry, string_lines
from mt.errors import MTError

from conftest import LEXICON, run_cli

HEADER = """# Translations of a tiny app.
#, fuzzy
msgid ""
msgstr ""
"Project-Id-Version: tiny 1.0\\n"
"Language: {language}\\n"
"Content-Type: text/plain; charset=CHARSET\\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\\n"
"""

ENTRIES = """
#. shown on the first page
#: app.py:10
msgid "ein hund läuft"
msgstr ""

#: app.py:12
#, python-format
msgid "ein mann isst %(food)s"
msgstr ""

#, python-format
msgid "eine katze schläft"
msgid_plural "%(n)d katze schläft hier"
msgstr[0] ""
msgstr[1] ""

msgid ""
"ein kind springt\\n"
"  ein hund schläft: "
msgstr ""

msgctxt "menu"
msgid "ein mann"
msgstr "a person"

msgid "%s: 42"
msgstr ""

#~ msgid "alt"
#~ msgstr "old"
"""


def write_pot(folder, language="", entries=ENTRIES):
    path = folder / "app.pot"
    path.write_text(HEADER.format(language=language) + entries, encoding="utf-8")
    return path


def test_a_catalogue_is_written_back_line_for_line(tmp_path):
    path = tmp_path / "done.po"
    text = HEADER.format(language="en") + ENTRIES.replace('msgstr ""\n\n#:', 'msgstr "x"\n\n#:')
    path.write_text(text, encoding="utf-8")
    catalogue = Catalogue(path)
    assert catalogue.text() == text.replace("charset=CHARSET", "charset=UTF-8")
    entries = [e for e in catalogue.entries if not e.is_header]
    assert [e.untranslated() for e in entries] == [False, True, True, True, False, True, False]
    assert entries[3].strings["msgid"] == "ein kind springt\n  ein hund schläft: "
    assert entries[-1].obsolete and entries[4].strings["msgctxt"] == "menu"


def test_a_string_written_reads_back_as_it_was():
    rng = random.Random(0)
    for _ in range(300):
        value = "".join(rng.choice('ab "\\\n\t\rü{}%') for _ in range(rng.randint(0, 12)))
        lines = string_lines("msgstr", value)
        assert not any(char in line for line in lines for char in "\r\n\t")  # escaped, each line one line
        assert parse_entry(['msgid "x"', *lines], 1, "t.po").strings["msgstr"] == value, lines


def test_entries_without_a_blank_line_between_are_read_apart(tmp_path):
    text = 'msgid "ein hund"\nmsgstr ""\n#: a.py:1\nmsgid "eine katze"\nmsgstr "a cat"\n'
    text += 'msgctxt "x"\nmsgid "ein"\nmsgstr ""\n'
    (tmp_path / "tight.po").write_text(text, encoding="utf-8")
    catalogue = Catalogue(tmp_path / "tight.po")
    assert [e.strings["msgid"] for e in catalogue.entries] == ["ein hund", "eine katze", "ein"]
    assert [e.untranslated() for e in catalogue.entries] == [True, False, True]
    assert catalogue.text() == text


@pytest.mark.parametrize(
    "text, message",
    [
        ('msgid "a"\n"b\nmsgstr ""\n', "bad.po:2: a quoted string is expected"),
        ('msgid "a"\nmsgid "b"\nmsgstr ""\n', "bad.po:2: a second msgid in one entry"),
        ('"a"\nmsgid "a"\nmsgstr ""\n', "bad.po:1: a string continues no msgid or msgstr"),
        ('msgid "a"\n', "bad.po:1: an entry without msgstr"),
        ('msgid "a"\nmsgstring ""\n', "bad.po:2: not a PO line"),
        ('msgid ""\nmsgstr "Content-Type: text/plain; charset=ISO-8859-1\\n"\n', "msgconv --to-code=UTF-8"),
    ],
)
def test_a_bad_catalogue_is_one_line_naming_file_and_line(tmp_path, text, message):
    (tmp_path / "bad.po").write_text(text, encoding="utf-8")
    with pytest.raises(MTError, match=message.replace("(", r"\(")):
        Catalogue(tmp_path / "bad.po")


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


def test_untranslated_messages_are_translated_and_marked_fuzzy(translator, tmp_path):
    report = mt.translate_po(translator, write_pot(tmp_path), str(tmp_path / "en.po"))
    assert (report.translated, report.plural, report.copied, report.kept) == (4, 1, 1, 1)
    catalogue = Catalogue(tmp_path / "en.po")
    assert catalogue.header_field("Language") == "en"  # a template's, the model's
    assert catalogue.header_field("Plural-Forms") == "nplurals=2; plural=(n != 1);"
    assert "charset=UTF-8" in catalogue.header_field("Content-Type")
    entries = {(e.strings.get("msgctxt"), e.strings["msgid"]): e for e in catalogue.entries if not e.obsolete}
    first = entries[(None, "ein hund läuft")]
    assert first.strings["msgstr"] == translator.translate("ein hund läuft") == "a dog runs"
    assert first.flags == ["fuzzy"] and first.lines[:2] == ["#. shown on the first page", "#: app.py:10"]
    food = entries[(None, "ein mann isst %(food)s")]
    assert food.flags == ["fuzzy", "python-format"] and "%(food)s" in food.strings["msgstr"]
    assert food.strings["msgstr"].startswith(f"{LEXICON['ein']} {LEXICON['mann']} {LEXICON['isst']}")
    plural = entries[(None, "eine katze schläft")]
    assert plural.translations["msgstr[1]"].startswith("%(n)d ") and plural.translations["msgstr[0]"]
    lines = entries[(None, "ein kind springt\n  ein hund schläft: ")].strings["msgstr"]
    line_by_line = translator.translate(["ein kind springt", "ein hund schläft:"])
    assert lines == f"{line_by_line[0]}\n  {line_by_line[1]} "  # line by line, the whitespace around each kept
    assert entries[("menu", "ein mann")].strings["msgstr"] == "a person"  # a translator's work is kept
    assert entries[(None, "%s: 42")].strings["msgstr"] == "%s: 42"  # no word: copied
    assert '#~ msgid "alt"' in catalogue.text()
    if shutil.which("msgfmt"):  # gettext's own compiler accepts it, and its runtime reads it back
        subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", str(tmp_path / "en.mo"), str(tmp_path / "en.po")],
                       check=True, capture_output=True)  # fmt: skip
        with open(tmp_path / "en.mo", "rb") as f:
            compiled = gettext.GNUTranslations(f)
        assert compiled.gettext("ein hund läuft") == "a dog runs"
        assert compiled.ngettext("eine katze schläft", "%(n)d katze schläft hier", 3).startswith("%(n)d")


def test_plural_forms_as_the_language_has_them(translator, tmp_path):
    entries = 'msgid "eine katze"\nmsgid_plural "%d katze"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    path = write_pot(tmp_path, "cs", "\n" + entries)
    with pytest.raises(MTError, match="a catalogue for cs; the model translates into en"):
        mt.translate_po(translator, path, str(tmp_path / "cs.po"))
    path.write_text(path.read_text().replace("Language: cs", "Language: en_GB").replace("INTEGER", "3"), "utf-8")
    mt.translate_po(translator, path, str(tmp_path / "en.po"))
    filled = [e for e in Catalogue(tmp_path / "en.po").entries if not e.is_header][0]
    assert list(filled.translations) == ["msgstr[0]", "msgstr[1]", "msgstr[2]"]  # the header's nplurals=3
    plurals = path.read_text().replace("EXPRESSION", "(n==0 ? 0 : n==1 ? 1 : 2)")  # as Arabic's: 0 is for none
    path.write_text(plurals, "utf-8")
    mt.translate_po(translator, path, str(tmp_path / "en.po"))
    filled = [e for e in Catalogue(tmp_path / "en.po").entries if not e.is_header][0]
    none, one, more = (filled.translations[f"msgstr[{k}]"] for k in range(3))
    assert one == translator.translate("eine katze") and none == more != one and more.startswith("%d ")  # n=1: 1


def test_translate_takes_a_catalogue_and_refuses_what_goes_with_lines(trained_run, tmp_path):
    path = write_pot(tmp_path)
    given = ["translate", "-c", str(trained_run), "-i", str(path)]
    done = run_cli(*given, "-o", str(tmp_path / "en.po"))
    assert (
        "4 messages translated (1 with plural forms), marked fuzzy for review; 1 message without words" in done.stderr
    )
    assert run_cli(*given, "-q").stdout == (tmp_path / "en.po").read_text(encoding="utf-8")  # no -o: stdout
    (tmp_path / "in.de").write_text("ein hund\n", encoding="utf-8")
    for flags, message in (
        (["--nbest", "2", "--beam", "2"], "--nbest goes with a file of lines, not a PO catalogue"),
        (["-o", str(tmp_path / "out.txt")], "a PO input is written as PO: name the output .po"),
        (["-o", str(tmp_path / "out.xlf")], "an XLIFF output is an XLIFF input translated: give -i doc.xlf"),
    ):
        refused = run_cli(*given, *flags, check=False)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    lines_to_po = run_cli(*given[:-2], "-i", str(tmp_path / "in.de"), "-o", str(tmp_path / "x.po"), check=False)
    assert lines_to_po.returncode == 2 and "a PO output is a PO input translated: give -i app.pot" in lines_to_po.stderr


def test_a_catalogues_accelerators_are_kept_and_gettext_accepts_them(translator, tmp_path):
    entries = '\nmsgid "ein _mann läuft"\nmsgstr ""\n\nmsgid "ein hund &schläft"\nmsgstr ""\n'
    report = mt.translate_po(translator, write_pot(tmp_path, "en", entries), str(tmp_path / "en.po"))
    found = [e.strings["msgstr"] for e in Catalogue(tmp_path / "en.po").entries if not e.is_header]
    assert (
        found
        == ["a _man runs", "a dog &sleeps"]
        == [
            t.replace("man", "_man", 1).replace("sleeps", "&sleeps")
            for t in translator.translate(["ein mann läuft", "ein hund schläft"])
        ]
    )
    assert report.accelerators == 2 and "(2 with accelerator keys kept)" in report.summary()
    if shutil.which("msgfmt"):  # gettext's check: a message with a marker has one in its translation
        for marker in "_&":
            subprocess.run(["msgfmt", f"--check-accelerators={marker}", "--use-fuzzy", "-o", "/dev/null",
                            str(tmp_path / "en.po")], check=True, capture_output=True)  # fmt: skip


def test_a_catalogue_naming_its_marker_has_only_that_one(translator, tmp_path):
    path = tmp_path / "app.pot"
    header = HEADER.format(language="en").replace('"Language:', '"X-Accelerator-Marker: &\\n"\n"Language:')
    path.write_text(header + '\nmsgid "ein &mann"\nmsgstr ""\n\nmsgid "ein _mann"\nmsgstr ""\n', encoding="utf-8")
    mt.translate_po(translator, path, str(tmp_path / "en.po"))
    found = [e.strings["msgstr"] for e in Catalogue(tmp_path / "en.po").entries if not e.is_header]
    assert found[0] == "a &man" and "_" not in translator.translate("ein mann")
    assert found[1] == translator.translate("ein _mann")  # "_" is no marker here: the model reads it
