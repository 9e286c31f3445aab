"""Gettext PO catalogues: the files software is localised in (.po, and .pot templates). `translate -i
app.pot -o de.po` fills in their empty translations.

A catalogue is entries apart by blank lines: comments (#. for translators, #: where the message is used,
#, flags such as c-format or fuzzy), an optional msgctxt, a msgid (and msgid_plural), and its msgstr (or
msgstr[0], msgstr[1], ... one per plural form), each a quoted string that may go on over lines. An entry
is translated where every msgstr is empty; the header (msgid "") and obsolete entries (#~) are not. A new
translation is marked fuzzy, as gettext marks what a person should review: msgfmt leaves fuzzy entries out
unless --use-fuzzy, and `msgattrib --clear-fuzzy` accepts them all. Everything else is written back line
for line as it was read.
"""

from __future__ import annotations

import gettext
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mt.data.lines import read_lines, split_lines, write_document
from mt.data.tmx import same_language
from mt.errors import MTError

PO_SUFFIXES = (".po", ".pot")
KEYWORD = re.compile(r"(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+(\".*)$")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"\s*$')
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
# gettext's Plural-Forms for a target language, where a template leaves them to fill in
PLURAL_FORMS = {
    **dict.fromkeys("en de nl sv da nb nn no it es pt el fi et hu bg ca eu gl".split(), "nplurals=2; plural=(n != 1);"),
    **dict.fromkeys("fr pt-br".split(), "nplurals=2; plural=(n > 1);"),
    **dict.fromkeys("ja zh ko vi th id ms".split(), "nplurals=1; plural=0;"),
    "tr": "nplurals=2; plural=(n != 1);",
    **dict.fromkeys("cs sk".split(), "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;"),  # fmt: skip
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    **dict.fromkeys(
        "ru uk sr hr bs".split(),
        "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    ),
}


def is_po_name(path: str | None) -> bool:
    """Whether a file named so is a gettext catalogue (.po) or template (.pot)."""
    return bool(path) and Path(path).name.lower().endswith(PO_SUFFIXES)


def unquote(text: str, where: str) -> str:
    """A PO string's value: its quotes off, its escapes (\\n, \\", ...) read."""
    match = QUOTED.match(text.strip())
    if not match:
        raise MTError(f"{where}: a quoted string is expected, not {text.strip()[:40]!r}")
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), "\\" + m.group(1)), match.group(1))


def quote(value: str) -> str:
    for char, escape in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\t", "\\t"), ("\r", "\\r")):
        value = value.replace(char, escape)
    return f'"{value}"'


def string_lines(keyword: str, value: str) -> list[str]:
    """keyword "value" as gettext writes it: a value of several lines as "" and then a string per line."""
    parts = value.splitlines(keepends=True)
    if len(parts) < 2:
        return [f"{keyword} {quote(value)}"]
    return [f'{keyword} ""', *(quote(part) for part in parts)]


@dataclass
class Entry:
    """One entry: its lines as read, its strings, and where its flags and translations stand among them."""

    lines: list[str]
    strings: dict[str, str] = field(default_factory=dict)  # msgctxt, msgid, msgid_plural, msgstr, msgstr[N]
    flags: list[str] = field(default_factory=list)
    flags_at: int | None = None  # the #, line's index in lines
    msgstr_at: int | None = None  # where the msgstr lines start: all of them, up to the end, are the translation
    obsolete: bool = False

    @property
    def is_header(self) -> bool:
        return self.strings.get("msgid") == "" and "msgctxt" not in self.strings

    @property
    def translations(self) -> dict[str, str]:
        return {key: value for key, value in self.strings.items() if key.startswith("msgstr")}

    def untranslated(self) -> bool:
        return not self.obsolete and not self.is_header and not any(self.translations.values())

    def fill(self, translations: list[str]) -> None:
        """Its msgstr lines replaced by these translations (one, or one per plural form); marked fuzzy."""
        keys = ["msgstr"] if "msgid_plural" not in self.strings else [f"msgstr[{i}]" for i in range(len(translations))]
        new = [line for key, text in zip(keys, translations) for line in string_lines(key, text)]
        self.lines[self.msgstr_at :] = new
        if "fuzzy" not in self.flags:
            self.flags.insert(0, "fuzzy")
            if self.flags_at is not None:
                self.lines[self.flags_at] = "#, " + ", ".join(self.flags)
            else:  # before the previous msgid (#|) or the strings, where gettext writes flags
                at = next(i for i, line in enumerate(self.lines) if line.startswith("#|") or not line.startswith("#"))
                self.lines.insert(at, "#, fuzzy")
                self.msgstr_at += 1


def parse_entry(lines: list[str], first_line: int, path: str) -> Entry:
    """An entry's lines read, or a one-line MTError naming the file and line."""
    entry = Entry(lines)
    key = None
    for i, line in enumerate(lines):
        where = f"{path}:{first_line + i}"
        if line.startswith("#~"):
            entry.obsolete = True
        elif line.startswith("#,"):
            entry.flags, entry.flags_at = [f.strip() for f in line[2:].split(",") if f.strip()], i
        elif line.startswith("#"):
            continue
        elif line.lstrip().startswith('"'):
            if key is None:
                raise MTError(f"{where}: a string continues no msgid or msgstr")
            entry.strings[key] += unquote(line, where)
        else:
            match = KEYWORD.match(line.strip())
            if not match:
                raise MTError(f"{where}: not a PO line (msgid, msgstr, msgctxt, a string or a # comment)")
            key = match.group(1)
            if key in entry.strings:
                raise MTError(f"{where}: a second {key} in one entry")
            if key.startswith("msgstr") and entry.msgstr_at is None:
                entry.msgstr_at = i
            entry.strings[key] = unquote(match.group(3), where)
    if not entry.obsolete and "msgid" in entry.strings and entry.msgstr_at is None:
        raise MTError(f"{path}:{first_line}: an entry without msgstr")
    if not entry.obsolete and entry.strings and "msgid" not in entry.strings:
        raise MTError(f"{path}:{first_line}: an entry without msgid")
    return entry


def starts_entry(line: str, block: list[str]) -> bool:
    """Whether line begins another entry than the block's: a comment, msgctxt or msgid after its msgstr."""
    after_msgstr = any(earlier.lstrip().startswith("msgstr") for earlier in block)
    return after_msgstr and (line.startswith("#") or re.match(r"(msgctxt|msgid)\s", line.lstrip()) is not None)


class Catalogue:
    """A PO catalogue read whole: its entries (and the blank lines between them), written back with the
    translations filled in."""

    def __init__(self, path: str | os.PathLike, text: str | None = None):
        """The catalogue at path, or (text given) the catalogue text, named path in messages."""
        self.path = str(path)
        self.blocks: list[Entry | str] = []  # entries, and the blank lines between them as they were
        block: list[str] = []
        lines = read_lines(path) if text is None else split_lines(text.removeprefix("\ufeff"))
        for number, line in enumerate([*lines, ""], 1):
            line = line.rstrip("\r")
            if block and starts_entry(line, block):  # entries not apart by a blank line, as some tools write
                self.blocks.append(parse_entry(block, number - len(block), self.path))
                block = []
            if line.strip():
                block.append(line)
                continue
            if block:
                self.blocks.append(parse_entry(block, number - len(block), self.path))
                block = []
            if number <= len(lines):
                self.blocks.append(line)
        entries = self.entries
        self.header = next((e for e in entries if e.is_header), None)
        self.check_charset()

    @property
    def entries(self) -> list[Entry]:
        return [block for block in self.blocks if isinstance(block, Entry)]

    def header_field(self, name: str) -> str | None:
        """A header field's value (Language, Plural-Forms, ...), None where the header lacks it."""
        if self.header is None:
            return None
        for line in self.header.strings.get("msgstr", "").splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None

    def set_header_field(self, name: str, value: str) -> None:
        """A header field set (added where missing); the header made where the catalogue has none."""
        if self.header is None:
            self.header = parse_entry(['msgid ""', 'msgstr ""'], 1, self.path)
            self.blocks[:0] = [self.header, ""]
        fields = self.header.strings.get("msgstr", "").splitlines(keepends=True)
        line = f"{name}: {value}\n"
        for i, old in enumerate(fields):
            if old.partition(":")[0].strip().lower() == name.lower():
                fields[i] = line
                break
        else:
            fields.append(line)
        self.header.strings["msgstr"] = "".join(fields)
        self.header.lines[self.header.msgstr_at :] = string_lines("msgstr", "".join(fields))

    def check_charset(self) -> None:
        """UTF-8 (or a template's CHARSET, written as UTF-8), else one line saying how to convert it."""
        content_type = self.header_field("Content-Type") or ""
        charset = re.search(r"charset=([\w.-]+)", content_type)
        name = charset.group(1) if charset else "UTF-8"
        if name.upper() == "CHARSET":
            self.set_header_field("Content-Type", content_type.replace(name, "UTF-8"))
        elif name.replace("_", "-").upper() not in ("UTF-8", "UTF8", "ASCII", "US-ASCII"):
            raise MTError(f"{self.path}: its charset is {name}; convert it first: msgconv --to-code=UTF-8")

    def check_language(self, tgt_lang) -> str:
        """The catalogue's target language (its header's Language), checked against the model's (a list
        for a model of several target languages: one of them); a template's is set to the model's."""
        language = self.header_field("Language") or ""
        if not language and isinstance(tgt_lang, str) and tgt_lang:
            self.set_header_field("Language", tgt_lang)
            return tgt_lang
        if not language:
            raise MTError(f"{self.path}: its header names no Language, and the model translates into several")
        targets = [tgt_lang] if isinstance(tgt_lang, str) else list(tgt_lang)
        if tgt_lang and not any(same_language(language, target) for target in targets if target):
            raise MTError(f"{self.path}: a catalogue for {language}; the model translates into {', '.join(targets)}")
        return language

    def plural_forms(self, language: str) -> int:
        """How many plural forms the language has: the header's Plural-Forms, else gettext's usual formula
        for the language, written into the header; 2 where neither is known."""
        forms = self.header_field("Plural-Forms") or ""
        found = re.search(r"nplurals\s*=\s*(\d+)", forms)
        if found:
            return int(found.group(1))
        usual = PLURAL_FORMS.get(language.replace("_", "-").lower()) or PLURAL_FORMS.get(language.split("_")[0][:2])
        if usual is None:
            return 2
        self.set_header_field("Plural-Forms", usual)
        return int(re.search(r"nplurals=(\d+)", usual).group(1))

    def form_of_one(self) -> int:
        """The plural form a count of 1 takes by the header's Plural-Forms (0 in most languages; 1 in
        Arabic's, whose form 0 is for none); 0 where the header has no formula gettext reads."""
        found = re.search(r"plural\s*=\s*([^;]+)", self.header_field("Plural-Forms") or "")
        try:
            return int(gettext.c2py(found.group(1))(1)) if found else 0
        except (ValueError, SyntaxError, ArithmeticError, RecursionError):  # a template's EXPRESSION, or broken
            return 0

    def text(self) -> str:
        lines = [line for block in self.blocks for line in (block.lines if isinstance(block, Entry) else [block])]
        return "\n".join(lines) + "\n"

    def write(self, path: str | None, out=None) -> None:
        write_document(path, self.text(), out)
