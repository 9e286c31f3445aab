"""Accelerator markers (mt/decoding/accelerators.py): the `_` of "_Open" and the `&` of "&File" taken out of
a user-interface string before the model reads it, and put back into its translation; a catalogue's, in
tests/test_po.py."""

import pytest

from mt.decoding.accelerators import MARKERS, Accelerator, put_accelerator, take_accelerator
from mt.decoding.protected_spans import pattern_of


@pytest.mark.parametrize(
    "line, read, accelerator",
    [
        ("_Open", "Open", Accelerator("_", "O")),
        ("Save _As…", "Save As…", Accelerator("_", "A")),
        ("&File", "File", Accelerator("&", "F")),
        ("E&xit", "Exit", Accelerator("&", "x")),
        # not markers: an identifier, an abbreviation, Qt's doubled "&&", a reference, Markdown's emphasis,
        # a marker in a placeholder, two markers, an ampersand between words
        ("file_name", "file_name", None),
        ("__init__", "__init__", None),
        ("AT&T", "AT&T", None),
        ("&&Copy", "&&Copy", None),
        ("Tom &amp; Jerry", "Tom &amp; Jerry", None),
        ("some _emphasis_ here", "some _emphasis_ here", None),
        ("Open %(_x)s", "Open %(_x)s", None),
        ("_Datei _Öffnen", "_Datei _Öffnen", None),
        ("Fish & Chips", "Fish & Chips", None),
    ],
)
def test_a_marker_is_taken_where_it_names_a_key_and_nowhere_else(line, read, accelerator):
    assert take_accelerator(line, MARKERS, pattern_of("placeholder")) == (read, accelerator)


@pytest.mark.parametrize(
    "translation, accelerator, written",
    [
        ("Speichern unter", Accelerator("_", "u"), "Speichern _unter"),  # a word beginning with the same letter
        ("Ouvrir le Fichier", Accelerator("&", "f"), "Ouvrir le &Fichier"),  # either case
        ("Öffnen", Accelerator("_", "O"), "_Öffnen"),  # else the first letter
        ("Beenden", Accelerator("&", "x"), "&Beenden"),  # not inside a word
        ("{file} öffnen", Accelerator("_", "f"), "{file} _öffnen"),  # never inside a protected span
        ("42", Accelerator("_", "x"), "42"),
        ("Öffnen", None, "Öffnen"),
    ],
)
def test_the_marker_goes_back_before_a_letter_of_the_translation(translation, accelerator, written):
    assert put_accelerator(translation, accelerator, pattern_of("placeholder")) == written
