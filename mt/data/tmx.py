"""Translation memories: a split given as a TMX file (`train.tmx`), the format CAT tools export their memories
in and OPUS offers every corpus in; and translations written as one (`translate -o out.tmx`, TmxWriter).

A TMX file holds translation units (<tu>), each with a variant per language (<tuv xml:lang="de-DE">) whose
<seg> is its text. The units holding both languages of a direction become its pairs: the file is read once,
streamed, into a tab-separated file in the cache (data.cache_dir/tmx/, keyed by the file's path, size and
modification time and the two languages) and read from there as any split's `.tsv` is (mt/data/tsv_files.py).

- A variant's language matches a code by its first part, in any case (`de-DE`, `de_AT` and `DE` are German
  for `de`), or as a whole for a code with a region (`pt-BR`); TMX 1.1's `lang` attribute counts too.
- Inline markup: the text of <hi> is the segment's; codes (<bpt>, <ept>, <it>, <ph>, <ut>) hold the original
  document's formatting and, with the sub-flows inside them (<sub>), are left out.
- The file may be compressed (`train.tmx.gz`) and in any encoding its XML declaration names (UTF-16 too).
- A line break or tab inside a segment becomes a space (one line holds one pair); a segment's leading and
  trailing whitespace goes. Units without both languages are left out. The log counts both.
"""

from __future__ import annotations

import logging
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from tqdm import tqdm

from mt.data.compressed import compressed_form
from mt.data.derived import derived_path, written_aside
from mt.data.lines import COMPRESSED, Decompressing, compression
from mt.errors import MTError

log = logging.getLogger(__name__)

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
CODES = {"bpt", "ept", "it", "ph", "ut", "sub"}  # formatting of the original document, not its text
BREAK = re.compile(r"\r?\n|\t")
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")  # characters XML 1.0 cannot hold


def tmx_path(folder: Path, split: str, src_lang: str, tgt_lang: str) -> Path | None:
    """The TMX file of one split in folder: {split}.{src}-{tgt}.tmx, {split}.{tgt}-{src}.tmx or {split}.tmx,
    each also as its compressed form (.gz, ...); None if there is none."""
    for name in (f"{split}.{src_lang}-{tgt_lang}.tmx", f"{split}.{tgt_lang}-{src_lang}.tmx", f"{split}.tmx"):
        path = compressed_form(folder / name)
        if path is not None:
            return path
    return None


def tmx_as_tsv(path: Path, src_lang: str, tgt_lang: str, cache_dir: str | None) -> Path:
    """The pairs of direction src_lang -> tgt_lang in the TMX file at path as a tab-separated file with a
    header (`de<TAB>en`), written into cache_dir once and reused while the file is unchanged."""
    if not cache_dir:
        raise MTError(f"{path}: a TMX file is read into data.cache_dir, which is null: give it a folder")
    out = derived_path(path, cache_dir, "tmx", f"{src_lang}-{tgt_lang}.tsv", src_lang, tgt_lang)
    if out.is_file():
        return out
    start = time.perf_counter()
    with written_aside(out, False, f"{path}: cannot write its pairs") as sink:
        sink.write(f"{src_lang}\t{tgt_lang}\n")
        counts = write_pairs(path, src_lang, tgt_lang, sink)
    units, pairs, broken = counts["units"], counts["pairs"], counts["broken"]
    said = f"data: {path}: {units:,} translation units, {pairs:,} {src_lang}-{tgt_lang} pairs"
    if units > pairs:
        said += f" ({units - pairs:,} without both {src_lang} and {tgt_lang} left out)"
    if broken:
        said += f"; {broken:,} segment{'s' * (broken != 1)} held a line break or tab, written as a space"
    log.info("%s; read into %s (%.1f s)", said, out, time.perf_counter() - start)
    return out


def write_pairs(path: Path, src_lang: str, tgt_lang: str, sink) -> Counter:
    """Each unit's src_lang and tgt_lang segments as a line `src<TAB>tgt` into sink; counts of the units,
    pairs and segments with a line break or tab. A file that is not TMX, or malformed XML, is one line
    naming the file and where."""
    counts, languages = Counter(), Counter()
    kind = compression(path)
    with path.open("rb") if kind is None else Decompressing(path.open("rb"), path, kind) as stream:
        events = ET.iterparse(stream, events=("start", "end"))
        try:
            _, root = next(events)
            if local(root.tag) != "tmx":
                raise MTError(f"{path}: not a TMX file (its root element is <{local(root.tag)}>, not <tmx>)")
            body = root  # the units' parent, emptied as they are read: memory stays flat
            bar = tqdm(unit=" units", desc=f"reading {path.name}", leave=False, disable=None)
            for event, element in events:
                if event == "start":
                    body = element if local(element.tag) == "body" else body
                    continue
                if local(element.tag) != "tu":
                    continue
                counts["units"] += 1
                found = {}
                for variant in element:
                    code = variant.get(XML_LANG) or variant.get("lang") or ""
                    languages[code] += 1
                    for lang in (src_lang, tgt_lang):
                        if lang not in found and same_language(code, lang):
                            found[lang] = segment(variant)
                if src_lang in found and tgt_lang in found:
                    pair = []
                    for text in (found[src_lang], found[tgt_lang]):
                        flat = BREAK.sub(" ", text)
                        counts["broken"] += flat != text
                        pair.append(flat.strip())
                    sink.write(f"{pair[0]}\t{pair[1]}\n")
                    counts["pairs"] += 1
                body.clear()
                bar.update()
            bar.close()
        except ET.ParseError as err:  # an empty file too ("no element found")
            raise not_xml(path, err) from None
    if not counts["pairs"]:
        held = ", ".join(code or "(none)" for code, _ in languages.most_common(6)) or "none"
        raise MTError(f"{path}: no translation unit holds both {src_lang} and {tgt_lang} (its languages: {held})")
    return counts


def not_xml(path, err: ET.ParseError) -> MTError:
    """The one line for a file that is not well-formed XML: where, and the parser's reason."""
    line, column = err.position
    return MTError(f"{path}:{line}:{column}: not well-formed XML ({str(err).split(':')[0]})")


def xml_text(text: str) -> tuple[str, int]:
    """text with the characters XML cannot hold as U+FFFD, and how many there were (a TMX or XLIFF written)."""
    return NOT_XML.subn("\ufffd", text)


def same_language(code: str, lang: str) -> bool:
    """Whether a variant's xml:lang (de-DE) is the language code lang (de), by its first part unless lang
    names a region too."""
    code, lang = code.replace("_", "-").lower(), lang.replace("_", "-").lower()
    return code == lang or ("-" not in lang and code.split("-")[0] == lang)


def segment(variant: ET.Element) -> str:
    """The text of a variant's <seg> (empty where it has none), its inline codes left out."""
    for child in variant:
        if local(child.tag) == "seg":
            return text_of(child)
    return ""


def text_of(element: ET.Element) -> str:
    """element's text and that of its children that are not codes, each child followed by its tail."""
    parts = [element.text or ""]
    for child in element:
        if local(child.tag) not in CODES:
            parts.append(text_of(child))
        parts.append(child.tail or "")
    return "".join(parts)


def local(tag: str) -> str:
    """An element's name without its namespace ({ns}tu -> tu)."""
    return tag.rsplit("}", 1)[-1]


def is_tmx_name(path: str | None) -> bool:
    """Whether a file named so is a TMX file (out.tmx, or compressed: out.tmx.gz)."""
    if not path:
        return False
    name = Path(path).name.lower()
    for _, suffix, _ in COMPRESSED.values():
        name = name.removesuffix(suffix)
    return name.endswith(".tmx")


def tmx_pair(languages: tuple, tgt_lang: str, output: str) -> tuple[str, str]:
    """The source and target language a TMX output names (a model's languages; tgt_lang: the one chosen among
    several), or a one-line error where they are not one each."""
    source, target = languages[0], tgt_lang or languages[1]
    if not (isinstance(source, str) and source and isinstance(target, str) and target):
        raise MTError(f"--output {output}: a TMX file names its two languages, and this model's are not one each")
    return source, target


class TmxWriter:
    """Translations written as a TMX 1.4 document, a unit for each line that is not empty (its source and its
    translation), for a CAT tool to take into a translation memory. Characters XML cannot hold (control
    characters) are written as U+FFFD and counted."""

    def __init__(self, out, src_lang: str, tgt_lang: str, version: str = ""):
        self.out, self.languages = out, (src_lang, tgt_lang)
        self.units = self.empty = self.replaced = 0
        out.write(
            '<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n<header creationtool="mt" '
            f'creationtoolversion={quoteattr(version)} datatype="plaintext" segtype="sentence" adminlang="en" '
            f'srclang={quoteattr(src_lang)} o-tmf="mt"/>\n<body>\n'
        )

    def units_of(self, sources: list[str], translations: list[str]) -> str:
        """The units of these lines, as text to write."""
        units = []
        for source, target in zip(sources, translations):
            if not source.strip():
                self.empty += 1
                continue
            variants = "".join(
                f"<tuv xml:lang={quoteattr(lang)}><seg>{self._text(text)}</seg></tuv>"
                for lang, text in zip(self.languages, (source, target))
            )
            units.append(f"<tu>{variants}</tu>\n")
        self.units += len(units)
        return "".join(units)

    def end(self) -> None:
        self.out.write("</body>\n</tmx>\n")

    def summary(self) -> str:
        """What was written, for translate's summary line."""
        said = f"; {self.units} translation unit{'s' * (self.units != 1)} written"
        said += f" (none for {self.empty} empty line{'s' * (self.empty != 1)})" if self.empty else ""
        replaced = f", {self.replaced} character{'s' * (self.replaced != 1)} XML cannot hold written as U+FFFD"
        return said + (replaced if self.replaced else "")

    def _text(self, text: str) -> str:
        text, replaced = xml_text(text)
        self.replaced += replaced
        return escape(text)
