"""mt: a readable, fast neural machine translation toolkit built around the Transformer.

    import mt
    translator = mt.load_translator("runs/multi30k.de-en/smoke/checkpoints/final.pt")
    print(translator.translate(["Ein Hund rennt durch den Schnee."]))
    print(translator.translate("Zwei Kinder spielen.", beam=5))  # one line; settings for this call
    print(translator.score(["Ein Hund rennt."], ["A dog runs."])[0].log_prob)  # log P(target | source)
    mt.translate_xliff(translator, "doc.xlf", "doc.en.xlf")  # a CAT tool's XLIFF, its targets filled in
    mt.translate_po(translator, "app.pot", "en.po")  # a gettext catalogue, its messages translated
    mt.translate_html(translator, "page.html", "page.en.html")  # a web page, its markup kept
    mt.translate_subtitles(translator, "film.de.srt", "film.en.srt")  # subtitles, their timing kept
    mt.translate_markdown(translator, "README.de.md", "README.en.md")  # Markdown, its markup kept
    mt.translate_office(translator, "bericht.docx", "report.docx")  # Word, PowerPoint, Excel: formatting kept
    mt.translate_epub(translator, "buch.epub", "book.epub")  # an EPUB book, chapter by chapter
    run = mt.train("experiment=smoke")  # as `mt-train experiment=smoke`; run.results, run.translator()
    runs = mt.sweep("experiment=smoke", "train.lr=5e-4,1e-3")  # as `mt-train -m ...`: one run per value

The names below are imported on first use, so `import mt` (and every console script's --help) stays free
of torch.
"""

__version__ = "0.1.0"

_LAZY = {
    "load_translator": "mt.inference",
    "load_for_inference": "mt.inference",
    "Translator": "mt.decoding.translator",
    "DecodeSettings": "mt.decoding.settings",
    "Translation": "mt.decoding.settings",
    "Glossary": "mt.decoding.glossary",
    "translate_xliff": "mt.decoding.xliff_translation",
    "translate_po": "mt.decoding.po_translation",
    "translate_html": "mt.decoding.html_translation",
    "translate_subtitles": "mt.decoding.subtitle_translation",
    "translate_markdown": "mt.decoding.markdown_translation",
    "translate_office": "mt.decoding.office_translation",
    "translate_epub": "mt.decoding.epub_translation",
    "PairScore": "mt.decoding.settings",
    "MTError": "mt.errors",
    "Interrupted": "mt.errors",
    "train": "mt.cli.launch",
    "sweep": "mt.cli.launch",
    "Run": "mt.cli.run_directory",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mt' has no attribute {name!r}")
