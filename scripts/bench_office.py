"""Where a Word document's formatting lands in the translation: in each test line, a word with a usual
translation (the lexicon and the choice of scripts/bench_tags.py: the word and its translation each once in
the line and in its plain translation) is set in bold, the lines written as the paragraphs of one .docx and
translated as `translate -i doc.docx -o out.docx` translates it (mt.translate_office). Each paragraph's bold
text is then checked: "exact" when it is just the word's translation, "covers" when it holds it among other
words; "same words" counts the paragraphs whose text, formatting aside, is the line's plain translation.

    .venv/bin/python scripts/bench_office.py --checkpoint runs/multi30k.de-en/smoke \\
        --train-src data/multi30k/train.de --train-tgt data/multi30k/train.en --src data/multi30k/test2016.de
Prints one JSON object, then a line of figures. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import tempfile
import zipfile
from pathlib import Path

from bench_tags import cases_of, dice_lexicon, key

import mt
from mt.data.lines import read_lines

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
BOLD = "<w:rPr><w:b/></w:rPr>"
RUN = re.compile(r"<w:r>((?:<w:rPr>.*?</w:rPr>)?)<w:t[^>]*>(.*?)</w:t></w:r>", re.DOTALL)


def paragraph(words: list[str], j: int) -> str:
    """A paragraph of the words, word j in bold (the punctuation around it not)."""
    lead, trail = re.match(r"^\W*", words[j]).group(), re.search(r"\W*$", words[j]).group()
    core = words[j][len(lead) : len(words[j]) - len(trail)]
    before = " ".join(words[:j]) + (" " if j else "") + lead
    after = trail + (" " if j + 1 < len(words) else "") + " ".join(words[j + 1 :])
    runs = [f'<w:r><w:t xml:space="preserve">{html.escape(text, quote=False)}</w:t></w:r>' for text in (before, after)]
    return f"<w:p>{runs[0]}<w:r>{BOLD}<w:t>{html.escape(core, quote=False)}</w:t></w:r>{runs[1]}</w:p>"


def written(path: Path, lines: list[str], cases) -> None:
    body = "".join(paragraph(lines[i].split(), j) for i, j in cases)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", f"<w:document {W}><w:body>{body}</w:body></w:document>")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("--checkpoint", "--train-src", "--train-tgt", "--src"):
        p.add_argument(name, required=True)
    args = p.parse_args()
    lexicon = dice_lexicon(read_lines(args.train_src), read_lines(args.train_tgt))
    lines = read_lines(args.src)
    translator = mt.load_translator(args.checkpoint)
    plain = translator.translate(lines)
    cases = cases_of(lines, plain, lexicon, 1, seed=0)
    exact = covers = same = 0
    with tempfile.TemporaryDirectory() as folder:
        written(Path(folder) / "in.docx", lines, cases)
        mt.translate_office(translator, Path(folder) / "in.docx", str(Path(folder) / "out.docx"))
        with zipfile.ZipFile(Path(folder) / "out.docx") as archive:
            document = archive.read("word/document.xml").decode("utf-8")
    for (i, j), xml in zip(cases, re.findall(r"<w:p>.*?</w:p>", document)):
        runs = [(properties, html.unescape(text)) for properties, text in RUN.findall(xml)]
        bold = [key(w) for properties, text in runs if properties == BOLD for w in text.split()]
        wanted = lexicon[key(lines[i].split()[j])]
        exact += bold == [wanted]
        covers += wanted in bold
        same += "".join(text for _, text in runs).split() == plain[i].split()
    n = len(cases)
    row = {"lines": n, "exact": round(100 * exact / n, 1), "covers": round(100 * covers / n, 1),
           "same_words": round(100 * same / n, 1)}  # fmt: skip
    print(json.dumps(row))
    print(f"{n} lines: bold on the word's translation {row['exact']}% exact, {row['covers']}% covers; "
          f"the same words as the plain translation {row['same_words']}%")  # fmt: skip


if __name__ == "__main__":
    main()
