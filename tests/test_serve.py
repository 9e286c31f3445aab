"""mt-serve: the HTTP API answers as `translate` does, batches concurrent requests together, refuses
every bad request with a 4xx and one line of JSON, and goes on serving."""

import asyncio
import base64
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import mt  # noqa: E402
from mt.serve.limits import RequestError, ServeLimits, check_glossary  # noqa: E402

from conftest import REPO, cli_path, run_cli  # noqa: E402
from serving import RunningServer  # noqa: E402

OFFICE = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "odt": "application/vnd.oasis.opendocument.text",
}

LIMITS = ServeLimits(max_lines=16, max_bytes=4096, max_line_chars=300, max_beam=4, max_nbest=4)


@pytest.fixture(scope="module")
def checkpoint(trained_run):
    return trained_run / "checkpoints" / "final.pt"


@pytest.fixture(scope="module")
def server(checkpoint):
    translator = mt.load_translator(checkpoint, device="cpu", beam=1)
    running = RunningServer(translator, LIMITS, max_wait=0.05, workers=2)  # two decoding threads, as on a CPU
    yield running
    running.stop()


@pytest.fixture(scope="module")
def lines(tiny_corpus):
    return (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:12]


def translate_cli(checkpoint, lines, *flags):
    out = run_cli("translate", "-c", str(checkpoint), "-q", *flags, input_text="".join(x + "\n" for x in lines))
    return out.stdout.splitlines()


@pytest.mark.parametrize(
    "request_settings, flags",
    [
        ({}, ["--beam", "1"]),
        ({"strategy": "beam", "beam": 3, "alpha": 1.0}, ["--beam", "3", "--alpha", "1.0"]),
        ({"strategy": "sample", "seed": 5, "topk": 4}, ["--strategy", "sample", "--seed", "5", "--topk", "4"]),
        (
            {"strategy": "beam", "beam": 3, "min_len": 7, "no_repeat_ngram": 1},
            ["--beam", "3", "--min-len", "7", "--no-repeat-ngram", "1"],
        ),
        ({"strategy": "beam", "mbr": 4}, ["--strategy", "beam", "--mbr", "4"]),
        (
            {"strategy": "sample", "seed": 5, "epsilon": 0.05, "mbr": 4, "mbr_utility": "bleu"},
            ["--strategy", "sample", "--seed", "5", "--epsilon", "0.05", "--mbr", "4", "--mbr-utility", "bleu"],
        ),
    ],
    ids=["greedy", "beam", "sample", "constrained", "mbr", "mbr-samples"],
)
def test_answers_equal_translates_output(server, checkpoint, lines, request_settings, flags):
    status, answer = server.translate({"lines": lines, **request_settings})
    assert status == 200
    assert answer["translations"] == translate_cli(checkpoint, lines, *flags)


def test_prefixes_scores_and_nbest(server, checkpoint, lines, tmp_path):
    prefixes = ["the", ""] * 6
    status, answer = server.translate({"lines": lines, "prefixes": prefixes, "nbest": 2, "strategy": "beam"})
    assert status == 200 and all(t.startswith(p) for p, t in zip(prefixes, answer["translations"]))
    (tmp_path / "prefix").write_text("".join(p + "\n" for p in prefixes), encoding="utf-8")
    assert answer["translations"] == translate_cli(
        checkpoint, lines, "--beam", "5", "--prefix", str(tmp_path / "prefix")
    )
    assert [len(h) for h in answer["hypotheses"]] == [2] * len(lines)
    assert all(h[0]["score"] >= h[1]["score"] for h in answer["hypotheses"])
    status, scored = server.translate({"lines": lines[:2], "scores": True})
    assert status == 200 and [len(h) for h in scored["hypotheses"]] == [1, 1]


def test_terms_as_translate_places_them(server, checkpoint, lines, tmp_path):
    terms = [["dog"], [], ["red", "quickly"]] * 4
    status, answer = server.translate({"lines": lines, "strategy": "beam", "terms": terms})
    assert status == 200
    (tmp_path / "terms").write_text("".join("\t".join(t) + "\n" for t in terms), encoding="utf-8")
    assert answer["translations"] == translate_cli(checkpoint, lines, "--beam", "5", "--terms", str(tmp_path / "terms"))
    assert all(set(t) <= set(text.rstrip(".").split()) for t, text in zip(terms, answer["translations"]))
    prefixes = ["A", "", "The"] * 4  # and after a forced prefix
    status, started = server.translate({"lines": lines, "strategy": "beam", "terms": terms, "prefixes": prefixes})
    (tmp_path / "prefixes").write_text("".join(p + "\n" for p in prefixes), encoding="utf-8")
    flags = "--beam", "5", "--terms", str(tmp_path / "terms"), "--prefix", str(tmp_path / "prefixes")
    assert status == 200 and started["translations"] == translate_cli(checkpoint, lines, *flags)
    assert all(text.startswith(p) for p, text in zip(prefixes, started["translations"]))


def test_a_requests_own_glossary_is_placed_as_translate_places_a_glossarys(server, checkpoint, lines, tmp_path):
    (tmp_path / "glossary.tsv").write_text("hund\tcat\n", encoding="utf-8")
    status, answer = server.translate({"lines": lines, "strategy": "beam", "beam": 4, "glossary": {"hund": "cat"}})
    assert status == 200
    expected = translate_cli(checkpoint, lines, "--beam", "4", "--glossary", str(tmp_path / "glossary.tsv"))
    assert answer["translations"] == expected and any("hund" in line.split() for line in lines)
    status, answer = server.translate({"lines": lines, "glossary": {"hund": "cat"}})  # the server's greedy search
    assert status == 422 and "terms are placed by beam search" in answer["error"]
    status, answer = server.translate({"lines": lines[:2], "strategy": "beam", "beam": 4})  # none: as before
    assert status == 200 and answer["translations"] == translate_cli(checkpoint, lines[:2], "--beam", "4")
    with pytest.raises(RequestError, match="glossary: 3 entries; the limit is 2 a request"):
        check_glossary({"a": "b", "c": "d", "e": "f"}, ServeLimits(max_glossary_entries=2))


def test_an_xliff_document_is_filled_in_as_translate_fills_it(server, checkpoint, tiny_corpus, tmp_path):
    lines = (tiny_corpus / "valid.de").read_text(encoding="utf-8").splitlines()[:20]  # more than max_lines (16)
    words = lines[0].split()
    lines[0] = " ".join([words[0], f'<g id="1">{words[1]}</g><x id="2"/>', *words[2:]])
    units = "".join(f'<trans-unit id="{i}"><source>{line}</source></trans-unit>\n' for i, line in enumerate(lines))
    document = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        f'<file original="a" source-language="de" target-language="en" datatype="plaintext"><body>\n{units}'
        "</body></file></xliff>\n"
    )
    (tmp_path / "doc.xlf").write_text(document, encoding="utf-8")
    run_cli(
        "translate",
        "-c",
        str(checkpoint),
        "--beam",
        "1",
        "-i",
        str(tmp_path / "doc.xlf"),
        "-o",
        str(tmp_path / "out.xlf"),
    )
    status, text, headers = server.document("/xliff", document.encode("utf-8"))
    assert status == 200 and headers["content-type"] == "application/xliff+xml"
    assert text == (tmp_path / "out.xlf").read_text(encoding="utf-8")  # the same document, byte for byte
    report = json.loads(headers["x-mt-report"])
    assert (report["translated"], report["with_codes"], report["placed_by_position"]) == (20, 1, 0)
    assert report["target_language"] == "en"
    sampling = RunningServer(mt.load_translator(checkpoint, device="cpu", strategy="sample", seed=3), LIMITS)
    try:  # a server that samples seeds a document's lines as translate does
        status, text, _ = sampling.document("/xliff", document.encode("utf-8"))
    finally:
        sampling.stop()
    flags = "--strategy", "sample", "--seed", "3", "-i", str(tmp_path / "doc.xlf"), "-o", str(tmp_path / "sampled.xlf")
    run_cli("translate", "-c", str(checkpoint), *flags)
    assert status == 200 and text == (tmp_path / "sampled.xlf").read_text(encoding="utf-8")
    status, text, _ = server.document("/xliff", b"<tmx/>")
    assert status == 422 and json.loads(text)["error"].startswith("the document: not an XLIFF document")
    # as JSON, with the request's own choices: as translate with the same flags
    (tmp_path / "glossary.tsv").write_text("hund\tpuppy\n", encoding="utf-8")
    flags = "--beam", "3", "--glossary", str(tmp_path / "glossary.tsv"), "-i", str(tmp_path / "doc.xlf")
    run_cli("translate", "-c", str(checkpoint), *flags, "-o", str(tmp_path / "glossed.xlf"))
    utf16 = document.replace('encoding="UTF-8"', 'encoding="UTF-16"')  # as the file said; the text is what counts
    asked = {"document": utf16, "strategy": "beam", "beam": 3, "glossary": {"hund": "puppy"}}
    status, answer = server.request("POST", "/xliff", asked)
    assert status == 200 and answer == (tmp_path / "glossed.xlf").read_text(encoding="utf-8")
    assert "hund" in document and "puppy" in answer  # the request's glossary held
    for wrong, message in (({"beam": 99}, "beam: 99 is over this server's limit of 4"), ({"lines": []}, "lines:")):
        status, answer = server.request("POST", "/xliff", {"document": document, **wrong})
        assert status == 422 and answer["error"].startswith(message), answer
    status, text, _ = server.document("/xliff", b" " * (10 * 1024 * 1024 + 1))
    assert status == 413 and "over the server's limit of 10,485,760" in text


@pytest.mark.parametrize("kind", ["po", "html", "subtitles", "substation", "markdown"])
def test_catalogues_pages_subtitles_and_markdown_are_translated_as_translate_translates_them(
    server, checkpoint, tiny_corpus, tmp_path, kind
):
    lines = (tiny_corpus / "valid.de").read_text(encoding="utf-8").splitlines()[:20]  # more than max_lines (16)
    if kind == "po":
        entries = "".join(f'\nmsgid "{line}"\nmsgstr ""\n' for line in lines[1:])
        document = f'msgid ""\nmsgstr "Language: \\n"\n{entries}\nmsgid "{lines[0]}"\nmsgid_plural "%d {lines[0]}"\n'
        document += 'msgstr[0] ""\nmsgstr[1] ""\n'
        name, media_type = "app.pot", "text/x-gettext-translation"
    elif kind == "html":
        words = lines[0].split()
        lines[0] = " ".join([words[0], f"<b>{words[1]}</b>", *words[2:], "https://x.de/a"])
        lines[1] = "ein hund läuft schnell. Eine katze isst hier."  # a paragraph: sentence by sentence, as translate
        document = "<html><body>\n" + "".join(f"<p>{line}</p>\n" for line in lines) + "</body></html>\n"
        name, media_type = "page.html", "text/html"
    elif kind == "markdown":  # list items, and a paragraph in bold
        document = "".join(f"- {line}\n" for line in lines[1:]) + f"\n**{lines[0]}**\n"
        name, media_type = "README.md", "text/markdown"
    elif kind == "subtitles":  # cues without a period a second apart: sentences over three cues, split back
        timing = "00:00:{:02},000 --> 00:00:{:02},000"
        document = "\n".join(f"{i + 1}\n{timing.format(2 * i, 2 * i + 1)}\n{line}\n" for i, line in enumerate(lines))
        name, media_type = "film.srt", "application/x-subrip"
    else:  # the same as SubStation Alpha's Dialogue lines, each of its text's lines cut at \N
        head = "[Script Info]\nScriptType: v4.00+\n\n[Events]\nFormat: Layer, Start, End, Style, Name, Text\n"
        texts = [line.replace(" ", "\\N", 1) for line in lines]
        timing = "0:00:{:02}.00,0:00:{:02}.00"
        cues = [f"Dialogue: 0,{timing.format(2 * i, 2 * i + 1)},Default,,{text}\n" for i, text in enumerate(texts)]
        document = head + "".join(cues)
        name, media_type = "film.ass", "text/x-ssa"
    (tmp_path / name).write_text(document, encoding="utf-8")
    out = tmp_path / f"out{Path(name).suffix.replace('.pot', '.po')}"
    run_cli("translate", "-c", str(checkpoint), "--beam", "1", "-i", str(tmp_path / name), "-o", str(out))
    route = "/subtitles" if kind == "substation" else f"/{kind}"
    status, text, headers = server.document(route, document.encode("utf-8"))
    assert status == 200 and headers["content-type"].startswith(media_type)
    assert text == out.read_text(encoding="utf-8")  # the same document, byte for byte
    report = json.loads(headers["x-mt-report"])
    assert report["translated"] == 20 and report["target_language"] == "en"
    if kind == "html":  # whole, where the request says so
        run_cli("translate", "-c", str(checkpoint), "--beam", "1", "--no-split-sentences", "-i", str(tmp_path / name),
                "-o", str(tmp_path / "whole.html"))  # fmt: skip
        status, answer = server.request("POST", route, {"document": document, "split_sentences": False})
        assert answer == (tmp_path / "whole.html").read_text(encoding="utf-8") != text
    (tmp_path / "glossary.tsv").write_text("hund\tpuppy\n", encoding="utf-8")
    flags = "--beam", "3", "--glossary", str(tmp_path / "glossary.tsv"), "-i", str(tmp_path / name)
    run_cli("translate", "-c", str(checkpoint), *flags, "-o", str(tmp_path / f"glossed{out.suffix}"))
    asked = {"document": document, "strategy": "beam", "beam": 3, "glossary": {"hund": "puppy"}}
    status, answer = server.request("POST", route, asked)
    assert status == 200 and answer == (tmp_path / f"glossed{out.suffix}").read_text(encoding="utf-8")
    assert "puppy" in answer
    bad = {"po": b'msgid "a"\nmsgstring ""\n', "html": b'<meta charset="latin-1"><p>ein hund</p>'}.get(kind, b"1\nein")
    bad = b"# ein \xff hund\n" if kind == "markdown" else bad
    bad = b"[Script Info]\n[Events]\nDialogue: 0,0:00:01.00,0:00:02.00,,ein hund\n" if kind == "substation" else bad
    status, text, _ = server.document(route, bad)
    error = json.loads(text)["error"]
    assert status == 422 and error.startswith("the document") and "\n" not in error, error


@pytest.mark.parametrize("kind, counts", [("docx", (5, 2)), ("pptx", (2, 1)), ("xlsx", (3, 1)), ("odt", (5, 2))])
def test_office_documents_are_translated_as_translate_translates_them(server, checkpoint, tmp_path, kind, counts):
    from test_office_documents import MAKERS

    names = {"docx": "a Word", "pptx": "a PowerPoint", "xlsx": "an Excel", "odt": "an OpenDocument text"}
    source = MAKERS[kind](tmp_path / f"a.{kind}")
    run_cli("translate", "-c", str(checkpoint), "--beam", "1", "-i", str(source), "-o", str(tmp_path / f"b.{kind}"))
    status, answer, headers = server.document(f"/{kind}", source.read_bytes(), OFFICE[kind], text=False)
    assert status == 200 and headers["content-type"] == OFFICE[kind]
    assert answer == (tmp_path / f"b.{kind}").read_bytes()  # the same file, byte for byte
    report = json.loads(headers["x-mt-report"])
    assert (report["translated"], report["with_formatting"], report["target_language"]) == (*counts, "en")
    (tmp_path / "glossary.tsv").write_text("hund\tpuppy\n", encoding="utf-8")
    flags = "--beam", "3", "--glossary", str(tmp_path / "glossary.tsv"), "-i", str(source)
    run_cli("translate", "-c", str(checkpoint), *flags, "-o", str(tmp_path / f"glossed.{kind}"))
    asked = {"document": base64.b64encode(source.read_bytes()).decode(), "strategy": "beam", "beam": 3}
    asked["glossary"] = {"hund": "puppy"}
    status, answer, _ = server.document(f"/{kind}", json.dumps(asked).encode(), "application/json", text=False)
    assert status == 200 and answer == (tmp_path / f"glossed.{kind}").read_bytes()  # in JSON: base64
    for body, media_type, message in [
        (b"PK not a zip", OFFICE[kind], f"the document: not {names[kind]} file (a .{kind} is a zip"),
        (json.dumps({"document": "not base64!"}).encode(), "application/json", "document: not base64"),
    ]:
        status, answer, _ = server.document(f"/{kind}", body, media_type)
        assert status == 422 and json.loads(answer)["error"].startswith(message), answer


def test_a_book_is_translated_as_translate_translates_it(server, checkpoint, tmp_path):
    from test_epub import epub

    source = epub(tmp_path / "buch.epub")
    run_cli("translate", "-c", str(checkpoint), "--beam", "1", "-i", str(source), "-o", str(tmp_path / "book.epub"))
    status, answer, headers = server.document("/epub", source.read_bytes(), "application/epub+zip", text=False)
    assert status == 200 and headers["content-type"] == "application/epub+zip"
    assert answer == (tmp_path / "book.epub").read_bytes()  # the same file, byte for byte
    report = json.loads(headers["x-mt-report"])
    assert (report["chapters"], report["translated"], report["target_language"]) == (2, 6, "en")
    asked = {"document": base64.b64encode(source.read_bytes()).decode(), "split_sentences": False}
    status, answer, _ = server.document("/epub", json.dumps(asked).encode(), "application/json", text=False)
    assert status == 200 and answer == (tmp_path / "book.epub").read_bytes()  # in JSON: base64


def test_requests_bringing_the_same_glossary_share_one_compiled_off_the_event_loop():
    from mt.serve.app import RequestGlossaries

    compiled_in = []  # the threads the merges ran in

    class Recorded(mt.Glossary):
        def with_entries(self, entries):
            compiled_in.append(threading.get_ident())
            return super().with_entries(entries)

    async def requests():
        kept = RequestGlossaries(size=2)
        server, read_again = Recorded({"hund": "cat"}, "de"), Recorded({"hund": "dog"}, "de")
        first = await kept(server, {"rot": "red"}, "de")
        assert first.entries == {"hund": "cat", "rot": "red"} and await kept(server, {"rot": "red"}, "de") is first
        assert await kept(server, {"rot": "blue"}, "de") is not first and await kept(server, {}, "de") is None
        again = await kept(read_again, {"rot": "red"}, "de")
        assert again.entries == {"hund": "dog", "rot": "red"}  # not the old merge
        assert (await kept(None, {"rot": "red"}, "de")).entries == {"rot": "red"}
        assert await kept(server, {"rot": "red"}, "de") is not first  # the oldest of more than two was let go
        together = await asyncio.gather(*(kept(server, {"gelb": "yellow"}, "de") for _ in range(3)))
        assert together[0] is together[1] is together[2]  # arriving together, they wait for one merge
        return threading.get_ident()

    loop_thread = asyncio.run(requests())
    assert len(compiled_in) == 5 and loop_thread not in compiled_in


def test_a_glossary_server_adds_its_terms_to_every_request(checkpoint, lines, tmp_path):
    (tmp_path / "glossary.tsv").write_text("hund\tcat\n", encoding="utf-8")
    translator = mt.load_translator(checkpoint, device="cpu", beam=5)
    glossary = mt.Glossary.load(tmp_path / "glossary.tsv", "de")
    server = RunningServer(translator, LIMITS, glossary=glossary)
    try:
        status, answer = server.translate({"lines": lines, "terms": [["red"]] + [[]] * (len(lines) - 1)})
        assert status == 200
        expected = translate_cli(checkpoint, lines, "--beam", "5", "--glossary", str(tmp_path / "glossary.tsv"))
        assert answer["translations"][1:] == expected[1:]
        wanted = {"red", "cat"} if "hund" in lines[0].split() else {"red"}  # the request's term, the glossary's
        assert wanted <= set(answer["translations"][0].rstrip(".").split())
        assert server.request("GET", "/health")[1]["glossary_entries"] == 1
        with_entry = [line for line in lines if "hund" in line.split()]
        status, answer = server.translate({"lines": with_entry, "strategy": "greedy"})
        assert with_entry
        assert status == 422 and "terms are placed by beam search" in answer["error"]
        paragraph = f"{lines[0].capitalize()}. {with_entry[0].capitalize()}."  # the page's default: by sentence
        status, answer = server.translate({"lines": [paragraph], "split_sentences": True})
        by_sentence = translator.translate([paragraph], glossary=glossary, split_sentences=True)
        assert status == 200 and answer["translations"] == by_sentence
        assert "cat" in by_sentence[0].replace(".", " ").split()
        (tmp_path / "own.tsv").write_text("hund\tred\nrot\tblue\n", encoding="utf-8")
        status, answer = server.translate({"lines": lines, "glossary": {"hund": "red", "rot": "blue"}})
        assert status == 200  # the request's entry replaces the server's for hund
        assert answer["translations"] == translate_cli(checkpoint, lines, "--glossary", str(tmp_path / "own.tsv"))
    finally:
        server.stop()


def test_the_servers_glossary_file_is_read_again_when_it_changes(checkpoint, lines, tmp_path):
    from mt.serve.glossary_file import GlossaryFile

    path = tmp_path / "glossary.tsv"
    path.write_text("hund\tcat\n", encoding="utf-8")
    translator = mt.load_translator(checkpoint, device="cpu", beam=4)
    server = RunningServer(translator, LIMITS, glossary=GlossaryFile(path, translator.languages, every=0))
    with_entry = [line for line in lines if "hund" in line.split()][:2]

    def translated_and_health() -> tuple[list[str], dict]:
        status, answer = server.translate({"lines": with_entry})
        assert status == 200, answer
        return answer["translations"], server.request("GET", "/health")[1]

    try:
        found, health = translated_and_health()
        assert all("cat" in text.rstrip(".").split() for text in found) and health["glossary_entries"] == 1
        path.write_text("hund\tred\nrot\tblue\n", encoding="utf-8")  # an edit: read at the next request
        found, health = translated_and_health()
        assert found == translator.translate(with_entry, glossary=mt.Glossary({"hund": "red", "rot": "blue"}, "de"))
        assert health["glossary_entries"] == 2 and health["glossary_error"] is None
        path.write_text("hund\tred\nno tab here\n", encoding="utf-8")  # a broken edit: the last good one stays
        again, health = translated_and_health()
        assert again == found and health["glossary_entries"] == 2
        assert health["glossary_error"].endswith("glossary.tsv:2: expected source<TAB>target, got 'no tab here'")
        path.write_text("hund\tcat\n", encoding="utf-8")  # mended
        found, health = translated_and_health()
        assert all("cat" in text.rstrip(".").split() for text in found) and health["glossary_error"] is None
    finally:
        server.stop()


def test_sentence_by_sentence(server, checkpoint):
    paragraphs = ["hund läuft rot. Katze schläft hier.", "blau klein? Groß rot langsam.", "", "ein kind isst."]
    status, answer = server.translate({"lines": paragraphs, "split_sentences": True})
    assert status == 200 and answer["settings"]["split_sentences"] is True
    assert answer["translations"] == translate_cli(checkpoint, paragraphs, "--beam", "1", "--split-sentences")
    status, whole = server.translate({"lines": paragraphs})
    assert status == 200 and whole["settings"]["split_sentences"] is False
    status, refused = server.translate({"lines": paragraphs, "split_sentences": True, "nbest": 2})
    assert status == 422 and refused["error"] == "nbest=2: must be 1 with split_sentences (one translation a line)"


def test_protected_spans_as_translate_protects_them(server, checkpoint):
    spanned = ["ein hund läuft www.x.de/a schnell", "ein <b>mann</b> isst %s", "https://x.de", ""]
    for request_settings, flags in (({}, []), ({"protect": "url,printf"}, ["--protect", "url,printf"])):
        status, answer = server.translate({"lines": spanned, **request_settings})
        assert status == 200 and answer["translations"] == translate_cli(checkpoint, spanned, *flags)
    assert "www.x.de/a" in answer["translations"][0] and "%s" in answer["translations"][1]


def test_word_alignments_as_translate_writes_them(server, checkpoint, lines):
    asked = [*lines[:4], ""]
    status, answer = server.translate({"lines": asked, "alignments": True})
    assert status == 200 and answer["translations"] == translate_cli(checkpoint, asked, "--beam", "1")
    written = [row.split("\t")[1] for row in translate_cli(checkpoint, asked, "--beam", "1", "--alignments")]
    assert [" ".join(f"{s}-{t}" for s, t in pairs) for pairs in answer["alignments"]] == written
    assert answer["alignments"][-1] == [] and all(answer["alignments"][:4])
    assert "alignments" not in server.translate({"lines": asked})[1]


def test_lines_in_equal_lines_out(server, checkpoint):
    odd = ["", "ein hund", "   ", "rot\rblau", "klein\u2028rot", "nul\x00byte", "\t", "ein hund\n"]
    status, answer = server.translate({"lines": odd})
    expected = mt.load_translator(checkpoint, device="cpu", beam=1).translate(odd)
    assert status == 200 and answer["translations"] == expected and len(expected) == len(odd)
    assert answer["translations"][0] == "" and answer["translations"][2] == ""
    assert server.translate({"lines": []}) == (200, {"translations": [], "settings": answer["settings"]})


def test_concurrent_requests_are_decoded_together(server, lines):
    requests = [{"lines": lines[i % 12 : i % 12 + 1 + i % 5]} for i in range(24)]
    alone = [server.translate(r)[1]["translations"] for r in requests[:6]]
    batches_before = server.batcher.batches
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(server.translate, requests))
    assert all(status == 200 for status, _ in answers)
    assert [a["translations"] for _, a in answers[:6]] == alone
    assert [len(a["translations"]) for _, a in answers] == [len(r["lines"]) for r in requests]
    assert server.batcher.batches - batches_before < len(requests)  # some requests shared a batch


BAD_REQUESTS = [
    ("invalid JSON", b'{"lines": ["a"', 400, "invalid JSON"),
    ("not UTF-8", b'{"lines": ["\xff"]}', 400, "invalid JSON"),
    ("not an object", b'["a"]', 422, "must be a JSON object"),
    ("no lines", b'{"text": "a"}', 422, "lines: Field required"),
    ("lines not a list", b'{"lines": "a"}', 422, "lines: Input should be a valid list"),
    ("a line not a string", b'{"lines": ["a", 3]}', 422, "lines.1: Input should be a valid string"),
    ("beam a string", b'{"lines": ["a"], "beam": "4"}', 422, "beam: Input should be a valid integer"),
    ("too many lines", json.dumps({"lines": ["a"] * 17}).encode(), 422, "17 lines; the limit is 16"),
    ("too many bytes", json.dumps({"lines": ["ab " * 100] * 14}).encode(), 413, "the limit is 4096"),
    ("a line too long", json.dumps({"lines": ["a", "b" * 301]}).encode(), 422, "lines.1: 301 characters"),
    ("beam out of range", b'{"lines": ["a"], "beam": 0}', 422, "beam: Input should be greater than or equal to 1"),
    ("beam over the limit", b'{"lines": ["a"], "beam": 5}', 422, "beam: 5 is over this server's limit of 4"),
    ("topp out of range", b'{"lines": ["a"], "strategy": "sample", "topp": 1.5}', 422, "topp: Input should be"),
    ("temperature too high", b'{"lines": ["a"], "strategy": "sample", "temperature": 11}', 422, "temperature: 11"),
    ("sampling flag alone", b'{"lines": ["a"], "topk": 2}', 422, 'topk: a sampling setting; add "strategy"'),
    ("unknown strategy", b'{"lines": ["a"], "strategy": "nucleus"}', 422, "strategy: Input should be"),
    ("nbest over beam", b'{"lines": ["a"], "strategy": "beam", "beam": 2, "nbest": 3}', 422, "nbest=3"),
    ("min_len negative", b'{"lines": ["a"], "min_len": -1}', 422, "min_len: Input should be greater than or equal"),
    ("mbr over the limit", b'{"lines": ["a"], "mbr": 5}', 422, "mbr: 5 is over this server's limit of 4"),
    ("mbr with nbest", b'{"lines": ["a"], "mbr": 3, "nbest": 2}', 422, "mbr=3: must be 0 with nbest > 1"),
    ("epsilon alone", b'{"lines": ["a"], "epsilon": 0.02}', 422, 'epsilon: a sampling setting; add "strategy"'),
    ("prefixes not aligned", b'{"lines": ["a", "b"], "prefixes": ["x"]}', 422, "prefixes: 1 for 2 lines"),
    ("terms not aligned", b'{"lines": ["a", "b"], "strategy": "beam", "terms": [["x"]]}', 422, "terms: 1 for 2 lines"),
    (
        "terms not lists",
        b'{"lines": ["a"], "strategy": "beam", "terms": ["x"]}',
        422,
        "terms.0: Input should be a valid list",
    ),
    ("terms greedy", b'{"lines": ["a"], "terms": [["x"]]}', 422, "terms are placed by beam search"),
    ("protect unknown", b'{"lines": ["a"], "protect": "url,links"}', 422, "protect: 'links' is not a kind of span"),
    ("glossary empty", b'{"lines": ["a"], "glossary": {"a": " "}}', 422, "glossary: the entry 'a': ' ' has an empty"),
    ("glossary not text", b'{"lines": ["a"], "glossary": {"a": 1}}', 422, "glossary.a: Input should be a valid string"),
    ("alignments mbr", b'{"lines": ["a"], "alignments": true, "mbr": 3}', 422, "alignments come from one model's"),
    (
        "alignments by sentence",
        b'{"lines": ["a"], "alignments": true, "split_sentences": true}',
        422,
        "alignments take one sentence a line",
    ),
]


@pytest.mark.parametrize("body, status, message", [b[1:] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS])
def test_a_bad_request_gets_one_line_and_the_next_is_served(server, body, status, message):
    got, answer = server.translate(body)
    assert got == status and message in answer["error"] and "\n" not in answer["error"]
    assert set(answer) == {"error"}
    assert server.translate({"lines": ["ein hund"]})[0] == 200


def test_score_answers_as_mt_score_does(server, checkpoint, lines, tmp_path):
    targets = translate_cli(checkpoint, lines, "--beam", "1")
    targets[3], targets[5] = targets[5], targets[3]  # two of them wrong: the scores must follow each pair
    (tmp_path / "src").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (tmp_path / "tgt").write_text("".join(x + "\n" for x in targets), encoding="utf-8")
    expected = run_cli("mt-score", "-c", str(checkpoint), "--src", str(tmp_path / "src"), "--tgt",
                       str(tmp_path / "tgt"), "--pieces", "-q").stdout.splitlines()  # fmt: skip
    status, answer = server.request("POST", "/score", {"lines": lines, "targets": targets, "pieces": True})
    assert status == 200 and len(answer["scores"]) == len(lines)
    for got, row in zip(answer["scores"], (line.split("\t") for line in expected)):
        assert got["log_prob"] == pytest.approx(float(row[0]), abs=2e-4)
        assert got["pieces"] == row[1].split(" ") and len(got["piece_log_probs"]) == len(got["pieces"])
        assert got["mean_log_prob"] == pytest.approx(got["log_prob"] / len(got["pieces"]), abs=1e-4)
    assert answer["scores"][3]["mean_log_prob"] < answer["scores"][4]["mean_log_prob"]  # a wrong pair: unlikely
    status, plain = server.request("POST", "/score", {"lines": lines[:2], "targets": targets[:2]})
    assert status == 200 and [set(s) for s in plain["scores"]] == [{"log_prob", "mean_log_prob"}] * 2


def test_concurrent_score_requests_each_get_their_own_pairs(server, lines):
    requests = []
    for i in range(16):
        sources = lines[i % 12 : i % 12 + 1 + i % 4]
        requests.append({"lines": sources, "targets": ["a dog", "", "a red cat", "x"][: len(sources)]})
    alone = [server.request("POST", "/score", r)[1]["scores"] for r in requests]
    scored_before = server.request("GET", "/health")[1]["pairs_scored"]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda r: server.request("POST", "/score", r), requests))
    assert all(status == 200 for status, _ in answers)
    for (_, answer), own in zip(answers, alone):
        assert [s["log_prob"] for s in answer["scores"]] == pytest.approx([s["log_prob"] for s in own], abs=1e-3)
    scored = server.request("GET", "/health")[1]["pairs_scored"] - scored_before
    assert scored == sum(len(r["lines"]) for r in requests)


BAD_SCORE_REQUESTS = [
    ("no targets", b'{"lines": ["a"]}', 422, "targets: Field required"),
    ("targets not aligned", b'{"lines": ["a", "b"], "targets": ["x"]}', 422, "targets: 1 for 2 lines"),
    ("a target too long", json.dumps({"lines": ["a"], "targets": ["b" * 301]}).encode(), 422, "targets.0: 301"),
    ("a decoding setting", b'{"lines": ["a"], "targets": ["b"], "beam": 2}', 422, "beam: Extra inputs"),
    ("too many lines", json.dumps({"lines": ["a"] * 17, "targets": ["b"] * 17}).encode(), 422, "the limit is 16"),
]


@pytest.mark.parametrize(
    "body, status, message", [b[1:] for b in BAD_SCORE_REQUESTS], ids=[b[0] for b in BAD_SCORE_REQUESTS]
)
def test_a_bad_score_request_gets_one_line(server, body, status, message):
    got, answer = server.request("POST", "/score", body)
    assert got == status and message in answer["error"] and "\n" not in answer["error"], answer
    assert server.request("POST", "/score", {"lines": ["ein hund"], "targets": ["a dog"]})[0] == 200


def test_wrong_paths_and_methods_are_json_errors(server):
    assert server.request("GET", "/translate") == (405, {"error": "Method Not Allowed"})
    assert server.request("GET", "/nowhere") == (404, {"error": "Not Found"})


def test_a_client_that_disconnects_costs_nothing(server):
    body = json.dumps({"lines": ["ein hund läuft"] * 16}).encode()
    for cut in (len(body) // 2, len(body)):  # mid-body, and before reading the answer
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            head = f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
            raw.sendall(head.encode() + body[:cut])
    time.sleep(0.3)
    status, answer = server.translate({"lines": ["ein hund"]})
    assert status == 200 and len(answer["translations"]) == 1


SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)")


def exposition_samples(text: str) -> dict[str, float]:
    """Prometheus's text format read strictly: every sample a line `name{labels} value` of a family whose TYPE
    came before it (a histogram's _bucket, _sum and _count included); "name{labels}" -> value."""
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("# HELP "):
            name, labels, value = SAMPLE.fullmatch(line).groups()
            family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
            assert family in types, f"{name} has no TYPE line before it"
            samples[name + (labels or "")] = float(value)
    return samples


def test_metrics_count_the_requests_for_prometheus(checkpoint, lines):
    running = RunningServer(mt.load_translator(checkpoint, device="cpu", beam=1), LIMITS, workers=2)
    try:
        for body in ({"lines": lines[:3]}, {"lines": lines[:2]}, b"not json", {"lines": ["a"], "beam": 99}):
            running.translate(body)
        assert running.request("POST", "/score", {"lines": lines[:2], "targets": ["A dog.", "Two."]})[0] == 200
        running.request("GET", "/health")
        status, text = running.request("GET", "/metrics")
    finally:
        running.stop()
    assert status == 200
    got = exposition_samples(text)
    translated = {code: got.get(f'mt_requests_total{{path="/translate",code="{code}"}}') for code in (200, 400, 422)}
    assert translated == {200: 2, 400: 1, 422: 1}
    for path in ("/score", "/health"):
        assert got[f'mt_requests_total{{path="{path}",code="200"}}'] == 1
    assert got["mt_lines_translated_total"] == 5 and got["mt_pairs_scored_total"] == 2
    assert got["mt_batches_total"] == 3 and got["mt_waiting_requests"] == 0 and got["mt_decoding_threads"] == 2
    buckets = [v for k, v in got.items() if k.startswith('mt_request_duration_seconds_bucket{path="/translate"')]
    count = got['mt_request_duration_seconds_count{path="/translate"}']
    assert buckets == sorted(buckets) and buckets[-1] == count == 4
    assert 0 < got['mt_request_duration_seconds_sum{path="/translate"}'] < 120
    assert not any("/metrics" in k for k in got)  # scraping is not counted


def test_pages_of_the_origins_given_may_call_the_api_from_a_browser(server, checkpoint):
    site, other = "https://example.com", "https://elsewhere.org"
    running = RunningServer(mt.load_translator(checkpoint, device="cpu", beam=1), cors_origins=[site])
    try:
        preflight = {"Origin": site, "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "content-type"}  # fmt: skip
        status, headers = running.headers("OPTIONS", "/translate", preflight)
        assert status == 200 and headers["access-control-allow-origin"] == site
        assert "POST" in headers["access-control-allow-methods"]
        body = json.dumps({"lines": ["ein hund"]})
        asked = {"Origin": site, "Content-Type": "application/json"}
        status, headers = running.headers("POST", "/translate", asked, body)
        assert status == 200 and headers["access-control-allow-origin"] == site
        status, headers = running.headers("POST", "/translate", {**asked, "Origin": other}, body)
        assert status == 200 and "access-control-allow-origin" not in headers  # the browser keeps it from the page
        assert running.request("GET", "/health")[1]["cors_origins"] == [site]
    finally:
        running.stop()
    status, headers = server.headers("POST", "/translate", asked, body)  # a server started without the flag
    assert status == 200 and "access-control-allow-origin" not in headers
    refused = run_cli("mt-serve", "-c", str(checkpoint), "--cors-origin", "example.com", check=False)
    assert refused.returncode == 2
    assert "--cors-origin example.com: an origin is scheme://host[:port] (https://example.com), or *" in refused.stderr


def test_health_and_the_page(server):
    status, health = server.request("GET", "/health")
    assert status == 200 and health["status"] == "ok" and health["limits"]["max_lines"] == 16
    assert health["languages"] == {"source": "de", "target": "en"} and health["settings"]["beam"] == 1
    status, page = server.request("GET", "/")
    assert status == 200 and 'id="translate"' in page
    assert "http://" not in page and "https://" not in page  # works without any outside resource


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_mt_serve_command_serves_until_stopped(checkpoint):
    port = free_port()
    command = [cli_path("mt-serve"), "-c", str(checkpoint), "--port", str(port), "--beam", "1",
               "--no-repeat-ngram", "3", "--no-split-sentences"]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        client = None
        for _ in range(300):
            try:
                client = socket.create_connection(("127.0.0.1", port), timeout=1)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.1)
        client.close()
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("POST", "/translate", body=json.dumps({"lines": ["ein hund", ""]}))
        answer = json.loads(connection.getresponse().read())
        assert len(answer["translations"]) == 2 and answer["translations"][1] == ""
        assert answer["settings"]["beam"] == 1 and answer["settings"]["no_repeat_ngram"] == 3
        assert answer["settings"]["split_sentences"] is False
        paragraph = "ein hund läuft schnell. Eine katze isst hier."  # a document's, whole: as the server was told
        connection.request("POST", "/translate", body=json.dumps({"lines": [paragraph]}))
        whole = json.loads(connection.getresponse().read())["translations"][0]
        connection.request(
            "POST", "/markdown", body=(paragraph + "\n").encode(), headers={"Content-Type": "text/markdown"}
        )
        assert connection.getresponse().read().decode() == whole + "\n"
        # a second server on the same port: one line before its model loads, where uvicorn's report came
        # after the start-up message
        second = run_cli("mt-serve", "-c", str(checkpoint), "--port", str(port), check=False)
        in_use = f"error: --host 127.0.0.1 --port {port}: address already in use (another server there? "
        assert second.returncode == 2 and second.stderr.strip() == in_use + "choose another --port)"
    finally:
        proc.send_signal(2)  # Ctrl-C
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"at http://127.0.0.1:{port}/" in err
    for flags, said in (
        (["--max-lines", "0"], "--max-lines must be >= 1"),
        (["--beam", "0"], "--beam must be >= 1"),  # was served greedily
        (["--port", "70000"], "--port must be <= 65535"),  # was a traceback
    ):
        refused = run_cli("mt-serve", "-c", str(checkpoint), *flags, check=False)
        assert refused.returncode == 2 and refused.stderr.strip() == f"error: {said}"


def test_an_export_is_served_without_torch(checkpoint, tmp_path):
    pytest.importorskip("ctranslate2")
    exported = tmp_path / "ct2"
    run_cli("mt-export", "-c", str(checkpoint), "-o", str(exported))
    code = (
        "import sys\n"
        "from mt.cli.commands import parsed\n"
        "from mt.cli.parsers import serve_parser\n"
        "from mt.cli.serve import import_server, load\n"
        "from mt.serve.limits import ServeLimits\n"
        f"args = parsed(serve_parser(), ['--export', {str(exported)!r}, '--beam', '1'])\n"
        "translator, about = load(args)\n"
        "app = import_server()[1](translator, ServeLimits(), about)\n"
        "print(translator.translate(['ein hund']))\n"
        "assert translator.score(['ein hund'], ['a dog'])[0].log_prob < 0\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert result.returncode == 0, result.stderr


class SlowEcho:
    """A translator that takes its time and records which thread decoded which lines."""

    languages = ("de", "en")
    reverse = None  # no reverse model reranks it

    def __init__(self, seconds: float = 0.2):
        from mt.decoding.settings import DecodeSettings

        self.settings = DecodeSettings()
        self.seconds = seconds
        self.calls, self.lines = [], []
        self.tokenizer = SimpleNamespace(encode_src=lambda lines: [line.split() for line in lines])

    def with_settings(self, settings):
        return self

    def translate_nbest(self, lines, prefixes=None, seeds=None, terms=None, glossary=None):
        import threading

        from mt.decoding.settings import Translation

        self.calls.append((threading.current_thread().name, len(lines)))
        self.lines += lines
        time.sleep(self.seconds)
        return [[Translation(line.upper(), 0.0, [], [])] for line in lines]


def test_idle_decoding_threads_share_what_waits_and_skip_cancelled_requests():
    from mt.serve.batcher import Batcher

    echo = SlowEcho()
    batcher = Batcher(echo, max_wait=0.05, workers=2)
    try:
        futures = [batcher.submit([f"r{i}a", f"r{i}b"], echo.settings, pieces=4) for i in range(8)]
        gone = batcher.submit(["cancelled"], echo.settings, pieces=2)
        gone.cancel()
        answers = [[t[0].text for t in f.result(timeout=10)] for f in futures]
    finally:
        batcher.close()
    assert answers == [[f"R{i}A", f"R{i}B"] for i in range(8)]
    assert sorted(n for _, n in echo.calls) == [8, 8]  # two batches of four requests, not one of eight
    assert len({name for name, _ in echo.calls}) == 2  # decoded by both threads


def test_a_request_whose_client_leaves_before_its_batch_is_never_decoded():
    echo = SlowEcho(seconds=1.0)
    server = RunningServer(echo, workers=1)
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(server.translate, {"lines": ["busy"]})  # holds the one decoding thread for 1 s
            time.sleep(0.3)
            body = json.dumps({"lines": ["abandoned"]}).encode()
            with socket.create_connection(("127.0.0.1", server.port)) as raw:
                raw.sendall(
                    f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
                )
                time.sleep(0.2)  # the request is whole and waiting; then the client hangs up
            assert first.result(timeout=30)[0] == 200
        assert server.translate({"lines": ["after"]}) == (200, {"translations": ["AFTER"], "settings": ANY_SETTINGS})
    finally:
        server.stop()
    assert echo.lines == ["busy", "after"]


class AnySettings:
    def __eq__(self, other):
        return isinstance(other, dict) and "strategy" in other


ANY_SETTINGS = AnySettings()
