"""HTML pages (mt/data/html_document.py, mt/decoding/html_translation.py): cut into segments at block
elements, their inline elements kept in place, what is not text to translate left as it is, the page
written back as it was read but for the translations and <html lang>."""

import pytest

import mt
from mt.data.html_document import HtmlPage
from mt.errors import MTError

from conftest import LEXICON, run_cli

PAGE = """\ufeff<!DOCTYPE html>
<html lang="de">
<head>
  <meta charset="utf-8"><meta name="description" content="ein hund"><meta name="viewport" content="width=1">
  <title>ein hund</title>
  <style>p { color: red; }</style>
  <script>var s = "<p>ein hund</p>";</script>
</head>
<body>
  <!-- ein kommentar -->
  <h1>ein mann läuft</h1>
  <p>ein <b>hund</b> springt<br>
     eine katze   schläft <a href="/x?a=1&amp;b=2" title="hier">hier</a></p>
  <hr class="notranslate"><ul><li>ein kind &amp; eine frau</li><li>42</li></ul><img src="k.png" alt='eine &amp; katze'>
  <div class="box notranslate"><p>ein hund bleibt</p><div>auch <div>das</div></div></div>
  <p>ein mann isst <code>ein hund</code> <span translate="no">Bello</span></p>
  <pre>ein hund
  bleibt</pre>
</body>
</html>
"""


def write_page(folder, text=PAGE, name="page.html"):
    path = folder / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_a_page_is_cut_into_segments_between_its_block_elements(tmp_path):
    page = HtmlPage(write_page(tmp_path))
    assert [s.source for s in page.segments] == [
        "ein hund",
        "ein mann läuft",
        "ein <b>hund</b> springt",
        'eine katze schläft <a href="/x?a=1&amp;b=2" title="hier">hier</a>',  # one space a run, as shown
        "ein kind & eine frau",  # references read
        'ein mann isst <code>ein hund</code> <span translate="no">Bello</span>',
    ]
    assert page.segments[3].lead == "\n     "
    assert [a.source for a in page.attributes] == ["ein hund", "hier", "eine & katze"]  # what a reader sees
    assert page.output() == PAGE  # nothing translated: the page as it was read, byte for byte


@pytest.mark.parametrize(
    "text, message",
    [
        ('<html><head><meta charset="iso-8859-1"></head></html>', "its charset is iso-8859-1; save it as UTF-8"),
        ('<html lang="fr"><p>un chien</p></html>', "its language is fr; the model translates from de"),
    ],
)
def test_a_page_the_model_cannot_take_is_one_line(tmp_path, translator, text, message):
    with pytest.raises(MTError, match=message):
        mt.translate_html(translator, write_page(tmp_path, text), str(tmp_path / "out.html"))


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


def test_the_text_is_translated_and_the_markup_kept(translator, tmp_path):
    report = mt.translate_html(translator, write_page(tmp_path), str(tmp_path / "page.en.html"))
    assert (report.translated, report.with_elements, report.attributes) == (6, 3, 3)
    out = (tmp_path / "page.en.html").read_bytes().decode("utf-8")
    assert out.startswith('\ufeff<!DOCTYPE html>\n<html lang="en">')
    for kept in (
        '<script>var s = "<p>ein hund</p>";</script>',
        "<!-- ein kommentar -->",
        '<div class="box notranslate"><p>ein hund bleibt</p><div>auch <div>das</div></div></div>',
        "<pre>ein hund\n  bleibt</pre>",
        "<li>42</li>",
        '<code>ein hund</code> <span translate="no">Bello</span></p>',
    ):
        assert kept in out
    words = translator.translate(["ein hund", "ein mann läuft"])
    assert f"<title>{words[0]}</title>" in out and f"<h1>{words[1]}</h1>" in out
    assert f'<meta name="description" content="{words[0]}"><meta name="viewport" content="width=1">' in out
    assert f"<b>{LEXICON['hund']}</b>" in out  # the inline element around its word's translation
    assert "<br>\n     " in out and f'<a href="/x?a=1&amp;b=2" title="{LEXICON["hier"]}">' in out
    assert f"<img src=\"k.png\" alt='{translator.translate('eine & katze')}'>" in out  # quoted as it was
    assert "&amp;" in out.split("<ul>")[1] or "&" not in out.split("<ul>")[1]  # an ampersand written as one
    back = HtmlPage(tmp_path / "page.en.html")
    assert len(back.segments) == 6  # the translation is a page of the same shape


def test_translate_takes_a_page(trained_run, tmp_path):
    given = ["translate", "-c", str(trained_run), "-i", str(write_page(tmp_path))]
    done = run_cli(*given, "-o", str(tmp_path / "page.en.html"))
    said = "6 segments translated, 3 with inline elements kept in place; 3 attribute texts (alt, title, ...) translated"
    assert said in done.stderr
    refused = run_cli(*given, "-o", str(tmp_path / "page.txt"), check=False)
    assert (
        refused.returncode == 2 and "an HTML input is written as HTML: name the output .html or .htm" in refused.stderr
    )


def test_a_comment_stays_in_its_sentence_and_escaped_brackets_are_kept_from_the_model(translator, tmp_path):
    text = "<p>ein <!-- alt: eine katze --> hund springt</p>\n<p>ein mann &lt;hier&gt;</p>\n"
    page = HtmlPage(write_page(tmp_path, text))
    # a comment splits no sentence; before, the <p> was two segments, "ein" and "hund springt"
    assert [s.source for s in page.segments] == ["ein <!-- alt: eine katze --> hund springt", "ein mann &lt;hier&gt;"]
    mt.translate_html(translator, page.path, str(tmp_path / "out.html"))
    out = (tmp_path / "out.html").read_text(encoding="utf-8")
    first, second = translator.translate(["ein hund springt", "ein mann hier"])
    assert out.count("<!-- alt: eine katze -->") == 1 and out.count("<p>") == 2
    assert out.replace("<!-- alt: eine katze --> ", "").startswith(f"<p>{first}</p>")
    assert f"<p>{second.replace(LEXICON['hier'], '&lt;' + LEXICON['hier'] + '&gt;')}</p>" in out


def test_no_break_spaces_stay_where_the_translation_keeps_what_they_joined(tmp_path):
    page = HtmlPage(write_page(tmp_path, "<p>Dr.&nbsp;Rossi läuft 10&nbsp;km</p><td>&nbsp;ein hund</td>\n"))
    assert [s.source for s in page.segments] == ["Dr.\u00a0Rossi läuft 10\u00a0km", "\u00a0ein hund"]
    page.translations = {0: "Dr. Rossi runs 10 km", 1: "a dog"}  # the model writes them as spaces
    # before, "Dr. Rossi runs 10 km" and "a dog": the no-break spaces lost
    assert page.output() == "<p>Dr.&nbsp;Rossi runs 10&nbsp;km</p><td>&nbsp;a dog</td>\n"


def test_two_attributes_of_one_tag_are_both_written_whole(tmp_path):
    page = HtmlPage(write_page(tmp_path, '<p><img src="a.png" alt="ein hund" title="eine katze"> hier</p>\n'))
    assert [a.source for a in page.attributes] == ["ein hund", "eine katze"]
    tag = '<img src="a.png" alt="ein hund" title="eine katze">'
    page.translations, page.attribute_translations = {0: f"{tag} here"}, {0: "a longer dog", 1: "a cat"}
    # before, the second value was cut in at the first's old offsets: alt="a longer dogka cat..."
    assert page.output() == '<p><img src="a.png" alt="a longer dog" title="a cat"> here</p>\n'


def test_an_icon_among_words_stays_in_their_sentence_and_a_diagrams_text_is_left(tmp_path):
    icon = '<svg viewBox="0 0 1 1" aria-label="pfeil"><path d="M0 0"/></svg>'
    body = f"<p>klicken sie {icon} hier, um zu laden.</p><svg><text>achse</text></svg><p><svg/> ein hund</p>\n"
    page = HtmlPage(write_page(tmp_path, body))
    # before, the icon cut the sentence in two: "klicken sie" and "hier, um zu laden."
    assert [s.source for s in page.segments] == [f"klicken sie {icon} hier, um zu laden.", "<svg/> ein hund"]
    assert [a.source for a in page.attributes] == ["pfeil"]  # what a screen reader says of it: translated too
    page.translations = {0: f"click {icon} here to load.", 1: "<svg/> a dog"}
    assert page.output() == body.replace("klicken sie", "click").replace(" hier, um zu laden", " here to load").replace(
        "ein hund", "a dog"
    )
