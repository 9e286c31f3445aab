"""The web page of mt-serve in a real browser (headless Chromium): it shows the language pair, takes a
sentence, and shows its translation. `make test-browser` installs Chromium where it is missing and runs
this with MT_BROWSER_TEST=1, so that a missing browser fails instead of skipping.

MT_SCREENSHOT=path keeps the page's screenshot."""

import base64
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

import mt  # noqa: E402
from mt.serve.limits import ServeLimits  # noqa: E402

from serving import RunningServer  # noqa: E402
from webdriver import Browser, find_browser  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    found = find_browser()
    if found is None:
        if os.environ.get("MT_BROWSER_TEST"):
            pytest.fail("chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver)")
        pytest.skip("no chromium/chromedriver here: make test-browser installs them")
    opened = Browser(*found)
    yield opened
    opened.close()


def test_the_page_translates_what_is_typed(browser, trained_run, tiny_corpus, tmp_path):
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    server = RunningServer(translator)
    try:
        lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:2]
        lines[1] += ". Hund läuft."  # a paragraph: the page translates sentence by sentence
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert browser.wait_for_text("#languages") == "de → en"
        browser.type("#source", "\n".join(lines))
        browser.click("#translate")
        shown = browser.wait_for_text("#result")
        by_sentence = translator.with_settings(translator.settings.updated(split_sentences=True))
        assert shown.split("\n") == by_sentence.translate(lines) != translator.translate(lines)
        assert "greedy search, sentence by sentence" in browser.text("#settings")
        assert browser.text("#status").startswith("2 lines in")
        shot = browser.screenshot()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n"
        Path(os.environ.get("MT_SCREENSHOT") or tmp_path / "page.png").write_bytes(shot)

        assert browser.value("#no-repeat") == "0"  # the server's default: off
        browser.clear("#no-repeat")
        browser.type("#no-repeat", "1")  # no piece twice in a translation
        browser.click("#translate")
        browser.wait_for_text("#settings", containing="no repeated 1-grams")
        no_repeats = by_sentence.with_settings(by_sentence.settings.updated(no_repeat_ngram=1))
        assert browser.text("#result").split("\n") == no_repeats.translate(lines)

        browser.click('#strategy option[value="mbr"]')  # the best of a beam of 8, by how they agree
        browser.click("#translate")
        said = browser.wait_for_text("#settings", containing="minimum Bayes risk")
        assert said.startswith("Settings in use: minimum Bayes risk by chrf over 8 candidates from beam search, beam 8")
        mbr = no_repeats.with_settings(no_repeats.settings.updated(strategy="search", beam=5, mbr=8))
        assert browser.text("#result").split("\n") == mbr.translate(lines)
    finally:
        server.stop()


def test_a_reranking_servers_page_offers_beam_search_alone(browser, trained_run, reverse_run, tiny_corpus):
    forward = mt.load_translator(trained_run, device="cpu", beam=4)
    reranking = forward.with_reverse(mt.load_translator(reverse_run, device="cpu"), 0.5)
    server = RunningServer(reranking)
    try:
        lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:3]
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert browser.wait_for_text("#languages") == "de → en"
        for other in ("greedy", "sample", "mbr"):  # each answered 422 by this server: not offered
            assert not browser.exists(f'#strategy option[value="{other}"]'), other
        browser.type("#source", "\n".join(lines))
        browser.click("#translate")
        shown = browser.wait_for_text("#result")
        assert shown.split("\n") == reranking.translate(lines, split_sentences=True)
        assert "beam search, beam 4" in browser.text("#settings")
        assert "reranked by a reverse model (weight 0.5)" in browser.text("#settings")
    finally:
        server.stop()


def test_the_pages_glossary_box_places_its_entries(browser, trained_run, tiny_corpus):
    translator = mt.load_translator(trained_run, device="cpu", beam=1)  # a greedy server: the box asks for a beam
    server = RunningServer(translator)
    try:
        lines = [line for line in (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines() if "hund" in line]
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert browser.wait_for_text("#languages") == "de → en"
        browser.click("#glossary-box summary")
        browser.type("#glossary", "hund")
        browser.click("#translate")
        assert browser.wait_for_text("#status") == "glossary, line 1: expected source = target"
        browser.clear("#glossary")
        browser.type("#glossary", "# entries\nhund = cat\n")
        browser.type("#source", "\n".join(lines[:3]))
        browser.click("#translate")
        said = browser.wait_for_text("#settings", containing="a glossary of 1 entry")
        assert "beam search, beam 5" in said
        glossary = mt.Glossary({"hund": "cat"}, "de")
        expected = translator.translate(lines[:3], glossary=glossary, beam=5, split_sentences=True)
        assert browser.text("#result").split("\n") == expected
        assert all("cat" in text.replace(".", " ").split() for text in expected)
    finally:
        server.stop()


def test_a_text_file_longer_than_a_request_goes_as_several_and_comes_back_as_one(
    browser, trained_run, tiny_corpus, tmp_path
):
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    server = RunningServer(translator, ServeLimits(max_lines=4, max_line_chars=300))
    try:
        lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:10]
        (tmp_path / "doc.txt").write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert browser.wait_for_text("#languages") == "de → en"
        browser.type("#file", str(tmp_path / "doc.txt"))
        browser.wait_for_text("#status", containing="doc.txt opened: 10 lines")
        browser.click("#translate")
        assert browser.wait_for_text("#status", containing="requests").endswith("(3 requests)")  # 4 + 4 + 2 lines
        expected = translator.translate(lines, split_sentences=True)
        assert browser.text("#result").split("\n") == expected
        got = browser.run_async(
            "const done = arguments[arguments.length - 1], link = document.querySelector('#download');"
            "fetch(link.href).then((r) => r.text()).then((text) => done([link.download, text]));"
        )
        assert got == ["doc.en.txt", "\n".join(expected) + "\n"]

        browser.clear("#source")
        browser.type("#source", "Hund " * 61)  # 305 characters: over the server's limit, said before sending
        browser.click("#translate")
        said = browser.wait_for_text("#status", containing="limit")
        assert said == "line 1: 305 characters; the limit is 300 a line"
        assert server.batcher.lines_decoded == 10
    finally:
        server.stop()


def test_an_xliff_file_opened_comes_back_with_its_targets(browser, trained_run, tiny_corpus, tmp_path):
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    server = RunningServer(translator, ServeLimits(max_lines=4))
    try:
        lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:6]
        units = "".join(
            f'<unit id="{i}"><segment><source>{line}</source></segment></unit>' for i, line in enumerate(lines)
        )
        head = '<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="de" trgLang="en">'
        document = f'{head}<file id="f">{units}</file></xliff>'
        (tmp_path / "doc.xlf").write_text(document, encoding="utf-8")
        asked = {"document": document, "split_sentences": True, "no_repeat_ngram": 0, "strategy": "beam"}
        word = lines[0].split()[0]
        status, expected = server.request("POST", "/xliff", {**asked, "glossary": {word: "puppy"}})  # the page's
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert browser.wait_for_text("#languages") == "de → en"
        browser.click("#glossary-title")
        browser.type("#glossary", f"{word} = puppy")  # the page's glossary goes with the document
        browser.type("#file", str(tmp_path / "doc.xlf"))
        assert (
            browser.wait_for_text("#result", containing="translated")
            == "doc.xlf: 6 segments translated. Download it below."
        )
        got = browser.run_async(
            "const done = arguments[arguments.length - 1], link = document.querySelector('#download');"
            "fetch(link.href).then((r) => r.text()).then((text) => done([link.download, text]));"
        )
        assert status == 200 and got == ["doc.en.xlf", expected]
        assert expected.count("<target>") == 6 and "puppy" in expected
    finally:
        server.stop()


@pytest.mark.parametrize("name", ["app.pot", "page.html", "film.de.srt", "README.de.md"])
def test_a_document_opened_comes_back_translated(browser, trained_run, tiny_corpus, tmp_path, name):
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    server = RunningServer(translator, ServeLimits(max_lines=4))
    try:
        lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:6]
        if name.endswith(".pot"):
            document = "".join(f'msgid "{line}"\nmsgstr ""\n\n' for line in lines)
            route, said, written = "/po", "app.pot: 6 messages translated.", "app.en.po"
        elif name.endswith(".md"):
            document = "".join(f"- {line}\n" for line in lines)
            route, said, written = "/markdown", "README.de.md: 6 segments translated.", "README.de.en.md"
        elif name.endswith(".srt"):
            cues = [f"{i + 1}\n00:00:0{i},000 --> 00:00:0{i},900\n{line}\n\n" for i, line in enumerate(lines)]
            document = "".join(cues)
            route, said, written = "/subtitles", "film.de.srt: 6 cues translated.", "film.de.en.srt"
        else:
            words = lines[0].split()
            lines[0] = " ".join([words[0], f"<b>{words[1]}</b>", *words[2:]])
            document = "<html><body>" + "".join(f"<p>{line}</p>" for line in lines) + "</body></html>"
            route, said, written = "/html", "page.html: 6 segments translated; 1 with inline elements.", "page.en.html"
        (tmp_path / name).write_text(document, encoding="utf-8")
        asked = {"document": document, "split_sentences": True, "no_repeat_ngram": 0, "strategy": "beam"}
        status, expected = server.request("POST", route, asked)  # with the page's choices
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert browser.wait_for_text("#languages") == "de → en"
        browser.type("#file", str(tmp_path / name))
        assert browser.wait_for_text("#result", containing="translated") == f"{said} Download it below."
        got = browser.run_async(
            "const done = arguments[arguments.length - 1], link = document.querySelector('#download');"
            "fetch(link.href).then((r) => r.text()).then((text) => done([link.download, text]));"
        )
        assert status == 200 and got == [written, expected]
    finally:
        server.stop()


@pytest.mark.parametrize(
    "kind, said",
    [
        ("docx", "5 paragraphs translated; 2 with formatting kept"),
        ("xlsx", "3 cell texts translated; 1 with formatting kept"),
        ("odt", "5 paragraphs translated; 2 with formatting kept"),
        ("epub", "6 segments translated; 1 with inline elements"),
    ],
)
def test_an_office_document_opened_comes_back_translated(browser, trained_run, tmp_path, kind, said):
    from test_epub import epub
    from test_office_documents import MAKERS

    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    server = RunningServer(translator, ServeLimits(max_lines=4))
    try:
        document = {**MAKERS, "epub": epub}[kind](tmp_path / f"bericht.{kind}").read_bytes()
        asked = {"document": base64.b64encode(document).decode(), "split_sentences": True, "no_repeat_ngram": 0}
        status, expected, _ = server.document(f"/{kind}", json.dumps(asked).encode(), "application/json", text=False)
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert browser.wait_for_text("#languages") == "de → en"
        browser.type("#file", str(tmp_path / f"bericht.{kind}"))
        assert (
            browser.wait_for_text("#result", containing="translated") == f"bericht.{kind}: {said}. Download it below."
        )
        got = browser.run_async(
            "const done = arguments[arguments.length - 1], link = document.querySelector('#download');"
            "fetch(link.href).then((r) => r.arrayBuffer()).then((buffer) => done([link.download,"
            " Array.from(new Uint8Array(buffer))]));"
        )
        assert status == 200 and got[0] == f"bericht.en.{kind}" and bytes(got[1]) == expected
    finally:
        server.stop()
