"""Renders texts we hold as the documents people keep (PDF, DOCX, PPTX, XLSX, XLS, ODS, HTML, EPUB) and records,
for every file, what a reader should get back: the text in reading order, the boilerplate it should drop, and the
page (slide, sheet, chapter) each source sentence was put on.

Run through `cargo xtask docs-corpus` (which makes the virtual environment with the pinned packages). Sources:

- `fixture`: our hand-written multi-hop fixture (datasets/kgrag-fixture/fixture.json), the small corpus
  committed as test data under crates/documents/tests/data;
- `ultradomain`: UltraDomain Mix documents (KGRAG_DATA_DIR/ultradomain-mix/mix_unique_contexts.json) as PDF
  (one and two columns), DOCX, PPTX, HTML and EPUB;
- `musique`: MuSiQue passages (KGRAG_DATA_DIR/musique-hipporag/musique_train_corpus.json) as spreadsheets
  (XLSX, XLS, ODS) and a DOCX whose headings are the passages' titles.

`--bad` adds files a reader must refuse with a clear error: an encrypted PDF and a scanned PDF (an image, no
text layer).

For every file `NAME` it writes `NAME.truth.json`:
  {"file", "format", "variant", "source", "unit": "page"|"slide"|"sheet"|"chapter"|null, "units",
   "expected": "the text in reading order", "boilerplate": ["lines a reader should drop", ...],
   "sentences": [{"text", "page", "page_end"}, ...]}
and `manifest.json` lists the files.
"""

import argparse
import io
import json
import os
import re
import sys
import zlib

SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
FONT_DIRS = ["/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu"]


def sentences(paragraph):
    parts = [s.strip() for s in SENTENCE_END.split(paragraph)]
    return [s for s in parts if s]


class Doc:
    """A document's content: a title, sections (a heading and paragraphs, each a list of sentences, or list
    items), and an optional table (a header row and rows)."""

    def __init__(self, name, title, sections, table=None, source=""):
        self.name = name
        self.title = title
        self.sections = sections  # [(heading, [("p", [sentences]) | ("li", [sentences])])]
        self.table = table
        self.source = source

    def blocks(self):
        """The document in reading order: ("title"|"h"|"p"|"li"|"table", payload)."""
        yield ("title", self.title)
        for i, (heading, paras) in enumerate(self.sections):
            yield ("h", heading)
            for kind, sents in paras:
                yield (kind, sents)
            if self.table and i == min(1, len(self.sections) - 1):
                yield ("table", self.table)

    def expected(self):
        out = []
        for kind, payload in self.blocks():
            if kind in ("title", "h"):
                out.append(payload)
            elif kind == "table":
                out.extend(" ".join(row) for row in payload)
            else:
                out.append(" ".join(payload))
        return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- sources


def fixture_doc(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    sections = []
    for p in data["passages"]:
        sents = sentences(p["text"])
        paras = [("p", sents)]
        # A list in every fourth section: the passage's facts as items.
        if len(sections) % 4 == 3 and p.get("triples"):
            paras.append(("li", [" ".join(t) + "." for t in p["triples"][:3]]))
        sections.append((p["title"], paras))
    table = [["Subject", "Relation", "Object"]]
    for p in data["passages"]:
        for s, r, o in p.get("triples", []):
            if r.startswith("was founded in") or r.startswith("was built in"):
                table.append([s, r, o])
    return Doc("guilds", "The Coastal Guilds: a Fixture History", sections,
               table if len(table) > 2 else None, "kgrag-fixture")


def gutenberg_paragraphs(text):
    paras = []
    for block in re.split(r"\n\s*\n", text):
        words = " ".join(line.strip() for line in block.splitlines()).split()
        if words:
            paras.append(" ".join(words))
    return paras


def ultradomain_docs(data_dir, count, max_words):
    path = os.path.join(data_dir, "ultradomain-mix", "mix_unique_contexts.json")
    with open(path, encoding="utf-8") as f:
        texts = json.load(f)
    docs = []
    for i, text in enumerate(texts[:count]):
        paras = gutenberg_paragraphs(text)
        if not paras:
            continue
        # The first paragraph is the title when it is short; else the title is its first words.
        if len(paras[0]) <= 120 and len(paras) > 1:
            title, rest = paras[0], paras[1:]
        else:
            title, rest = " ".join(paras[0].split()[:8]), paras
        body, words = [], 0
        for p in rest:
            body.append(p)
            words += len(p.split())
            if max_words and words >= max_words:
                break
        sections, part = [], []
        for j, p in enumerate(body):
            part.append(("p", sentences(p)))
            if len(part) == 8 or j == len(body) - 1:
                sections.append((f"Part {len(sections) + 1}", part))
                part = []
        if not sections:
            continue
        table = [["Part", "Paragraphs", "Words"]]
        for k, (_, ps) in enumerate(sections[:6]):
            table.append([f"Part {k + 1}", str(len(ps)), str(sum(len(" ".join(s).split()) for _, s in ps))])
        docs.append(Doc(f"ultradomain-{i:02d}", title, sections, table, f"ultradomain-mix:{i}"))
    return docs


def musique_passages(data_dir, count):
    path = os.path.join(data_dir, "musique-hipporag", "musique_train_corpus.json")
    with open(path, encoding="utf-8") as f:
        corpus = json.load(f)
    return [(p["title"], p["text"]) for p in corpus[:count]]


# ---------------------------------------------------------------------------------------------- PDF


def find_font(name):
    for d in FONT_DIRS:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


class PdfLayout:
    """Lays a Doc out on pages by hand (so that we know the page of every word): one column with whole lines
    (spaces in the text, as word processors write), or two justified columns placed word by word (no space
    characters, as TeX writes), with running headers, footers, page numbers and hyphenation."""

    def __init__(self, doc, columns, page_format, core_font, boilerplate, hyphenate, body_size):
        from fpdf import FPDF

        self.doc = doc
        self.pdf = FPDF(unit="pt", format=page_format)
        self.pdf.set_auto_page_break(False)
        self.pdf.set_compression(True)
        regular, bold = find_font("DejaVuSerif.ttf"), find_font("DejaVuSerif-Bold.ttf")
        if core_font or not (regular and bold):
            self.family = "Times"
            self.core = True
        else:
            self.pdf.add_font("Body", "", regular)
            self.pdf.add_font("Body", "B", bold)
            fallback = find_font("DejaVuSans.ttf")
            if fallback:
                self.pdf.add_font("Fallback", "", fallback)
                self.pdf.set_fallback_fonts(["Fallback"])
            self.family = "Body"
            self.core = False
        self.columns = columns
        self.boilerplate_on = boilerplate
        self.hyphenate = hyphenate
        self.size = body_size
        self.leading = body_size * 1.35
        self.margin = 50 if page_format == "A4" else 36
        self.gutter = 18
        w = self.pdf.w - 2 * self.margin
        self.col_w = (w - (columns - 1) * self.gutter) / columns
        self.top = self.margin + (18 if boilerplate else 0)
        self.bottom = self.pdf.h - self.margin - (14 if boilerplate else 0)
        self.page = 0
        self.col = 0
        self.y = 0.0
        self.boilerplate = []
        self.sentence_pages = []  # per sentence: [first page, last page]
        self.header = f"{doc.title[:60]} \u00b7 kgrag document corpus"
        self.new_page()

    def text_ok(self, s):
        if self.core:
            return s.encode("latin-1", "replace").decode("latin-1")
        return s

    def font(self, bold=False, size=None):
        self.pdf.set_font(self.family, "B" if bold else "", size or self.size)

    def new_page(self):
        self.pdf.add_page()
        self.page += 1
        self.col = 0
        self.y = self.top
        if self.boilerplate_on:
            style, size = self.pdf.font_style, self.pdf.font_size_pt
            self.font(size=8)
            self.pdf.text(self.margin, self.margin - 4, self.text_ok(self.header))
            left = "Generated for evaluation only"
            self.pdf.text(self.margin, self.pdf.h - self.margin + 12, left)
            number = str(self.page)
            self.pdf.text(self.pdf.w - self.margin - self.pdf.get_string_width(number),
                          self.pdf.h - self.margin + 12, number)
            self.boilerplate += [self.header, left, number]
            if size:
                self.pdf.set_font(self.family, style, size)

    def advance(self, height):
        """Room for `height` in the current column, else the next column or page."""
        if self.y + height > self.bottom:
            if self.col + 1 < self.columns:
                self.col += 1
                self.y = self.top
            else:
                self.new_page()

    def x0(self):
        return self.margin + self.col * (self.col_w + self.gutter)

    def heading(self, text, size):
        self.font(True, size)
        lines = self.break_words([(w, None) for w in text.split()], self.col_w)
        self.advance(size * 1.3 * len(lines) + size * 0.6 + self.leading * 2)
        self.y += size * 0.6
        for line in lines:
            self.y += size * 1.2
            self.pdf.text(self.x0(), self.y, self.text_ok(" ".join(w for w, _ in line)))
        self.y += size * 0.4

    def split_long(self, words, width):
        """Words wider than a line, broken after punctuation (so their tokens stay the same) to fit."""
        out = []
        for word, sid in words:
            while self.pdf.get_string_width(self.text_ok(word)) > width and len(word) > 1:
                cut = None
                for k in range(len(word) - 1, 0, -1):
                    if not (word[k - 1].isalnum() or word[k - 1] == "_") and self.pdf.get_string_width(self.text_ok(word[:k])) <= width:
                        cut = k
                        break
                if cut is None:
                    cut = max(1, next((k for k in range(len(word), 0, -1)
                                       if self.pdf.get_string_width(self.text_ok(word[:k])) <= width), 1))
                out.append((word[:cut], sid))
                word = word[cut:]
            out.append((word, sid))
        return out

    def break_words(self, words, width, indent=0.0):
        space = self.pdf.get_string_width(" ")
        lines, line, used = [], [], indent
        words = self.split_long(words, width - indent)
        for word, sid in words:
            ww = self.pdf.get_string_width(self.text_ok(word))
            need = ww + (space if line else 0)
            if used + need <= width or not line:
                line.append((word, sid))
                used += need
                continue
            rest = width - used - space
            if self.hyphenate and len(word) >= 8 and word.isalpha():
                cut = None
                for k in range(len(word) - 3, 2, -1):
                    if self.pdf.get_string_width(self.text_ok(word[:k] + "-")) <= rest:
                        cut = k
                        break
                if cut:
                    line.append((word[:cut] + "-", sid))
                    lines.append(line)
                    line, used = [(word[cut:], sid)], indent + self.pdf.get_string_width(word[cut:])
                    continue
            lines.append(line)
            line, used = [(word, sid)], indent + ww
        if line:
            lines.append(line)
        return lines

    def paragraph(self, sents, first_sentence, bullet=False):
        self.font()
        words = []
        for k, s in enumerate(sents):
            for w in s.split():
                words.append((w, first_sentence + k))
        indent = 12 if bullet else 0
        lines = self.break_words(words, self.col_w - indent)
        self.y += self.leading * 0.35
        for n, line in enumerate(lines):
            self.advance(self.leading)
            self.y += self.leading
            x = self.x0() + indent
            if bullet and n == 0:
                self.pdf.text(x - 10, self.y, "\u2022" if not self.core else "-")
            last = n == len(lines) - 1
            if self.columns == 1:
                self.pdf.text(x, self.y, self.text_ok(" ".join(w for w, _ in line)))
            else:
                # Justified, word by word.
                widths = [self.pdf.get_string_width(self.text_ok(w)) for w, _ in line]
                gaps = len(line) - 1
                space = self.pdf.get_string_width(" ")
                if last or gaps == 0:
                    gap = space
                else:
                    gap = max(space, (self.col_w - indent - sum(widths)) / gaps)
                for (w, _), ww in zip(line, widths):
                    self.pdf.text(x, self.y, self.text_ok(w))
                    x += ww + gap
            for _, sid in line:
                if sid is None:
                    continue
                pages = self.sentence_pages[sid]
                if pages[0] == 0:
                    pages[0] = self.page
                pages[1] = self.page

    def table(self, rows):
        rows = [list(r) for r in rows]
        self.table_rows = rows
        self.font(size=self.size - 1)
        cols = len(rows[0])
        cell_w = self.col_w / cols
        row_h = self.leading * 1.1
        self.y += self.leading * 0.5
        self.advance(row_h * min(len(rows), 4))
        for r, row in enumerate(rows):
            self.advance(row_h)
            x = self.x0()
            self.font(r == 0, self.size - 1)
            for c, cell in enumerate(row):
                text = cell
                while self.pdf.get_string_width(self.text_ok(text)) > cell_w - 6 and len(text) > 3:
                    text = text[:-1]
                self.pdf.rect(x, self.y, cell_w, row_h)
                self.pdf.text(x + 3, self.y + row_h * 0.72, self.text_ok(text))
                row[c] = text
                x += cell_w
            self.y += row_h
        self.y += self.leading * 0.3

    def render(self, out_path):
        doc = self.doc
        sentence_texts = []
        self.heading(doc.title, self.size + 6)
        for kind, payload in doc.blocks():
            if kind == "title":
                continue
            if kind == "h":
                self.heading(payload, self.size + 3)
            elif kind == "table":
                self.table(payload)
            else:
                first = len(sentence_texts)
                sentence_texts.extend(payload)
                self.sentence_pages.extend([0, 0] for _ in payload)
                if kind == "li":
                    for k, item in enumerate(payload):
                        self.paragraph([item], first + k, bullet=True)
                else:
                    self.paragraph(payload, first)
        self.pdf.output(out_path)
        sents = [{"text": t, "page": p[0], "page_end": p[1]} for t, p in zip(sentence_texts, self.sentence_pages)]
        return sents, self.page


_CHARSET = None


def font_charset():
    """The characters the PDF fonts can draw (DejaVu Serif and its DejaVu Sans fallback): text outside it
    would be drawn as empty boxes, so the PDFs and their truth leave it out."""
    global _CHARSET
    if _CHARSET is None:
        from fontTools.ttLib import TTFont

        chars = set()
        for name in ("DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSans.ttf"):
            path = find_font(name)
            if path:
                chars |= set(TTFont(path).getBestCmap().keys())
        _CHARSET = chars
    return _CHARSET


def drawable(doc):
    """`doc` with the characters its PDF font cannot draw removed."""
    chars = font_charset()
    if not chars:
        return doc
    keep = lambda t: " ".join("".join(c for c in t if ord(c) in chars or c.isspace()).split())
    sections = []
    for heading, paras in doc.sections:
        ps = []
        for kind, sents in paras:
            sents = [keep(x) for x in sents]
            sents = [x for x in sents if x]
            if sents:
                ps.append((kind, sents))
        sections.append((keep(heading) or heading, ps))
    table = [[keep(c) for c in row] for row in doc.table] if doc.table else None
    return Doc(doc.name, keep(doc.title), sections, table, doc.source)


def expected_for_pdf(doc, core, table_rows=None):
    if table_rows is not None:
        doc = Doc(doc.name, doc.title, doc.sections, table_rows, doc.source)
    text = doc.expected()
    return text.encode("latin-1", "replace").decode("latin-1") if core else text


def write_pdf(doc, out_dir, variant, page_format="A4"):
    columns = 2 if variant == "two-column" else 1
    core = variant == "one-column-core"
    if not core:
        doc = drawable(doc)
    layout = PdfLayout(doc, columns, page_format, core_font=core, boilerplate=(columns == 2),
                       hyphenate=(columns == 2), body_size=9.5 if columns == 2 else 11)
    suffix = {"one-column": "", "one-column-core": "-core", "two-column": "-2col"}[variant]
    name = f"{doc.name}{suffix}.pdf"
    sents, pages = layout.render(os.path.join(out_dir, name))
    if core:
        for s in sents:
            s["text"] = s["text"].encode("latin-1", "replace").decode("latin-1")
    return truth(name, "pdf", variant, doc, "page", pages, expected_for_pdf(doc, core, getattr(layout, "table_rows", None)),
                 sorted(set(layout.boilerplate)), sents)


# ---------------------------------------------------------------------------------------------- Office


def write_docx(doc, out_dir, paras_per_page=6):
    import docx
    from docx.enum.text import WD_BREAK

    d = docx.Document()
    section = d.sections[0]
    header = f"{doc.title[:60]} - internal"
    section.header.paragraphs[0].text = header
    section.footer.paragraphs[0].text = "Generated for evaluation only"
    d.core_properties.title = doc.title
    d.add_heading(doc.title, level=0)
    page, count, sents = 1, 0, []

    def page_break():
        nonlocal page, count
        d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
        page += 1
        count = 0

    for kind, payload in doc.blocks():
        if kind == "title":
            continue
        if kind == "h":
            if count >= paras_per_page:
                page_break()
            d.add_heading(payload, level=1 if not payload.startswith("Part") else 2)
        elif kind == "table":
            t = d.add_table(rows=len(payload), cols=len(payload[0]))
            t.style = "Table Grid"
            for r, row in enumerate(payload):
                for c, cell in enumerate(row):
                    t.cell(r, c).text = cell
        else:
            if count >= paras_per_page:
                page_break()
            style = "List Bullet" if kind == "li" else None
            if kind == "li":
                for s in payload:
                    d.add_paragraph(s, style=style)
            else:
                d.add_paragraph(" ".join(payload))
            sents += [{"text": s, "page": page, "page_end": page} for s in payload]
            count += 1
    name = f"{doc.name}.docx"
    d.save(os.path.join(out_dir, name))
    return truth(name, "docx", "headings-lists-table", doc, "page", page, doc_expected_lines(doc),
                 [header, "Generated for evaluation only"], sents)


def doc_expected_lines(doc):
    """The expected text where list items are lines of their own (DOCX, HTML, EPUB)."""
    out = []
    for kind, payload in doc.blocks():
        if kind in ("title", "h"):
            out.append(payload)
        elif kind == "table":
            out.extend(" ".join(row) for row in payload)
        elif kind == "li":
            out.extend(payload)
        else:
            out.append(" ".join(payload))
    return "\n".join(out) + "\n"


def write_pptx(doc, out_dir, words_per_slide=110):
    from pptx import Presentation
    from pptx.util import Inches, Pt

    prs = Presentation()
    title_slide = prs.slides.add_slide(prs.slide_layouts[0])
    title_slide.shapes.title.text = doc.title
    title_slide.placeholders[1].text = "kgrag document corpus"
    slide_no, sents, expected = 1, [], [doc.title, "kgrag document corpus"]
    for kind, payload in doc.blocks():
        if kind == "title":
            continue
        if kind == "h":
            heading = payload
            continue
        if kind == "table":
            slide = prs.slides.add_slide(prs.slide_layouts[5])
            slide_no += 1
            slide.shapes.title.text = f"{heading} (table)"
            expected.append(f"{heading} (table)")
            rows, cols = len(payload), len(payload[0])
            shape = slide.shapes.add_table(rows, cols, Inches(0.5), Inches(1.5), Inches(9), Inches(0.4) * rows)
            for r, row in enumerate(payload):
                for c, cell in enumerate(row):
                    shape.table.cell(r, c).text = cell
                expected.append(" ".join(row))
            continue
        # The paragraph's sentences on slides of about words_per_slide words, titled by the section heading.
        chunk = []
        for s in payload + [None]:
            words = sum(len(x.split()) for x in chunk)
            if s is None or (chunk and words + len(s.split()) > words_per_slide):
                if chunk:
                    slide = prs.slides.add_slide(prs.slide_layouts[1])
                    slide_no += 1
                    slide.shapes.title.text = heading
                    body = slide.placeholders[1].text_frame
                    body.text = chunk[0]
                    for extra in chunk[1:]:
                        body.add_paragraph().text = extra
                    for p in body.paragraphs:
                        for r in p.runs:
                            r.font.size = Pt(12)
                    expected.append(heading)
                    expected.extend(chunk)
                    sents += [{"text": x, "page": slide_no, "page_end": slide_no} for x in chunk]
                chunk = []
            if s is not None:
                chunk.append(s)
    name = f"{doc.name}.pptx"
    prs.save(os.path.join(out_dir, name))
    return truth(name, "pptx", "title-bullets-table", doc, "slide", slide_no, "\n".join(expected) + "\n", [], sents)


def sheet_rows(passages, per_sheet):
    sheets = []
    for k in range(0, len(passages), per_sheet):
        rows = [["id", "title", "text"]]
        for i, (title, text) in enumerate(passages[k:k + per_sheet]):
            rows.append([str(k + i), title, text])
        sheets.append((f"Passages {len(sheets) + 1}", rows))
    return sheets


def sheet_truth(name, fmt, sheets, source):
    expected, sents = [], []
    for n, (sheet, rows) in enumerate(sheets, start=1):
        expected.append(sheet)
        for row in rows:
            expected.append(" ".join(row))
            if row[0] != "id":
                sents += [{"text": s, "page": n, "page_end": n} for s in sentences(row[2])]
    return {"file": name, "format": fmt, "variant": "passages", "source": source, "unit": "sheet",
            "units": len(sheets), "expected": "\n".join(expected) + "\n", "boilerplate": [], "sentences": sents}


def write_xlsx(sheets, out_dir, base, source):
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for sheet, rows in sheets:
        ws = wb.create_sheet(sheet)
        for row in rows:
            ws.append([int(row[0]) if row[0].isdigit() else row[0]] + row[1:])
    name = f"{base}.xlsx"
    wb.save(os.path.join(out_dir, name))
    return sheet_truth(name, "xlsx", sheets, source)


def write_xls(sheets, out_dir, base, source):
    import xlwt

    wb = xlwt.Workbook(encoding="utf-8")
    for sheet, rows in sheets:
        ws = wb.add_sheet(sheet)
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                ws.write(r, c, int(cell) if c == 0 and cell.isdigit() else cell)
    name = f"{base}.xls"
    wb.save(os.path.join(out_dir, name))
    return sheet_truth(name, "xls", sheets, source)


def write_ods(sheets, out_dir, base, source):
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    ods = OpenDocumentSpreadsheet()
    for sheet, rows in sheets:
        t = Table(name=sheet)
        for row in rows:
            tr = TableRow()
            for c, cell in enumerate(row):
                if c == 0 and cell.isdigit():
                    tc = TableCell(valuetype="float", value=cell)
                else:
                    tc = TableCell(valuetype="string")
                tc.addElement(P(text=cell))
                tr.addElement(tc)
            t.addElement(tr)
        ods.spreadsheet.addElement(t)
    name = f"{base}.ods"
    ods.save(os.path.join(out_dir, name))
    return sheet_truth(name, "ods", sheets, source)


# ---------------------------------------------------------------------------------------------- HTML, EPUB


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


HTML_BOILERPLATE = {
    "nav": ["Home", "Archive", "Topics", "About us", "Subscribe"],
    "cookie": "We use cookies to improve your experience. By continuing you accept our cookie policy.",
    "cookie_button": "Accept all cookies",
    "related": ["Related articles", "Ten facts about lighthouses", "How glass is made"],
    "share": "Share this article",
    "footer": ["\u00a9 2026 The Example Gazette. All rights reserved.", "Privacy policy", "Terms of use"],
}


def body_html(doc, semantic):
    out = []
    for kind, payload in doc.blocks():
        if kind == "title":
            out.append(f"<h1>{esc(payload)}</h1>")
        elif kind == "h":
            out.append(f"<h2>{esc(payload)}</h2>")
        elif kind == "table":
            rows = "".join("<tr>" + "".join(f"<{'th' if r == 0 else 'td'}>{esc(c)}</{'th' if r == 0 else 'td'}>" for c in row) + "</tr>\n"
                           for r, row in enumerate(payload))
            out.append(f"<table>\n{rows}</table>")
        elif kind == "li":
            out.append("<ul>" + "".join(f"<li>{esc(s)}</li>" for s in payload) + "</ul>")
        else:
            # Paragraphs left unclosed in the legacy page, as old HTML often has them.
            close = "</p>" if semantic else ""
            out.append(f"<p>{esc(' '.join(payload))}{close}")
    return "\n".join(out)


def write_html(doc, out_dir, semantic=True):
    b = HTML_BOILERPLATE
    nav = "".join(f'<li><a href="/{i}">{esc(x)}</a></li>' for i, x in enumerate(b["nav"]))
    related = "".join(f'<li><a href="/r{i}">{esc(x)}</a></li>' for i, x in enumerate(b["related"][1:]))
    footer = "".join(f"<p>{esc(x)}</p>" for x in b["footer"])
    if semantic:
        page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(doc.title)} | The Example Gazette</title>
<style>body{{font-family:serif}} .cookie{{position:fixed;bottom:0}}</style>
<script>window.dataLayer = window.dataLayer || []; function gtag(){{dataLayer.push(arguments);}}</script>
</head><body>
<header><a class="logo" href="/">The Example Gazette</a><nav><ul>{nav}</ul></nav></header>
<div id="cookie-consent" class="cookie-banner"><p>{esc(b["cookie"])}</p><button>{esc(b["cookie_button"])}</button></div>
<main><article>
{body_html(doc, True)}
<div class="share-buttons">{esc(b["share"])}</div>
</article>
<aside><h3>{esc(b["related"][0])}</h3><ul>{related}</ul></aside></main>
<footer>{footer}</footer>
</body></html>
"""
        boiler = b["nav"] + ["The Example Gazette", b["cookie"], b["cookie_button"], b["share"]] + b["related"] + b["footer"]
    else:
        page = f"""<html><head><title>{esc(doc.title)}</title>
<script type="text/javascript">var _gaq = _gaq || [];</script></head>
<body bgcolor="#ffffff">
<div id="top-menu" class="navbar"><ul>{nav}</ul></div>
<div class="gdpr-notice">{esc(b["cookie"])} <a href="#">{esc(b["cookie_button"])}</a></div>
<table width="100%"><tr><td id="content">
{body_html(doc, False)}
</td><td class="sidebar" width="200"><b>{esc(b["related"][0])}</b><ul>{related}</ul></td></tr></table>
<div class="footer">{footer}</div>
</body></html>
"""
        boiler = b["nav"] + [b["cookie"] + " " + b["cookie_button"]] + b["related"] + b["footer"]
    name = f"{doc.name}{'' if semantic else '-legacy'}.html"
    with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
        f.write(page)
    sents = []
    for kind, payload in doc.blocks():
        if kind in ("p", "li"):
            sents += [{"text": s, "page": None, "page_end": None} for s in payload]
    return truth(name, "html", "semantic" if semantic else "legacy-layout", doc, None, 0,
                 doc_expected_lines(doc), boiler, sents)


def write_epub(doc, out_dir):
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier(f"kgrag-{doc.name}")
    book.set_title(doc.title)
    book.set_language("en")
    chapters, sents, expected = [], [], [doc.title]
    blocks = list(doc.blocks())
    current = None
    number = 0

    def start(heading):
        nonlocal current, number
        number += 1
        current = {"heading": heading, "html": [f"<h1>{esc(heading)}</h1>"], "number": number}
        chapters.append(current)
        expected.append(heading)

    # The title on a chapter of its own, then one chapter per section.
    start(doc.title)
    expected.pop()
    for kind, payload in blocks[1:]:
        if kind == "h":
            start(payload)
        elif kind == "table":
            current["html"].append("<table>" + "".join(
                "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in payload) + "</table>")
            expected.extend(" ".join(row) for row in payload)
        elif kind == "li":
            current["html"].append("<ul>" + "".join(f"<li>{esc(s)}</li>" for s in payload) + "</ul>")
            expected.extend(payload)
            sents += [{"text": s, "page": current["number"], "page_end": current["number"]} for s in payload]
        else:
            current["html"].append(f"<p>{esc(' '.join(payload))}</p>")
            expected.append(" ".join(payload))
            sents += [{"text": s, "page": current["number"], "page_end": current["number"]} for s in payload]
    items = []
    for c in chapters:
        item = epub.EpubHtml(title=c["heading"], file_name=f"chap_{c['number']:03d}.xhtml", lang="en")
        item.content = "".join(c["html"])
        book.add_item(item)
        items.append(item)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = items
    name = f"{doc.name}.epub"
    epub.write_epub(os.path.join(out_dir, name), book)
    return truth(name, "epub", "chapters", doc, "chapter", len(chapters), "\n".join(expected) + "\n", [], sents)


# ---------------------------------------------------------------------------------------------- bad files


def write_bad(out_dir):
    from fpdf import FPDF

    out = []
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.cell(text="A secret that only the password opens.")
    pdf.set_encryption(owner_password="owner", user_password="user")
    pdf.output(os.path.join(out_dir, "encrypted.pdf"))
    out.append({"file": "encrypted.pdf", "format": "pdf", "expect_error": "encrypted"})
    # A "scan": a page that is one grey image and no text.
    from PIL import Image, ImageDraw

    img = Image.new("L", (400, 300), 255)
    draw = ImageDraw.Draw(img)
    for y in range(40, 260, 18):
        draw.line((30, y, 370, y), fill=60, width=5)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    buf.seek(0)
    pdf = FPDF()
    pdf.add_page()
    pdf.image(buf, x=10, y=10, w=180)
    pdf.output(os.path.join(out_dir, "scanned.pdf"))
    out.append({"file": "scanned.pdf", "format": "pdf", "expect_error": "no text layer"})
    return out


# ---------------------------------------------------------------------------------------------- main


def truth(name, fmt, variant, doc, unit, units, expected, boilerplate, sents):
    return {"file": name, "format": fmt, "variant": variant, "source": doc.source, "unit": unit,
            "units": units, "expected": expected, "boilerplate": boilerplate, "sentences": sents}


def save(out_dir, records):
    for r in records:
        with open(os.path.join(out_dir, r["file"] + ".truth.json"), "w", encoding="utf-8") as f:
            json.dump(r, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
    manifest = sorted(r["file"] for r in records)
    path = os.path.join(out_dir, "manifest.json")
    old = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)["files"]
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"files": sorted(set(old) | set(manifest))}, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--source", choices=["fixture", "ultradomain", "musique"], action="append")
    ap.add_argument("--fixture", default="datasets/kgrag-fixture/fixture.json")
    ap.add_argument("--data-dir", default=os.environ.get("KGRAG_DATA_DIR", "datasets"))
    ap.add_argument("--docs", type=int, default=61, help="UltraDomain documents to render")
    ap.add_argument("--max-words", type=int, default=0, help="cut each UltraDomain document (0: whole)")
    ap.add_argument("--passages", type=int, default=400, help="MuSiQue passages in the spreadsheets")
    ap.add_argument("--formats", default="pdf,pdf2,docx,pptx,xlsx,xls,ods,html,epub")
    ap.add_argument("--bad", action="store_true", help="also the encrypted and scanned PDFs")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    formats = set(args.formats.split(","))
    records = []
    for source in args.source or []:
        if source == "fixture":
            doc = fixture_doc(args.fixture)
            if "pdf" in formats:
                records.append(write_pdf(doc, args.out, "one-column", "A5"))
                records.append(write_pdf(doc, args.out, "one-column-core", "A5"))
            if "pdf2" in formats:
                records.append(write_pdf(doc, args.out, "two-column", "A5"))
            if "docx" in formats:
                records.append(write_docx(doc, args.out, paras_per_page=8))
            if "pptx" in formats:
                records.append(write_pptx(doc, args.out))
            if "html" in formats:
                records.append(write_html(doc, args.out, True))
                records.append(write_html(doc, args.out, False))
            if "epub" in formats:
                records.append(write_epub(doc, args.out))
            with open(args.fixture, encoding="utf-8") as f:
                data = json.load(f)
            sheets = sheet_rows([(p["title"], p["text"]) for p in data["passages"]], 16)
            for fmt, write in (("xlsx", write_xlsx), ("xls", write_xls), ("ods", write_ods)):
                if fmt in formats:
                    records.append(write(sheets, args.out, "guilds-passages", "kgrag-fixture"))
        elif source == "ultradomain":
            for doc in ultradomain_docs(args.data_dir, args.docs, args.max_words):
                if "pdf" in formats:
                    records.append(write_pdf(doc, args.out, "one-column"))
                if "pdf2" in formats:
                    records.append(write_pdf(doc, args.out, "two-column"))
                if "docx" in formats:
                    records.append(write_docx(doc, args.out))
                if "pptx" in formats:
                    records.append(write_pptx(doc, args.out))
                if "html" in formats:
                    records.append(write_html(doc, args.out, True))
                if "epub" in formats:
                    records.append(write_epub(doc, args.out))
                print(f"rendered {doc.name}", file=sys.stderr, flush=True)
        elif source == "musique":
            passages = musique_passages(args.data_dir, args.passages)
            sheets = sheet_rows(passages, 100)
            for fmt, write in (("xlsx", write_xlsx), ("xls", write_xls), ("ods", write_ods)):
                if fmt in formats:
                    records.append(write(sheets, args.out, "musique-passages", "musique-hipporag"))
            if "docx" in formats:
                sections = [(t, [("p", sentences(x))]) for t, x in passages[:120]]
                doc = Doc("musique-passages", "MuSiQue passages", sections, None, "musique-hipporag")
                records.append(write_docx(doc, args.out, paras_per_page=10))
    if args.bad:
        bad = write_bad(args.out)
        with open(os.path.join(args.out, "bad.json"), "w", encoding="utf-8") as f:
            json.dump(bad, f, indent=1)
            f.write("\n")
    save(args.out, records)
    print(f"{len(records)} files in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
