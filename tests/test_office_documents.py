"""Office documents (mt/data/office_document.py, mt/decoding/office_translation.py): Word, PowerPoint and
Excel files, each paragraph a segment, its runs' formatting, links and what is not text as tags; the
translation's tags runs again; every other byte of the file as it was."""

import io
import random
import re
import zipfile
from xml.dom import minidom

import pytest

import mt
from mt.data.office_document import TAG, WORD, OfficeDocument, read_paragraph, written_paragraph
from mt.data.office_markup import OPEN_TEXT
from mt.errors import MTError

from conftest import LEXICON, run_cli

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
BOLD = "<w:rPr><w:b/></w:rPr>"
BODY = (
    '<w:p w:rsidR="00A1"><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>ein hund</w:t></w:r></w:p>'
    '<w:p><w:r><w:t xml:space="preserve">ein mann </w:t></w:r><w:proofErr w:type="spellStart"/>'
    f'<w:r>{BOLD}<w:t>läuft</w:t></w:r><w:proofErr w:type="spellEnd"/><w:r><w:t xml:space="preserve"> hier</w:t>'
    "</w:r></w:p>"
    '<w:p><w:bookmarkStart w:id="0" w:name="a"/><w:r><w:t>eine katze</w:t><w:tab/><w:t>isst &amp; schläft</w:t></w:r>'
    '<w:hyperlink r:id="rId9"><w:r><w:rPr><w:u w:val="single"/></w:rPr><w:t>dort</w:t></w:r></w:hyperlink>'
    '<w:bookmarkEnd w:id="0"/></w:p>'
    "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>ein kind sitzt</w:t></w:r></w:p></w:tc>"
    "<w:tc><w:p><w:r><w:t>42</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
    "<w:p/><w:sectPr/>"
)
FIELD = (
    '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>'
    '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>1</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
)
HEADER = f'<w:hdr {W}><w:p><w:r><w:t xml:space="preserve">frau heute </w:t></w:r>{FIELD}</w:p></w:hdr>'


def docx(path, body=BODY, header=HEADER, styles=f"<w:styles {W}/>"):
    """A Word document of these parts, as Word lays them out (compressed, a picture stored)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        document = f'<?xml version="1.0"?>\n<w:document {W} {R}><w:body>{body}</w:body></w:document>'
        archive.writestr("word/document.xml", document)
        archive.writestr("word/header1.xml", f'<?xml version="1.0"?>\n{header}')
        archive.writestr(zipfile.ZipInfo("word/media/image1.png"), b"\x89PNG not really")
        archive.writestr("word/styles.xml", styles)
    return path


A = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
SLIDE = (
    f'<p:sld {A} xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"><p:cSld><p:spTree><p:sp>'
    '<p:txBody><a:bodyPr/><a:p><a:pPr algn="ctr"/><a:r><a:rPr lang="de-DE" dirty="0"/><a:t>ein hund </a:t></a:r>'
    '<a:r><a:rPr lang="de-DE" b="1" dirty="0"/><a:t>läuft</a:t></a:r><a:br><a:rPr lang="de-DE"/></a:br>'
    '<a:r><a:rPr lang="de-DE" dirty="0"/><a:t>hier</a:t></a:r><a:endParaRPr lang="de-DE"/></a:p>'
    '<a:p><a:fld id="{1}" type="slidenum"><a:rPr lang="de-DE"/><a:t>3</a:t></a:fld></a:p></p:txBody></p:sp>'
    "</p:spTree></p:cSld></p:sld>"
)
STRINGS = (
    '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="3" uniqueCount="3">'
    '<si><t>ein mann</t></si><si><t>42</t></si><si><r><t xml:space="preserve">ein kind </t></r>'
    '<r><rPr><b/><sz val="11"/></rPr><t>schläft</t></r></si></sst>'
)


def pptx(path):
    """A PowerPoint file: a slide (a bold word, a line break, a slide number) and its speaker notes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ppt/presentation.xml", "<p:presentation/>")
        archive.writestr("ppt/slides/slide1.xml", SLIDE)
        archive.writestr(
            "ppt/notesSlides/notesSlide1.xml", f"<p:notes {A}><a:p><a:r><a:t>eine katze</a:t></a:r></a:p></p:notes>"
        )
        archive.writestr(
            "ppt/slideMasters/slideMaster1.xml",
            f"<p:sldMaster {A}><a:p><a:r><a:t>Titel</a:t></a:r></a:p></p:sldMaster>",
        )
    return path


def xlsx(path):
    """An Excel workbook: the texts its cells share, one of them in two runs, a number among them; a text a
    cell holds itself."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
        archive.writestr("xl/sharedStrings.xml", STRINGS)
        cells = '<c r="A1" t="s"><v>0</v></c><c r="B1" t="inlineStr"><is><t>eine frau</t></is></c>'
        archive.writestr(
            "xl/worksheets/sheet1.xml", f"<worksheet><sheetData><row>{cells}</row></sheetData></worksheet>"
        )
    return path


ODF = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:xlink="http://www.w3.org/1999/xlink"'
)
ODT_BODY = (  # a heading; a bold word, two spaces, a footnote; a tab, a link, a page break's mark; a number
    '<text:h text:style-name="H1" text:outline-level="1">ein hund</text:h>'
    '<text:p text:style-name="P1">ein mann <text:span text:style-name="T1">läuft</text:span><text:s text:c="2"/>hier'
    '<text:note text:id="ftn1" text:note-class="footnote"><text:note-citation>1</text:note-citation><text:note-body>'
    '<text:p text:style-name="Footnote">eine katze isst</text:p></text:note-body></text:note>.</text:p>'
    '<text:p>eine frau<text:tab/>sitzt <text:a xlink:href="https://x.de">dort</text:a><text:soft-page-break/></text:p>'
    "<text:p>42</text:p>"
)
ODF_STYLES = (  # the document's language (its Latin and its East Asian script's), a footer with a page number
    f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-styles {ODF}><office:styles><style:default-style '
    'style:family="paragraph"><style:text-properties fo:language="de" fo:country="DE" style:language-asian="zh" '
    'style:country-asian="CN"/></style:default-style></office:styles><office:master-styles><style:master-page '
    'style:name="Standard"><style:footer><text:p>seite <text:page-number>1</text:page-number></text:p></style:footer>'
    "</style:master-page></office:master-styles></office:document-styles>"
)


def open_document(path, body=ODT_BODY, kind="text"):
    """An OpenDocument file (text, spreadsheet or presentation) of this body, its styles, a picture."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), f"application/vnd.oasis.opendocument.{kind}")  # first, stored
        content = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content {ODF} office:version="1.3">'
            '<office:automatic-styles><style:style style:name="T1" style:family="text"><style:text-properties '
            'fo:font-weight="bold" fo:language="de" fo:country="DE"/></style:style></office:automatic-styles>'
            f"<office:body><office:{kind}>{body}</office:{kind}></office:body></office:document-content>"
        )
        archive.writestr("content.xml", content)
        archive.writestr("styles.xml", ODF_STYLES)
        meta = f'<office:document-meta {ODF} xmlns:dc="http://purl.org/dc/elements/1.1/"><office:meta>'
        archive.writestr("meta.xml", meta + "<dc:language>de-DE</dc:language></office:meta></office:document-meta>")
        archive.writestr(zipfile.ZipInfo("Pictures/a.png"), b"\x89PNG not really")
        archive.writestr("META-INF/manifest.xml", "<manifest/>")
    return path


def ods(path):
    """An OpenDocument spreadsheet: a text cell, a number cell (its text shown), a cell in two styles."""
    cells = (
        '<table:table-cell office:value-type="string"><text:p>ein mann</text:p></table:table-cell>'
        '<table:table-cell office:value-type="float" office:value="42"><text:p>42</text:p></table:table-cell>'
        '<table:table-cell office:value-type="string"><text:p>ein kind <text:span text:style-name="T1">schläft'
        "</text:span></text:p></table:table-cell>"
    )
    body = f'<table:table table:name="Tabelle1"><table:table-row>{cells}</table:table-row></table:table>'
    return open_document(path, body, "spreadsheet")


MAKERS = {"docx": docx, "pptx": pptx, "xlsx": xlsx, "odt": open_document, "ods": ods}


def parts(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: (info.compress_type, archive.read(info)) for info in archive.infolist()}


def test_paragraphs_are_segments_with_their_formatting_as_tags(tmp_path):
    doc = OfficeDocument(docx(tmp_path / "a.docx"))
    assert doc.segments == [
        "ein hund",
        "ein mann <w-1>läuft</w-1> hier",  # the bold run's formatting; spelling marks dropped
        "eine katze<w-1/> isst & schläft<w-2><w-3>dort</w-3></w-2>",  # a tab (a space to the model); a link
        "ein kind sitzt",  # in a table; "42" has no word
        "frau heute ",  # the header; its page number field after the text, kept out of the segment
    ]
    doc.translations = {i: segment for i, segment in enumerate(doc.segments)}  # each paragraph as it was
    (tmp_path / "b.docx").write_bytes(doc.output())
    before, after = parts(tmp_path / "a.docx"), parts(tmp_path / "b.docx")
    translated = ("word/document.xml", "word/header1.xml")
    assert list(after) == list(before) and all(after[name] == before[name] for name in before if name not in translated)
    for name in translated:
        xml = after[name][1].decode("utf-8")
        minidom.parseString(xml)  # well-formed
        assert after[name][0] == before[name][0] == zipfile.ZIP_DEFLATED
    assert OfficeDocument(tmp_path / "b.docx").segments == doc.segments  # read back: the same paragraphs
    document = after["word/document.xml"][1].decode("utf-8")
    assert '<w:pStyle w:val="Heading1"/>' in document and '<w:bookmarkStart w:id="0" w:name="a"/>' in document
    assert f'<w:r>{BOLD}<w:t xml:space="preserve">läuft</w:t></w:r>' in document and "isst &amp; schläft" in document
    assert FIELD in after["word/header1.xml"][1].decode("utf-8")  # the field whole, in order


def test_a_word_text_box_is_translated_apart_and_so_is_the_paragraph_it_stands_in(tmp_path):
    box = "<w:txbxContent><w:p><w:r><w:t>eine katze</w:t></w:r></w:p></w:txbxContent>"
    anchored = (  # as Word writes a text box: a drawing, and the same box for older readers
        '<w:r><mc:AlternateContent xmlns:mc="urn:mc" xmlns:wps="urn:wps" xmlns:v="urn:v"><mc:Choice Requires="wps">'
        f"<w:drawing><wps:txbx>{box}</wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict><v:textbox>{box}"
        "</v:textbox></w:pict></mc:Fallback></mc:AlternateContent></w:r>"
    )
    body = f'<w:p><w:r><w:t xml:space="preserve">ein hund </w:t></w:r>{anchored}<w:r><w:t>läuft</w:t></w:r></w:p>'
    doc = OfficeDocument(docx(tmp_path / "a.docx", body=body))
    assert doc.segments[:3] == ["ein hund <w-1/>läuft", "eine katze", "eine katze"]
    doc.translations = {0: "a dog <w-1/>runs", 1: "a cat", 2: "a cat"}
    document = zipfile.ZipFile(io.BytesIO(doc.output())).read("word/document.xml").decode("utf-8")
    minidom.parseString(document)
    assert document.count(">a cat</w:t>") == 2 and "katze" not in document
    assert document.index("a dog") < document.index("a cat") < document.index("runs")  # the box where it stood


def test_a_charts_titles_are_translated_its_data_left_as_it_was(tmp_path):
    chart = (
        '<c:chartSpace xmlns:c="urn:c" xmlns:a="urn:a"><c:chart><c:title><c:tx><c:rich><a:bodyPr/><a:p><a:r>'
        '<a:rPr lang="de-DE" b="1"/><a:t>umsatz im jahr</a:t></a:r></a:p></c:rich></c:tx></c:title><c:plotArea>'
        "<c:ser><c:tx><c:strRef><c:strCache><c:pt><c:v>nord</c:v></c:pt></c:strCache></c:strRef></c:tx></c:ser>"
        "</c:plotArea></c:chart></c:chartSpace>"
    )
    with zipfile.ZipFile(docx(tmp_path / "a.docx"), "a") as archive:
        archive.writestr("word/charts/chart1.xml", chart)
    doc = OfficeDocument(tmp_path / "a.docx")
    assert doc.segments[-1] == "umsatz im jahr"  # the title; a series' name is the sheet's, cached
    doc.translations, doc.language = {len(doc.segments) - 1: "sales per year"}, "en"
    written = zipfile.ZipFile(io.BytesIO(doc.output())).read("word/charts/chart1.xml").decode("utf-8")
    assert '<a:r><a:rPr lang="en-US" b="1"/><a:t>sales per year</a:t></a:r>' in written  # DrawingML, as a slide's
    assert "<c:v>nord</c:v>" in written and minidom.parseString(written)


def test_an_opendocument_charts_titles_are_translated_its_data_and_other_objects_left_as_they_were(tmp_path):
    chart_ns = 'xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0"'
    chart = (
        f"<office:document-content {ODF} {chart_ns}><office:body><office:chart><chart:chart>"
        '<chart:title><text:p>umsatz im jahr</text:p></chart:title><chart:plot-area><chart:axis chart:name="x">'
        "<chart:title><text:p>ein jahr</text:p></chart:title></chart:axis></chart:plot-area>"
        '<table:table table:name="local-table"><table:table-row><table:table-cell office:value-type="string">'
        "<text:p>nord</text:p></table:table-cell></table:table-row></table:table></chart:chart></office:chart>"
        "</office:body></office:document-content>"
    )
    formula = (  # another kind of object (a formula, an embedded text): not a chart, left whole, its language too
        f'<office:document-content {ODF}><office:automatic-styles><style:style style:name="P1"><style:text-properties'
        ' fo:language="de" fo:country="DE"/></style:style></office:automatic-styles><office:body><text:p>eine formel'
        "</text:p></office:body></office:document-content>"
    )
    with zipfile.ZipFile(open_document(tmp_path / "a.odt"), "a") as archive:
        archive.writestr("Object 1/content.xml", chart)
        archive.writestr("Object 2/content.xml", formula)
    doc = OfficeDocument(tmp_path / "a.odt")
    found = [i for i, (part, *_) in enumerate(doc.paragraphs) if part.startswith("Object")]
    assert [doc.segments[i] for i in found] == ["umsatz im jahr", "ein jahr"]  # not the data's "nord"
    doc.translations, doc.language = dict(zip(found, ["sales per year", "a year"])), "en"
    written = zipfile.ZipFile(io.BytesIO(doc.output()))
    xml = written.read("Object 1/content.xml").decode("utf-8")
    assert (
        "<text:p>sales per year</text:p>" in xml and "<text:p>a year</text:p>" in xml and "<text:p>nord</text:p>" in xml
    )
    assert written.read("Object 2/content.xml").decode("utf-8") == formula and minidom.parseString(xml)


def test_a_smartart_diagrams_text_is_translated_in_its_data_and_in_the_drawing_shown(tmp_path):
    """A SmartArt diagram keeps its text twice: in its data (what Office lays the diagram out from) and in a
    drawing of it (what Office and LibreOffice show until it is laid out again): both are translated alike;
    its layout, with the placeholder text of its samples, is left as it was."""
    run = '<a:r><a:rPr lang="de-DE"/><a:t>ein hund</a:t></a:r>'
    data = (
        f'<dgm:dataModel xmlns:dgm="urn:dgm" {A}><dgm:ptLst><dgm:pt modelId="1" type="doc"><dgm:t><a:bodyPr/>'
        '<a:p><a:endParaRPr lang="de-DE"/></a:p></dgm:t></dgm:pt><dgm:pt modelId="2"><dgm:prSet phldrT="[Text]"/>'
        f"<dgm:t><a:bodyPr/><a:p>{run}</a:p></dgm:t></dgm:pt></dgm:ptLst></dgm:dataModel>"
    )
    drawing = (
        f'<dsp:drawing xmlns:dsp="urn:dsp" {A}><dsp:sp modelId="9"><dsp:txBody><a:p>{run}</a:p></dsp:txBody>'
        "</dsp:sp></dsp:drawing>"
    )
    layout = (
        f'<dgm:layoutDef xmlns:dgm="urn:dgm" {A}><dgm:sampData><a:p><a:r><a:t>beispiel</a:t></a:r></a:p>'
        "</dgm:sampData></dgm:layoutDef>"
    )
    with zipfile.ZipFile(pptx(tmp_path / "a.pptx"), "a") as archive:
        for name, xml in [("data1", data), ("drawing1", drawing), ("layout1", layout)]:
            archive.writestr(f"ppt/diagrams/{name}.xml", xml)
    doc = OfficeDocument(tmp_path / "a.pptx")
    found = [i for i, (part, *_) in enumerate(doc.paragraphs) if "diagrams" in part]
    assert [doc.paragraphs[i][0] for i in found] == ["ppt/diagrams/data1.xml", "ppt/diagrams/drawing1.xml"]
    assert [doc.segments[i] for i in found] == ["ein hund", "ein hund"]
    doc.translations, doc.language = {i: "a dog" for i in found}, "en"
    written = zipfile.ZipFile(io.BytesIO(doc.output()))
    for name in ("data1", "drawing1"):
        xml = written.read(f"ppt/diagrams/{name}.xml").decode("utf-8")
        assert (
            '<a:r><a:rPr lang="en-US"/><a:t>a dog</a:t></a:r>' in xml and "hund" not in xml and minidom.parseString(xml)
        )
    assert written.read("ppt/diagrams/layout1.xml").decode("utf-8") == layout
    assert 'phldrT="[Text]"' in written.read("ppt/diagrams/data1.xml").decode("utf-8")


def test_slides_notes_and_cell_texts_are_segments_too(tmp_path):
    slides = OfficeDocument(pptx(tmp_path / "a.pptx"))
    assert slides.segments == ["ein hund <w-1>läuft</w-1><w-2/> hier", "eine katze"]  # not the master's text
    cells = OfficeDocument(xlsx(tmp_path / "a.xlsx"))
    assert cells.segments == ["ein mann", "ein kind <w-1>schläft</w-1>", "eine frau"]
    slides.translations = {0: "a dog <w-1>runs</w-1><w-2/> here"}  # the space after the break is not written
    cells.translations = {0: "a man", 1: "a child <w-1>sleeps</w-1>", 2: "a woman"}
    (tmp_path / "b.pptx").write_bytes(slides.output())
    (tmp_path / "b.xlsx").write_bytes(cells.output())
    slide = parts(tmp_path / "b.pptx")["ppt/slides/slide1.xml"][1].decode("utf-8")
    broken = '<a:t>runs</a:t></a:r><a:br><a:rPr lang="de-DE"/></a:br><a:r><a:rPr lang="de-DE" dirty="0"/><a:t>here<'
    assert '<a:r><a:rPr lang="de-DE" b="1" dirty="0"/><a:t>runs</a:t>' in slide and broken in slide
    assert "<a:t>3</a:t></a:fld>" in slide and "xml:space" not in slide  # DrawingML text keeps its spaces as it is
    strings = parts(tmp_path / "b.xlsx")["xl/sharedStrings.xml"][1].decode("utf-8")
    assert '<si><t xml:space="preserve">a man</t></si><si><t>42</t></si>' in strings  # text alone stays alone
    assert '<r><rPr><b/><sz val="11"/></rPr><t xml:space="preserve">sleeps</t></r></si>' in strings
    sheet = parts(tmp_path / "b.xlsx")["xl/worksheets/sheet1.xml"][1].decode("utf-8")
    assert '<c r="A1" t="s"><v>0</v></c><c r="B1" t="inlineStr"><is><t xml:space="preserve">a woman</t></is>' in sheet
    for xml in (slide, strings, sheet):
        minidom.parseString(xml)


def test_translated_text_is_marked_with_the_target_language_for_spelling_checks(tmp_path):
    german = '<w:rPr><w:lang w:val="de-DE" w:eastAsia="zh-CN" w:bidi="ar-SA"/></w:rPr>'
    body = f"<w:p><w:r>{german}<w:t>ein hund</w:t></w:r></w:p><w:p><w:r>{german}<w:t>42</w:t></w:r></w:p>"
    styles = f"<w:styles {W}><w:docDefaults><w:rPrDefault>{german}</w:rPrDefault></w:docDefaults></w:styles>"
    source = docx(tmp_path / "a.docx", body=body, styles=styles)  # Word's defaults in its styles
    for language, marked in [
        ("en", '<w:lang w:val="en-US" w:eastAsia="zh-CN" w:bidi="ar-SA"/>'),  # the other scripts' as they were
        ("ja", '<w:lang w:val="de-DE" w:eastAsia="ja-JP" w:bidi="ar-SA"/>'),
        ("he", '<w:lang w:val="de-DE" w:eastAsia="zh-CN" w:bidi="he-IL"/>'),
        ("pt_BR", '<w:lang w:val="pt-BR" w:eastAsia="zh-CN" w:bidi="ar-SA"/>'),
    ]:
        doc = OfficeDocument(source)
        doc.translations, doc.language = {0: "a dog"}, language
        (tmp_path / "b.docx").write_bytes(doc.output())
        with zipfile.ZipFile(tmp_path / "b.docx") as archive:
            document, styles = archive.read("word/document.xml").decode(), archive.read("word/styles.xml").decode()
        assert document.count(marked) == 1 and german in document  # "42" is not translated: its language stays
        assert marked in styles
    slides = OfficeDocument(pptx(tmp_path / "a.pptx"))
    slides.translations, slides.language = {0: "a dog <w-1>runs</w-1><w-2/> here"}, "en"
    (tmp_path / "b.pptx").write_bytes(slides.output())
    slide = parts(tmp_path / "b.pptx")["ppt/slides/slide1.xml"][1].decode("utf-8")
    assert '<a:rPr lang="en-US" b="1" dirty="0"/>' in slide and '<a:endParaRPr lang="en-US"/>' in slide
    assert slide.count('lang="de-DE"') == 1  # the slide number's paragraph, not translated
    assert OfficeDocument(tmp_path / "b.pptx").segments[0] == "a dog <w-1>runs</w-1><w-2/> here"


@pytest.mark.parametrize("kind", MAKERS)
def test_no_translation_leaves_the_file_byte_for_byte(tmp_path, kind):
    doc = OfficeDocument(MAKERS[kind](tmp_path / f"a.{kind}"))
    (tmp_path / f"b.{kind}").write_bytes(doc.output())
    assert parts(tmp_path / f"b.{kind}") == parts(tmp_path / f"a.{kind}")


@pytest.mark.parametrize("seed", range(40))
def test_any_order_of_tags_gives_well_formed_xml_and_loses_no_point(seed):
    rng = random.Random(seed)
    paragraph = read_paragraph(WORD, "<w:p>", re.search(r"<w:p>(<w:bookmarkStart.*?)</w:p>", BODY).group(1))
    tags = TAG.findall(paragraph.segment)
    pieces = [f"<{'/' if close else ''}w-{n}{'/' if point else ''}>" for close, n, point in tags]
    rng.shuffle(pieces)
    pieces = [piece for piece in pieces if rng.random() < 0.8] + [rng.choice(["<w-9>", "</w-7>", "<w-1/>"])]
    words = ["a", "b &", "<c>", " "]
    translation = "".join(piece + rng.choice(words) for piece in pieces)
    xml = written_paragraph(paragraph, translation)
    minidom.parseString(f"<x {W} {R}>{xml}</x>")
    assert xml.count("<w:tab/>") == 1  # the tab, written once though the translation lost or doubled it


@pytest.mark.parametrize(
    "kind, name, legacy, main",
    [("docx", "a Word", ".doc", "word/document.xml"), ("pptx", "a PowerPoint", ".ppt", "ppt/presentation.xml"),
     ("xlsx", "an Excel", ".xls", "xl/workbook.xml"), ("odt", "an OpenDocument text", ".sxw", "content.xml")],
)  # fmt: skip
def test_a_file_that_is_not_what_it_is_named_is_one_line(tmp_path, kind, name, legacy, main):
    (tmp_path / f"a.{kind}").write_bytes(b"PK not a zip")
    with pytest.raises(MTError, match=rf"a.{kind}: not {name} file \(a .{kind} is a zip; save a {legacy} as .{kind}"):
        OfficeDocument(tmp_path / f"a.{kind}")
    with zipfile.ZipFile(tmp_path / f"b.{kind}", "w") as archive:
        archive.writestr("word.xml" if kind == "odt" else "content.xml", "<office/>")  # another format's, say
    with pytest.raises(MTError, match=f"b.{kind}: not {name} file: it holds no {main}"):
        OfficeDocument(tmp_path / f"b.{kind}")


def test_open_document_paragraphs_are_segments_and_a_footnote_is_one_of_its_own(tmp_path):
    doc = OfficeDocument(open_document(tmp_path / "a.odt"))
    assert doc.segments == [
        "ein hund",
        "ein mann <w-1>läuft</w-1>  hier<w-2/>.",  # a span wraps its text; two spaces; the footnote a point
        "eine katze isst",  # the footnote's paragraph, a segment of its own
        "eine frau<w-1/> sitzt <w-2>dort</w-2>",  # a tab (a space to the model), a link; the page break mark dropped
        "seite ",  # the footer, in the styles; its page number after the text
    ]
    doc.translations = {
        1: "a man <w-1>runs</w-1>  here<w-2/>.",
        2: "a cat eats",
        3: "a woman<w-1/> sits <w-2>there</w-2>",
    }
    doc.language = "en"
    (tmp_path / "b.odt").write_bytes(doc.output())
    after = parts(tmp_path / "b.odt")
    content, styles = after["content.xml"][1].decode(), after["styles.xml"][1].decode()
    minidom.parseString(content)
    footnote = (
        '<text:note-body><text:p text:style-name="Footnote">a cat eats</text:p></text:note-body></text:note>.</text:p>'
    )
    assert 'a man <text:span text:style-name="T1">runs</text:span> <text:s/>here<text:note' in content
    assert footnote in content  # translated inside the paragraph around it, also translated
    assert '<text:p>a woman<text:tab/>sits <text:a xlink:href="https://x.de">there</text:a></text:p>' in content
    assert '<text:h text:style-name="H1" text:outline-level="1">ein hund</text:h>' in content  # not translated: kept
    assert 'fo:language="en" fo:country="US"' in content + styles and 'fo:language="de"' not in content + styles
    assert 'style:language-asian="zh" style:country-asian="CN"' in styles  # another script's language
    assert "<dc:language>en-US</dc:language>" in after["meta.xml"][1].decode()  # the document's own
    assert OfficeDocument(tmp_path / "b.odt").segments[1:4] == [doc.translations[i] for i in (1, 2, 3)]
    before = parts(tmp_path / "a.odt")
    assert list(after) == list(before) and after["mimetype"] == before["mimetype"]  # first and stored, as it was
    doc.translations = {2: "a cat eats"}  # the footnote alone: written where it stands
    with zipfile.ZipFile(io.BytesIO(doc.output())) as written:
        alone = written.read("content.xml").decode()
    assert footnote in alone and "ein mann <text:span" in alone


def test_open_document_spaces_that_would_collapse_are_written_as_its_spaces_element():
    paragraph = read_paragraph(OPEN_TEXT, "<text:p>", '<text:s/>(leise) ein <text:s text:c="2"/>hund')
    assert paragraph.segment == " (leise) ein   hund"
    written = written_paragraph(paragraph, "(quietly) a   dog")  # the paragraph's first space, then two more
    assert written == '<text:p><text:s/>(quietly) a <text:s text:c="2"/>dog</text:p>'


def test_translate_takes_a_word_document_and_keeps_its_formatting(trained_run, tmp_path):
    given = ["translate", "-c", str(trained_run), "--beam", "1", "-i", str(docx(tmp_path / "bericht.docx"))]
    done = run_cli(*given, "-o", str(tmp_path / "report.docx"))
    assert "5 paragraphs translated, 2 with formatting kept in place" in done.stderr
    translated = OfficeDocument(tmp_path / "report.docx")
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    assert translated.segments[0] == translator.translate("ein hund")
    assert translated.segments[1].replace("<w-1>", "").replace("</w-1>", "") == translator.translate(
        "ein mann läuft hier"
    )
    assert f"<w-1>{LEXICON['läuft']}</w-1>" in translated.segments[1]  # the bold word's translation bold
    assert translated.segments[4] == translator.translate("frau heute") + " "  # its space before the page number
    for refused, message in [
        ([], "a Word document is written to a file, not stdout: -o out.docx"),
        (["-o", str(tmp_path / "report.txt")], "a Word input is written as Word: name the output .docx"),
        (["-o", str(tmp_path / "report.pptx")], "a PowerPoint output is a PowerPoint input translated"),
    ]:
        failed = run_cli(*given, *refused, check=False)
        assert failed.returncode == 2 and message in failed.stderr


SLIDE_MARKED = ("ppt/slides/slide1.xml", '<a:endParaRPr lang="en-US"/>')
STYLES_MARKED = ("styles.xml", 'fo:language="en" fo:country="US"')


@pytest.mark.parametrize(
    "kind, said, plain, bold, marked",
    [
        ("pptx", "2 paragraphs translated, 1", (1, "eine katze"), (0, "läuft"), SLIDE_MARKED),
        ("xlsx", "3 cell texts translated, 1", (0, "ein mann"), (1, "schläft"), None),  # a cell's text names none
        ("odt", "5 paragraphs translated, 2", (0, "ein hund"), (1, "läuft"), STYLES_MARKED),
        ("ods", "3 cell texts translated, 1", (0, "ein mann"), (1, "schläft"), STYLES_MARKED),
    ],
)
def test_translate_takes_slides_workbooks_and_open_documents(trained_run, tmp_path, kind, said, plain, bold, marked):
    source = MAKERS[kind](tmp_path / f"a.{kind}")
    done = run_cli(
        "translate", "-c", str(trained_run), "--beam", "1", "-i", str(source), "-o", str(tmp_path / f"b.{kind}")
    )
    assert f"{said} with formatting kept in place" in done.stderr
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    got = OfficeDocument(tmp_path / f"b.{kind}").segments
    assert got[plain[0]] == translator.translate(plain[1])
    assert f"<w-1>{LEXICON[bold[1]]}</w-1>" in got[bold[0]]
    if marked:  # with the model's target language
        assert marked[1] in parts(tmp_path / f"b.{kind}")[marked[0]][1].decode()


def test_a_word_content_controls_text_is_translated_and_its_properties_kept(tmp_path):
    """A form field or a document property shown in the text (<w:sdt>): what it shows is part of the
    sentence, its properties (its name, its kind) stay with it; a control without content stays as it was."""
    properties = '<w:sdtPr><w:alias w:val="Name"/><w:id w:val="7"/><w:text/></w:sdtPr>'
    control = f"<w:sdt>{properties}<w:sdtEndPr/><w:sdtContent><w:r>{BOLD}<w:t>hund</w:t></w:r></w:sdtContent></w:sdt>"
    empty = "<w:sdt><w:sdtPr><w:id w:val='8'/></w:sdtPr></w:sdt>"
    body = (
        f'<w:p><w:r><w:t xml:space="preserve">ein </w:t></w:r>{control}<w:r><w:t xml:space="preserve"> läuft</w:t>'
        f"</w:r>{empty}</w:p>"
        "<w:p><w:sdt><w:sdtPr/><w:sdtContent><w:r><w:t>eine katze</w:t></w:r></w:sdtContent></w:sdt></w:p>"
    )
    doc = OfficeDocument(docx(tmp_path / "a.docx", body=body))
    assert doc.segments[:2] == ["ein <w-1><w-2>hund</w-2></w-1> läuft", "<w-1>eine katze</w-1>"]  # empty: after
    doc.translations = {0: "a <w-1><w-2>dog</w-2></w-1> runs", 1: "<w-1>a cat</w-1>"}
    document = zipfile.ZipFile(io.BytesIO(doc.output())).read("word/document.xml").decode("utf-8")
    minidom.parseString(document)
    assert f"<w:sdt>{properties}<w:sdtEndPr/><w:sdtContent><w:r>{BOLD}<w:t" in document
    assert ">dog</w:t></w:r></w:sdtContent></w:sdt>" in document and empty in document
    assert ">a cat</w:t></w:r></w:sdtContent></w:sdt></w:p>" in document
    assert not any(word in document for word in ("hund", "katze", "läuft"))
