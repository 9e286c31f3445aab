"""translate -i docs/ -o docs.en/: a folder translated into another, file by file, each to the same place
under the output: a document of a kind translate reads whole (XLIFF, PO, HTML, subtitles, Markdown, Office,
EPUB: mt/cli/translate_document.py) as `translate -i` translates it, a text file (.txt) line by line, and any
other file (a picture, a stylesheet) copied, so that the output is the input folder, translated. Hidden
files and folders (.git) and Office's lock files (~$a.docx) are left out. A file that cannot be translated
is named and skipped; the others go on."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from mt.data.lines import read_lines, write_document
from mt.decoding.glossary import load_glossary
from mt.errors import MTError, counted, truncation_warning

TEXT_SUFFIXES = (".txt",)  # files of lines, translated line by line


def is_folder(path: str | None) -> bool:
    return bool(path) and Path(path).is_dir()


def check_folder_args(args, line_flags: dict) -> None:
    """The flags that go with a folder input, or a one-line error."""
    if not args.output:
        raise MTError(f"--input {args.input}: a folder is translated into another: give -o FOLDER")
    source, target = Path(args.input).resolve(), Path(args.output).resolve()
    if target.exists() and not target.is_dir():
        raise MTError(f"--output {args.output}: a file; a folder's translation is a folder")
    if target == source or source in target.parents:
        raise MTError(f"--output {args.output}: inside the input folder {args.input}; name a folder beside it")
    given = [flag for flag, value in line_flags.items() if value]
    if given:
        raise MTError(f"--input {args.input}: {given[0]} goes with a file of lines, not a folder")


def files_of(folder: Path) -> list[Path]:
    """The files under folder, in order, but hidden ones, those in hidden folders and Office's lock files
    (~$bericht.docx, there while a document is open)."""
    found = [path for path in folder.rglob("*") if path.is_file()]
    hidden = (".", "~$")
    return sorted(path for path in found if not any(part.startswith(hidden) for part in path.relative_to(folder).parts))


def run_folder(args, translator, how: str, kind_of, translate_of) -> None:
    """translate's run for a folder input (kind_of: a file's document kind or None; translate_of: a kind's
    translate function)."""
    start = time.perf_counter()
    source, target = Path(args.input), Path(args.output)
    glossary = load_glossary(args.glossary, translator.languages, args.glossary_ignore_case)
    done = {"document": 0, "text file": 0, "other file": 0}  # translated, translated, copied
    failed = []
    split = args.split_sentences is not False
    for path in files_of(source):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        kind = kind_of(str(path))
        try:
            if kind is not None:
                report = translate_of(kind)(translator, str(path), str(out), glossary=glossary, split_sentences=split)
                said, what = report.summary(), "document"
            elif path.suffix.lower() in TEXT_SUFFIXES:
                lines = read_lines(path)
                found = translator.translate_with(lines, {}, glossary=glossary)
                write_document(str(out), "".join(f"{translation.text}\n" for translation in found))
                said, what = f"{counted(len(lines), 'line')} translated", "text file"
            else:
                shutil.copyfile(path, out)
                said, what = "copied", "other file"
        except (MTError, OSError) as err:
            reason = str(err) if isinstance(err, MTError) else f"{path}: {err.strerror or err}"
            print(f"error: {reason}", file=sys.stderr)
            failed.append(str(path.relative_to(source)))
            continue
        done[what] += 1
        if not args.quiet:
            print(f"{path.relative_to(source)}: {said}", file=sys.stderr)
    if not args.quiet:
        seconds = time.perf_counter() - start
        counts = ", ".join(counted(n, what) for what, n in done.items()) + " copied"
        print(f"translated {args.input} into {args.output} in {seconds:.1f}s ({how}): {counts}", file=sys.stderr)
    if translator.truncated:
        print(truncation_warning(translator.truncated, "line", args.max_src_len), file=sys.stderr)
    if failed:
        raise MTError(f"{counted(len(failed), 'file')} not translated: {', '.join(failed[:5])}")
