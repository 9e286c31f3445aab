"""Markdown documents: `translate -i README.de.md -o README.en.md` translates their text and keeps their markup.

A document is read line by line into blocks, as CommonMark reads it: headings, paragraphs (their soft-wrapped
lines one segment, written back as one line), list items, block quotes and table cells are text to
translate; fenced and indented code, front matter (--- ... --- at the top), HTML comments' lines and link
definitions are left as they are. Inside a segment, the inline markup becomes tags the translator keeps in
place as protected spans (mt/decoding/protected_spans.py): a link's or an emphasis's delimiters wrap the
translation of the words they wrapped ([Hilfe](https://x) gives [help](https://x)), code spans, images,
autolinks and escapes stand where their neighbouring words went. Everything else is written back as it was.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mt.data.lines import document_bytes, document_lines, write_document

MARKDOWN_SUFFIXES = (".md", ".markdown")
# indented too (a fence inside a list item); a backtick fence's line holds no other backtick (```x``` is code)
FENCE = re.compile(r"^[ \t]*(`{3,}(?=[^`]*$)|~{3,})")
HEADING = re.compile(r"^( {0,3}#{1,6}[ \t]+)(.*?)([ \t]+#+)?[ \t]*$")
LIST_ITEM = re.compile(r"^( *(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)")
QUOTE = re.compile(r"^( {0,3}(?:>[ \t]?)+)")
RULE_OR_UNDERLINE = re.compile(r"^ {0,3}(?:[-*_=][ \t]*){3,}$|^ {0,3}=+[ \t]*$")
LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s")
TABLE_DIVIDER = re.compile(r"^ *\|?(?: *:?-+:? *\|)+ *:?-*:? *\|? *$")
HARD_BREAK = re.compile(r"(?: {2,}|\\)$")
LABEL = r"(?:[^\[\]]|\[[^\[\]]*\])*"  # a link's or an image's text: brackets in it in pairs ([das [neue] Buch](u))
# inline markup, the first to match at a place winning: code spans, images, autolinks, escapes and HTML stand
# alone; links and emphasis wrap text
INLINE = re.compile(
    rf"(?P<point>`+[^`]*?`+|!\[{LABEL}\]\([^)\s]*(?:\s+\"[^\"]*\")?\)|<(?:https?|mailto|ftp):[^>\s]*>"
    r"|\\[!-/:-@\[-`{-~]|\[\^[^\]]+\])"
    rf"|(?P<link_open>\[)(?={LABEL}\](?:\([^)]*\)|\[[^\]]*\]))"
    r"|(?P<link_close>\](?:\([^)]*\)|\[[^\]]*\]))"
    r"|(?P<strong>\*\*|__(?![A-Za-z0-9])|(?<![A-Za-z0-9])__)|(?P<strike>~~)"
    r"|(?P<em>\*|_(?![A-Za-z0-9])|(?<![A-Za-z0-9])_)"
)
TAG = re.compile(r"<(/?)md-(\d+)(/?)>")


def is_markdown_name(path: str | None) -> bool:
    """Whether a file named so is a Markdown document (.md, .markdown)."""
    return bool(path) and Path(path).name.lower().endswith(MARKDOWN_SUFFIXES)


@dataclass
class Block:
    """Lines first..last of the document, written back as pieces: text as it is, or (an int) the translation
    of that segment."""

    first: int
    last: int
    pieces: list


class MarkdownDocument:
    """A Markdown document read whole: its segments to translate (with their inline markup as tags), written
    back with their translations."""

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = str(path)
        self.lines, self.newline, self.bom = document_lines(self.path, document_bytes(path, data))
        self.segments: list[str] = []  # each segment's text, its inline markup as <md-N> tags
        self.markup: list[dict[int, str]] = []  # each segment's tags: N -> the markup it stands for
        self.blocks: list[Block] = []
        self._read()
        self.translations: dict[int, str] = {}  # a segment's index -> its translation (tags as they came)

    def _segment(self, text: str) -> int | None:
        """The index of a new segment of this text; None where it holds no word outside its markup."""
        tagged, markup = tagged_inline(text)
        if not any(char.isalpha() for char in re.sub(r"<[^>]*>", "", tagged)):
            return None
        self.segments.append(tagged)
        self.markup.append(markup)
        return len(self.segments) - 1

    def _read(self) -> None:
        """The document's blocks, line by line: a paragraph (or list item, or quote) gathers its lines until a
        blank line, a hard break or another block begins."""
        lines, first = self.lines, 0
        if lines and lines[0].strip() == "---":  # front matter (YAML), up to its closing line
            first = next((k + 1 for k in range(1, len(lines)) if lines[k].strip() in ("---", "...")), 0)
        paragraph: list | None = None  # [first line, lead, its lines' texts]
        fence = None
        item_indent = None  # where the last list item's text starts: a line indented so far goes on the item
        table = False  # in a table's rows

        def end(last: int) -> None:
            nonlocal paragraph
            if paragraph is not None and (segment := self._segment(" ".join(paragraph[2]))) is not None:
                self.blocks.append(Block(paragraph[0], last, [paragraph[1], segment]))
            paragraph = None

        for i in range(first, len(lines)):
            line = lines[i]
            table = table and "|" in line
            opened = FENCE.match(line)
            if fence is not None:  # fenced code, until a fence of its kind at least as long
                fence = (
                    None if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) else fence
                )
                continue
            quote = QUOTE.match(line)
            rest = line[quote.end() :] if quote else line
            if opened or not rest.strip() or RULE_OR_UNDERLINE.match(rest) or LINK_DEFINITION.match(rest):
                end(i - 1)
                fence = opened.group(1) if opened else None
            elif paragraph is None and (line.lstrip().startswith("<!--") or code_indented(line, item_indent)):
                continue  # indented code, or an HTML comment's line
            elif heading := HEADING.match(line):
                end(i - 1)
                if (segment := self._segment(heading.group(2))) is not None:
                    self.blocks.append(Block(i, i, [heading.group(1), segment, heading.group(3) or ""]))
            elif "|" in line and (table or self._starts_table(i)):
                end(i - 1)
                table = True  # until a line without a pipe
                if not TABLE_DIVIDER.match(line):
                    self.blocks.append(Block(i, i, self._row(line)))
            else:
                rest = HARD_BREAK.sub("", rest)  # written back after the translation, not the model's to read
                item = LIST_ITEM.match(rest)
                if item or (quote and (paragraph is None or not paragraph[1].lstrip().startswith(">"))):
                    end(i - 1)
                    lead = (quote.group(1) if quote else "") + (item.group(1) if item else "")
                    paragraph = [i, lead, [rest[item.end() :].strip() if item else rest.strip()]]
                    item_indent = len(lead.expandtabs(4)) if item and not quote else None
                elif paragraph is None:  # a paragraph, or a list item's next one (indented under it)
                    paragraph = [i, line[: len(line) - len(line.lstrip())], [rest.strip()]]
                    item_indent = item_indent if indent_of(line) >= (item_indent or 1) else None
                else:  # the paragraph goes on (a quote's next line, without its >)
                    paragraph[2].append(rest.strip())
                if HARD_BREAK.search(line):  # a line break the reader sees: the segment ends with it
                    end(i)
        end(len(lines) - 1)

    def _starts_table(self, i: int) -> bool:
        """Whether line i begins a table: its header row (the divider row next), or the divider itself."""
        lines = self.lines
        return bool(TABLE_DIVIDER.match(lines[i]) or (i + 1 < len(lines) and TABLE_DIVIDER.match(lines[i + 1])))

    def _row(self, line: str) -> list:
        """A table row's pieces: its pipes and padding as they are, each cell with a word a segment."""
        pieces = []
        for cell in re.split(r"((?<!\\)\|)", line):
            segment = self._segment(cell.strip()) if cell != "|" else None
            if segment is None:
                pieces.append(cell)
            else:
                pieces += [cell[: len(cell) - len(cell.lstrip())], segment, cell[len(cell.rstrip()) :]]
        return pieces

    def output(self) -> str:
        """The document with each translated segment in place (a paragraph on one line)."""
        out, at = [], 0
        for block in self.blocks:
            if not any(isinstance(piece, int) and piece in self.translations for piece in block.pieces):
                continue
            out += self.lines[at : block.first]
            written = "".join(
                piece
                if isinstance(piece, str)
                else untagged(self.translations.get(piece, self.segments[piece]), self.markup[piece])
                for piece in block.pieces
            )
            out.append(written + (trailing_break(self.lines[block.last]) if len(block.pieces) == 2 else ""))
            at = block.last + 1
        out += self.lines[at:]
        return ("\ufeff" if self.bom else "") + self.newline.join(out)

    def write(self, path: str | None, out=None) -> None:
        write_document(path, self.output(), out)


def indent_of(line: str) -> int:
    """How far a line's text is indented, a tab to the next multiple of 4."""
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def code_indented(line: str, item_indent: int | None) -> bool:
    """Whether a line that begins no paragraph is indented code: 4 columns past the text of the list item
    it stands under (item_indent), or past the margin outside a list."""
    return indent_of(line) >= (item_indent or 0) + 4


def trailing_break(line: str) -> str:
    """A line's hard break (two spaces or a backslash at its end), kept after the translation."""
    found = HARD_BREAK.search(line)
    return found.group() if found else ""


def tagged_inline(text: str) -> tuple[str, dict[int, str]]:
    """A segment's text with its inline markup as tags: <md-N>...</md-N> around what a link or an emphasis
    wraps, <md-N/> for what stands alone; and what each tag stands for (N: the markup, -N: its closing).
    A delimiter that closes nothing, or is never closed, stays in the text as it was."""
    markup: dict[int, str] = {}
    parts, at, opened = [], 0, []  # opened: (kind, tag number, its index in parts), innermost last

    def close(j: int, token: str) -> None:
        for _, n, where in opened[j + 1 :]:  # opened inside and never closed: the text it stood for
            parts[where] = markup.pop(n)
        _, n, _ = opened[j]
        del opened[j:]
        markup[-n] = token
        parts.append(f"</md-{n}>")

    for match in INLINE.finditer(text):
        parts.append(text[at : match.start()])
        at, kind, token = match.end(), match.lastgroup, match.group()
        wanted = "link_open" if kind == "link_close" else kind
        same = [
            j for j, (k, n, _) in enumerate(opened) if k == wanted and (wanted == "link_open" or markup[n] == token)
        ]
        if kind == "point" or (kind != "link_close" and not same):
            n = len(markup) + 1
            while n in markup or -n in markup:
                n += 1
            markup[n] = token
            if kind == "point":
                parts.append(f"<md-{n}/>")
            else:
                opened.append((kind, n, len(parts)))
                parts.append(f"<md-{n}>")
        elif same:
            close(same[-1], token)
        else:
            parts.append(token)  # a "](...)" that closes no link of ours
    parts.append(text[at:])
    for _, n, where in opened:
        parts[where] = markup.pop(n)
    return "".join(parts), markup


def untagged(translation: str, markup: dict[int, str]) -> str:
    """A translation with its tags written back as the markup they stand for."""

    def markup_of(tag: re.Match) -> str:
        n = int(tag.group(2))
        return markup.get(-n if tag.group(1) else n, tag.group())

    return TAG.sub(markup_of, translation)
