"""A glossary: source words or phrases and the target rendering each must get. Where a line holds a source
entry (as written, as whole words), its target becomes one of the line's required terms
(mt/decoding/terms.py), so that `translate --glossary FILE` and `mt-serve --glossary FILE` keep a
terminology without a terms file per input. With ignore_case, a source entry is found in any case ("bank"
in "Bank" at the start of a sentence, as Google's glossaries' ignore_case); its target stays as written.

The file is tab-separated, one entry a line, `source<TAB>target` (blank lines and lines that start with #
are skipped). Where entries overlap in a line ("New York" and "York"), the longest match wins, as a
tokenizer's would: one rendering per stretch of source.
"""

from __future__ import annotations

from pathlib import Path

from mt.data.lines import read_lines
from mt.decoding.termbase import read_termbase
from mt.errors import MTError
from mt.languages import entry_key, languages_label, phrase_pattern


class Glossary:
    def __init__(self, entries: dict[str, str], src_lang: str = "", ignore_case: bool = False):
        """entries: source -> target, both as written; src_lang: a language written without spaces between
        words (Chinese, Japanese, Thai) matches anywhere, any other only as whole words; ignore_case: source
        entries found in any case."""
        self.entries, self.src_lang, self.ignore_case = entries, src_lang, ignore_case
        self.targets = {self.key(source): target for source, target in entries.items()}
        self.pattern = phrase_pattern(list(entries), src_lang, ignore_case) if entries else None

    def with_entries(self, entries: dict[str, str]) -> Glossary:
        """This glossary with entries added, each replacing this one's entry for the same source (in any
        case, where the case is ignored): a request's own on top of a server's. Only the added entries are
        compiled (StackedGlossary): a few on top of thousands take a millisecond, not the thousands' compile."""
        return StackedGlossary(self, {source.strip(): target.strip() for source, target in entries.items()})

    def key(self, source: str) -> str:
        return entry_key(source, self.ignore_case)

    @classmethod
    def load(cls, path: str | Path, src_lang: str = "", ignore_case: bool = False) -> Glossary:
        """The glossary of a tab-separated file, or a one-line error naming the file and line (an entry
        given two targets, in any case where the case is ignored)."""
        entries: dict[str, str] = {}
        seen: dict[str, str] = {}  # key -> the source entry as first written
        for number, line in enumerate(read_lines(Path(path)), start=1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                raise MTError(f"{path}:{number}: expected source<TAB>target, got {line[:60]!r}")
            source, target = fields[0].strip(), fields[1].strip()
            first = seen.setdefault(entry_key(source, ignore_case), source)
            if entries.get(first, target) != target:
                entry = repr(source) if first == source else f"{source!r} (as {first!r}, the case ignored)"
                raise MTError(f"{path}:{number}: {entry} is given two targets ({entries[first]!r}, {target!r})")
            entries[first] = target
        if not entries:
            raise MTError(f"{path}: no entries (expected source<TAB>target lines)")
        return cls(entries, src_lang, ignore_case)

    def terms(self, lines: list[str]) -> list[list[str]]:
        """For each line, the targets of the entries it holds, in the order they occur, each once."""
        if self.pattern is None:
            return [[] for _ in lines]
        found = ([self.targets[self.key(m.group(0))] for m in self.pattern.finditer(line)] for line in lines)
        return [list(dict.fromkeys(targets)) for targets in found]


class StackedGlossary(Glossary):
    """A glossary's entries with others on top (replacing those of the same source), matched as one glossary
    of them all would match them: at each place the longest entry of either, leftmost first. Each line is
    searched with both patterns from where the last match ended, so the one below is not compiled again."""

    def __init__(self, below: Glossary, added: dict[str, str]):
        self.below, self.top = below, Glossary(added, below.src_lang, below.ignore_case)
        self.src_lang, self.ignore_case = below.src_lang, below.ignore_case
        kept = {source: target for source, target in below.entries.items() if below.key(source) not in self.top.targets}
        self.entries = {**kept, **self.top.entries}
        self.targets = {**below.targets, **self.top.targets}
        self.pattern = self.top.pattern

    def with_entries(self, entries: dict[str, str]) -> Glossary:
        added = {source.strip(): target.strip() for source, target in entries.items()}
        replaced = {self.key(source) for source in added}
        kept = {source: target for source, target in self.top.entries.items() if self.key(source) not in replaced}
        return StackedGlossary(self.below, {**kept, **added})

    def terms(self, lines: list[str]) -> list[list[str]]:
        return [list(dict.fromkeys(self._targets(line))) for line in lines]

    def _targets(self, line: str) -> list[str]:
        """The targets of the entries line holds, in order: the matches a search of both patterns makes."""
        top, below = self.top, self.below
        mine = theirs = None  # each one's next match, while it starts at or after `at`
        found, at = [], 0
        while True:
            if mine is None or mine.start() < at:
                mine = top.pattern.search(line, at) if top.pattern is not None else None
            if mine is None:  # none of the top's entries further on: the rest is the glossary below's
                if below.pattern is not None:
                    found += [below.targets[below.key(m.group(0))] for m in below.pattern.finditer(line, at)]
                return found
            if below.pattern is not None and (theirs is None or theirs.start() < at):
                theirs = below.pattern.search(line, at)
            # the leftmost, then the longest; the top's where both match the same stretch (the same entry)
            if theirs is not None and (theirs.start(), -theirs.end()) < (mine.start(), -mine.end()):
                found.append(below.targets[below.key(theirs.group(0))])
                at = theirs.end()
            else:
                found.append(top.targets[top.key(mine.group(0))])
                at = mine.end()


def terms_of(lines: list[str] | None) -> list[list[str]] | None:
    """The lines of a terms file (translate --terms, mt-evaluate --terms) as each line's terms: tab-separated,
    blank ones left out; None for None."""
    return None if lines is None else [[t for t in line.split("\t") if t.strip()] for line in lines]


def load_glossary(path: str | None, languages: tuple, ignore_case: bool = False) -> Glossary | None:
    """The glossary file's Glossary, matched as the model's source language (languages[0]) is written (in
    any case, with ignore_case): a tab-separated file, or a TBX termbase (.tbx: its terms in the model's two
    languages, mt/decoding/termbase.py); None without a path."""
    if not path:
        return None
    src_lang = languages[0] if isinstance(languages[0], str) else ""
    if Path(path).suffix.lower() == ".tbx":
        tgt_lang = languages[1] if isinstance(languages[1], str) else ""
        if not src_lang or not tgt_lang:
            raise MTError(
                f"{path}: a TBX termbase is read for one source and one target language, not "
                f"{languages_label(languages)}: write the pair's terms as source<TAB>target lines instead"
            )
        return Glossary(read_termbase(path, src_lang, tgt_lang, ignore_case), src_lang, ignore_case)
    return Glossary.load(path, src_lang, ignore_case)


def with_glossary(terms: list[list[str]] | None, lines: list[str], glossary: Glossary | None) -> list[list[str]] | None:
    """Each line's terms (None: none given) and then those the glossary (None: none) gives it, each once."""
    return terms if glossary is None else joined_terms(terms, glossary.terms(lines))


def joined_terms(terms: list[list[str]] | None, found: list[list[str]]) -> list[list[str]]:
    """Each line's terms (None: none given) and then those found for it (a glossary's), each once."""
    return found if terms is None else [list(dict.fromkeys(a + b)) for a, b in zip(terms, found)]
