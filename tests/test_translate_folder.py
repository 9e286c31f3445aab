"""translate -i FOLDER -o FOLDER (mt/cli/translate_folder.py): each document translated as translate
translates it alone, text files line by line, other files copied, hidden ones left out; a file that fails
is named and the others go on."""

import mt

from conftest import run_cli

MARKDOWN = "# ein hund\n\nein mann läuft **schnell** hier.\n"
SRT = "1\n00:00:01,000 --> 00:00:02,000\nein kind sitzt\n"


def test_a_folder_is_translated_into_another_file_by_file(trained_run, tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / ".git").mkdir()
    (docs / "README.md").write_text(MARKDOWN, encoding="utf-8")
    (docs / "sub" / "film.srt").write_text(SRT, encoding="utf-8")
    (docs / "sub" / "notes.txt").write_text("ein hund läuft\n\neine frau sitzt\n", encoding="utf-8")
    (docs / "logo.png").write_bytes(b"\x89PNG\x00\xff")
    (docs / ".git" / "HEAD").write_text("ref\n", encoding="utf-8")
    (docs / "~$bericht.docx").write_bytes(b"a lock file Word leaves while the document is open")
    (docs / "bad.txt").write_bytes(b"ein \xff\n")
    given = ["translate", "-c", str(trained_run), "--beam", "1"]
    done = run_cli(*given, "-i", str(docs), "-o", str(tmp_path / "out"), check=False)
    assert done.returncode == 2 and "bad.txt:1: invalid UTF-8" in done.stderr
    assert "2 documents, 1 text file, 1 other file copied" in done.stderr
    assert done.stderr.rstrip().endswith("error: 1 file not translated: bad.txt")
    out = tmp_path / "out"
    found = sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())
    assert found == ["README.md", "logo.png", "sub/film.srt", "sub/notes.txt"]  # not .git, not the bad file
    run_cli(*given, "-i", str(docs / "README.md"), "-o", str(tmp_path / "alone.md"))
    assert (out / "README.md").read_bytes() == (tmp_path / "alone.md").read_bytes()  # as translated alone
    run_cli(*given, "-i", str(docs / "sub" / "film.srt"), "-o", str(tmp_path / "alone.srt"))
    assert (out / "sub" / "film.srt").read_bytes() == (tmp_path / "alone.srt").read_bytes()
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    first, second = translator.translate(["ein hund läuft", "eine frau sitzt"])
    assert (out / "sub" / "notes.txt").read_text(encoding="utf-8") == f"{first}\n\n{second}\n"  # line for line
    assert (out / "logo.png").read_bytes() == b"\x89PNG\x00\xff"


def test_a_folder_input_needs_a_folder_output_beside_it(trained_run, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README.md").write_text(MARKDOWN, encoding="utf-8")
    given = ["translate", "-c", str(trained_run), "-i", str(docs)]
    for more, message in [
        ([], "a folder is translated into another: give -o FOLDER"),
        (["-o", str(docs / "en")], "inside the input folder"),
        (["-o", str(docs / "README.md")], "a file; a folder's translation is a folder"),
        (["-o", str(tmp_path / "en"), "--nbest", "2"], "--nbest goes with a file of lines, not a folder"),
    ]:
        refused = run_cli(*given, *more, check=False)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    assert not (tmp_path / "en").exists() and not (docs / "en").exists()  # nothing written
