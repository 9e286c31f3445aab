"""The language an Office file marks its text with, for its spelling and grammar checks: Word's <w:lang w:val="de-DE"/>
in a run's properties and in the styles (word/styles.xml: the document's defaults), PowerPoint's lang="de-DE" on a
run's properties, OpenDocument's fo:language="de" fo:country="DE" in its styles. A translation still marked with its
source's language shows every word as misspelled, so the translated paragraphs, and Word's styles, are marked with
the target's.

Word and PowerPoint name a language with its region (en-US); a target named without one (en) gets the region
its language is most often written in, below, or stands alone where it has none here.
"""

from __future__ import annotations

import re

from mt.languages import base_code, cjk_language

REGIONS = {
    "ar": "SA", "bg": "BG", "ca": "ES", "cs": "CZ", "da": "DK", "de": "DE", "el": "GR", "en": "US", "es": "ES",
    "et": "EE", "eu": "ES", "fa": "IR", "fi": "FI", "fr": "FR", "ga": "IE", "gl": "ES", "he": "IL", "hi": "IN",
    "hr": "HR", "hu": "HU", "id": "ID", "is": "IS", "it": "IT", "ja": "JP", "ko": "KR", "lt": "LT", "lv": "LV",
    "mt": "MT", "nb": "NO", "nl": "NL", "nn": "NO", "no": "NO", "pl": "PL", "pt": "PT", "ro": "RO", "ru": "RU",
    "sk": "SK", "sl": "SI", "sr": "RS", "sv": "SE", "th": "TH", "tr": "TR", "uk": "UA", "ur": "PK", "vi": "VN",
    "zh": "CN",
}  # fmt: skip
RIGHT_TO_LEFT = frozenset(["ar", "fa", "he", "ur", "yi", "ps", "dv"])
WORD_LANG = re.compile(r"<w:lang\b[^>]*>")
DRAWING_PROPERTIES = re.compile(r"<a:(?:rPr|endParaRPr|defRPr)\b[^>]*>")  # PowerPoint's run properties
DOCUMENT_LANGUAGE = re.compile(r"(<dc:language>)[^<]*(</dc:language>)")  # OpenDocument's meta.xml
LANG_ATTRIBUTE = re.compile(r'(\slang=")[^"]*(")')


def locale(language: str) -> str:
    """The tag Word and PowerPoint take for a language: en -> en-US, pt-BR and zh_TW as they are (zh-TW), an
    unknown language alone; "" for none."""
    if not language:
        return ""
    tag = language.replace("_", "-")
    if "-" in tag:
        return tag
    region = REGIONS.get(base_code(tag))
    return f"{tag}-{region}" if region else tag


def word_attribute(language: str) -> str:
    """Which of <w:lang>'s attributes names a text's language: w:val for Latin, Greek, Cyrillic and other
    scripts, w:eastAsia for Chinese, Japanese and Korean, w:bidi for right-to-left scripts."""
    if cjk_language(language):
        return "w:eastAsia"
    return "w:bidi" if base_code(language) in RIGHT_TO_LEFT else "w:val"


def marked_word(xml: str, language: str) -> str:
    """Word XML (a paragraph, the styles) with each <w:lang> naming the language for the script it is in; its
    other scripts' languages as they were."""
    tag, attribute = locale(language), word_attribute(language)
    value = re.compile(rf'(\s{attribute}=")[^"]*(")')
    return WORD_LANG.sub(lambda m: value.sub(lambda v: v[1] + tag + v[2], m[0]), xml)


def marked_drawing(xml: str, language: str) -> str:
    """PowerPoint XML (a paragraph) with each run's lang the language (altLang, which names another script's,
    as it was)."""
    tag = locale(language)
    return DRAWING_PROPERTIES.sub(lambda m: LANG_ATTRIBUTE.sub(lambda v: v[1] + tag + v[2], m[0]), xml)


def marked_open(xml: str, language: str) -> str:
    """OpenDocument XML (content.xml, styles.xml, meta.xml) with its styles' language for the target's script the
    target (fo:language and fo:country; style:language-asian and style:country-asian for Chinese, Japanese and
    Korean; the -complex pair for right-to-left scripts), and so the document's own (<dc:language>)."""
    code, _, region = locale(language).partition("-")
    attribute = word_attribute(language)
    suffix = {"w:eastAsia": "-asian", "w:bidi": "-complex"}.get(attribute, "")
    prefix = "style" if suffix else "fo"
    for name, value in ((f"{prefix}:language{suffix}", code), (f"{prefix}:country{suffix}", region)):
        if value:
            xml = re.sub(rf'(\s{name}=")[^"]*(")', lambda m, value=value: m[1] + value + m[2], xml)
    return DOCUMENT_LANGUAGE.sub(lambda m: m[1] + locale(language) + m[2], xml)
