"""A glossary from a termbase in TBX (TermBase eXchange, ISO 30042), the format terminology tools (MultiTerm,
memoQ, Phrase, Weblate) export: `translate --glossary terms.tbx`.

A TBX file holds concepts (<termEntry>, or <conceptEntry> in TBX 3), each with a section per language
(<langSet> or <langSec>, xml:lang matched as a TMX variant's is) holding its terms (<tig>, <ntig>, <termSec>).
Each concept gives an entry per source term, all translated as one target term: its preferred one (a
termNote of type administrativeStatus saying `preferred`), else its first. Terms marked deprecated,
superseded, forbidden or obsolete are never used. A source term that two concepts translate differently
(a homonym: "Bank" as bank and as bench) cannot be held to one rendering and is left out, with a warning
naming it; so are concepts without a usable term in both languages, counted.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path

from mt.data.lines import missing_file
from mt.data.tmx import XML_LANG, local, not_xml, same_language, text_of
from mt.errors import MTError
from mt.languages import entry_key

log = logging.getLogger(__name__)

CONCEPTS = {"termEntry", "conceptEntry"}
SECTIONS = {"langSet", "langSec"}
GROUPS = {"tig", "ntig", "termSec"}
UNUSABLE = ("deprecated", "superseded", "forbidden", "obsolete")


def read_termbase(path: str | Path, src_lang: str, tgt_lang: str, ignore_case: bool = False) -> dict[str, str]:
    """A glossary's entries (source term -> target term) from a TBX file for src_lang -> tgt_lang (source
    terms that differ only in case are one where ignore_case), or a one-line error naming the file."""
    if not Path(path).is_file():
        raise MTError(missing_file(Path(path)))
    targets: dict[str, str] = {}  # by source term's key: the target term
    shown: dict[str, str] = {}  # by key: the source term as first written
    ambiguous: set[str] = set()
    concepts = skipped = 0
    try:
        for concept in concepts_of(path):
            concepts += 1
            sources, target = terms(concept, src_lang), preferred(terms(concept, tgt_lang))
            if not sources or target is None:
                skipped += 1
                continue
            for source, _ in sources:
                key = entry_key(source, ignore_case)
                if targets.setdefault(key, target) != target:
                    ambiguous.add(key)
                shown.setdefault(key, source)
    except ET.ParseError as err:
        raise not_xml(path, err) from None
    entries = {shown[key]: target for key, target in targets.items() if key not in ambiguous}
    if ambiguous:
        named = ", ".join(repr(shown[key]) for key in sorted(ambiguous)[:5])
        log.warning(
            "glossary %s: %d source term(s) that concepts translate differently left out (%s)",
            path, len(ambiguous), named,
        )  # fmt: skip
    if not entries:
        raise MTError(f"{path}: no concept with a usable {src_lang} and {tgt_lang} term ({concepts} concepts)")
    languages = src_lang, tgt_lang
    if skipped:
        log.info("glossary %s: %d of %d concepts lack a usable %s or %s term", path, skipped, concepts, *languages)
    return entries


def concepts_of(path: str | Path):
    """The file's concepts, each let go once the caller has read it; a file that is not TBX is an MTError."""
    events = ET.iterparse(str(path), events=("start", "end"))
    _, root = next(events)
    if local(root.tag) not in ("martif", "tbx"):
        raise MTError(f"{path}: not a TBX file (its root element is <{local(root.tag)}>, not <martif> or <tbx>)")
    for event, element in events:
        if event == "end" and local(element.tag) in CONCEPTS:
            yield element
            element.clear()


def terms(concept: ET.Element, lang: str) -> list[tuple[str, str]]:
    """The usable terms of a concept in one language, in order, each with its administrative status."""
    found = []
    for section in concept:
        code = section.get(XML_LANG) or section.get("lang") or ""
        if local(section.tag) not in SECTIONS or not same_language(code, lang):
            continue
        for group in section.iter():
            if local(group.tag) not in GROUPS:
                continue
            term = next((e for e in group.iter() if local(e.tag) == "term"), None)
            status = " ".join(
                (e.text or "").lower()
                for e in group.iter()
                if local(e.tag) == "termNote" and e.get("type") == "administrativeStatus"
            )
            text = " ".join(text_of(term).split()) if term is not None else ""
            if text and not any(word in status for word in UNUSABLE):
                found.append((text, status))
    return found


def preferred(found: list[tuple[str, str]]) -> str | None:
    """The term to translate into: the first marked preferred, else the first; None without any."""
    return next((text for text, status in found if "preferred" in status), found[0][0] if found else None)
