"""Where an Office document's paragraphs stand in a part's XML, and the part written with new ones. A paragraph
may hold others (Word: a text box's, anchored in it; OpenDocument: a footnote's, a text box's): each is a segment
of its own, and the paragraph around it holds it as a point, written back with its translation in place."""

from __future__ import annotations

import re
from collections.abc import Callable

from mt.data.office_markup import Markup

TOKEN = re.compile(r"<[^>]*>|[^<]+")


def tag_name(tag: str) -> str:
    return re.match(r"</?([^\s/>]+)", tag).group(1)


def paragraph_spans(markup: Markup, xml: str) -> list[tuple[int, int, str, str]]:
    """Each paragraph's (start, end, start tag, content), in the order they start: with markup.nested, those in
    others too; else those holding no other."""
    if not markup.nested:
        return [(m.start(), m.end(), m[1], m[3]) for m in markup.paragraphs().finditer(xml)]
    names, found, opened = markup.paragraph.split("|"), [], []
    for token in TOKEN.finditer(xml):
        text = token.group()
        if not text.startswith("<") or text.startswith(("<?", "<!")) or text.endswith("/>"):
            continue
        if tag_name(text) in names:
            if text.startswith("</"):
                if opened:
                    start, tag, inner_at = opened.pop()
                    found.append((start, token.end(), tag, xml[inner_at : token.start()]))
            else:
                opened.append((token.start(), text, token.end()))
    return sorted(found)


def rendered(xml: str, spans: list[tuple], write: Callable[[tuple], str]) -> str:
    """xml with each span ((start, end, ...), in the order they start) as write(span) writes it; a span in
    another is written into what that one's write gave, in place of its XML as it was."""
    out, at = [], 0
    for group in _outermost(spans):
        out += [xml[at : group[0][0]], _written(xml, group, write)]
        at = group[0][1]
    return "".join(out) + xml[at:]


def _outermost(spans: list[tuple]) -> list[list[tuple]]:
    """The spans in groups: one not in another, then those in it."""
    groups = []
    for span in spans:
        if groups and span[0] < groups[-1][0][1]:
            groups[-1].append(span)
        else:
            groups.append([span])
    return groups


def _written(xml: str, group: list[tuple], write) -> str:
    text = write(group[0])
    for inner in _outermost(group[1:]):
        text = text.replace(xml[inner[0][0] : inner[0][1]], _written(xml, inner, write), 1)
    return text
