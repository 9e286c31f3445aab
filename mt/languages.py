"""Several languages in one model (data.src_lang=[de,fr,cs] data.tgt_lang=en, or the reverse): a run trains
on every direction of its source and target languages at once. With one target language nothing else
changes; with several, each source starts with the tag of the language to translate into, as in Johnson et
al. 2017 ("Google's Multilingual Neural Machine Translation System"), and the caller names that language
when translating (translate --tgt-lang fr)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mt.errors import MTError

# Chinese, Japanese and Korean, whose text BLEU splits into words its own way (mt/metrics.py) and NFKC
# normalization would alter (full-width ，！？, Korean's compatibility jamo ㅋ); by ISO 639-1 code, and the
# 639-2/3 codes that stand for them
CJK_CODES = {"zh": "zh", "zho": "zh", "chi": "zh", "cmn": "zh", "yue": "zh"}
CJK_CODES |= {"ja": "ja", "jpn": "ja", "ko": "ko", "kor": "ko"}


def base_code(code) -> str:
    """A language code without its script or region, lowercased: zh-Hant, zh_TW -> zh; None -> ""."""
    return re.split(r"[-_]", str(code or "").lower())[0]


def cjk_language(code) -> str | None:
    """zh, ja or ko for a code of Chinese, Japanese or Korean, with or without a script or region (zh-Hant,
    zh_TW, jpn); None for any other language."""
    return CJK_CODES.get(base_code(code))


# Thai, Lao, Khmer and Burmese, by ISO 639-1 and 639-2/3 code: written without spaces between words, as
# Chinese and Japanese are
UNSPACED_CODES = {"th", "tha", "lo", "lao", "km", "khm", "my", "mya", "bur"}


def written_without_spaces(code) -> bool:
    """Whether text in this language puts no spaces between words (Chinese, Japanese, Thai, Lao, Khmer,
    Burmese), with or without a script or region (zh-Hant, th_TH)."""
    return cjk_language(code) in ("zh", "ja") or base_code(code) in UNSPACED_CODES


def entry_key(phrase: str, ignore_case: bool) -> str:
    """How a glossary's source phrase is looked up: as written, or case-folded where the case is ignored."""
    return phrase.casefold() if ignore_case else phrase


def phrase_pattern(phrases: Sequence[str], code, ignore_case: bool = False) -> re.Pattern:
    """A pattern that finds any of phrases where text in this language holds it: as whole words (no letter,
    digit or _ on either side), or anywhere in a language written without spaces; as written, or in any case.
    Of phrases that start at one place the longest is found: of "New York" and "York", a line's "New York".
    The phrases are compiled as a trie (a shared prefix is matched once), so that a glossary of thousands of
    entries scans a line in about the time of a few: an alternation of them would try each at every place."""
    before, after = ("", "") if written_without_spaces(code) else (r"(?<!\w)", r"(?!\w)")
    trie: dict = {}
    for phrase in phrases:
        node = trie
        for char in phrase:  # in any case: one branch for "B" and "b", else a shorter match could hide behind it
            node = node.setdefault(char.lower() if ignore_case and len(char.lower()) == 1 else char, {})
        node[""] = {}  # a phrase ends here
    flags = re.IGNORECASE if ignore_case else 0
    try:
        return re.compile(before + trie_pattern(trie, after), flags)
    except RecursionError:  # phrases nested hundreds deep ("a", "aa", "aaa", ...): one alternation, longest first
        longest_first = sorted(phrases, key=len, reverse=True)
        return re.compile(before + "(?:" + "|".join(re.escape(p) + after for p in longest_first) + ")", flags)


def trie_pattern(node: dict, end: str) -> str:
    """The regular expression of a trie of characters (a node: char -> node, "" where a phrase ends), each
    phrase followed by end; at each branch the longer continuations first, so the longest phrase wins. Runs
    of single children are one literal."""
    alternatives = []
    for char, child in node.items():
        if not char:
            continue
        run = char
        while len(child) == 1 and "" not in child:
            (char, child) = next(iter(child.items()))
            run += char
        alternatives.append(re.escape(run) + trie_pattern(child, end))
    if "" in node:
        alternatives.append(end)  # the phrase that ends here, after every longer one
    return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"


def language_list(value) -> list[str]:
    """data.src_lang or data.tgt_lang as a list: one code, or several."""
    return [value] if isinstance(value, str) else list(value) if isinstance(value, Sequence) else [value]


def languages_of(data_cfg) -> tuple:
    """(source, target) languages of a config as plain values: a code, or a list of codes."""
    return tuple(v if isinstance(v, str) else language_list(v) for v in (data_cfg.src_lang, data_cfg.tgt_lang))


def languages_label(languages: tuple) -> str:
    """(source, target) languages as one name: de-en, or de+fr-en for several."""
    return "-".join("+".join(map(str, language_list(side))) for side in languages)


def directions(data_cfg) -> list[tuple[str, str]]:
    """Every (source, target) pair of the configured languages, a language never into itself, in order."""
    return [(s, t) for s in language_list(data_cfg.src_lang) for t in language_list(data_cfg.tgt_lang) if s != t]


def pair_subset(subset: str | None, src_lang: str, tgt_lang: str) -> str | None:
    """A dataset's configuration for one direction: data.subset with {src} and {tgt} filled in
    (wmt/wmt14's "{src}-en" names de-en, fr-en, ...); a subset without them serves every direction."""
    return subset.format(src=src_lang, tgt=tgt_lang) if subset and "{" in subset else subset


def target_tag(lang: str) -> str:
    """The piece a source starts with to ask for a translation into lang."""
    return f"<2{lang}>"


def target_tags(targets: Sequence[str]) -> list[str]:
    """The tags a model with these target languages needs: none with one target."""
    return [target_tag(t) for t in targets] if len(targets) > 1 else []


def source_tag(data_cfg, tgt_lang: str) -> str:
    """The tag a run's sources carry in the direction into tgt_lang: none with one target language."""
    return target_tag(tgt_lang) if len(language_list(data_cfg.tgt_lang)) > 1 else ""


def tagged(lines: list[str], tag: str) -> list[str]:
    """The lines with the tag before each; an empty line stays empty (nothing to translate)."""
    return [f"{tag} {line}" if line.strip() else line for line in lines] if tag else lines


def direction_name(src: str, tgt: str) -> str:
    return f"{src}-{tgt}"


def into(lines: list[str], tgt_lang: str, languages: tuple) -> list[str]:
    """Lines to translate into tgt_lang ("" for the model's only target) with a model of these (source,
    target) languages: tagged when the model has several targets; a language it does not translate
    into is one line. Languages unknown ("") take the lines as they are."""
    targets = [t for t in language_list(languages[1]) if t]
    if not targets:
        return lines
    if tgt_lang and tgt_lang not in targets:
        raise MTError(f"target language {tgt_lang!r}: this model translates into {', '.join(targets)}")
    if len(targets) == 1:
        return lines
    if not tgt_lang:
        raise MTError(
            f"this model translates into {', '.join(targets)}: name the target language "
            '(translate --tgt-lang, tgt_lang= in Python, "tgt_lang" in a request)'
        )
    return tagged(lines, target_tag(tgt_lang))
