#!/usr/bin/env python3
"""Extract the training corpus from the LibreOffice help pages.

Standard library only.  Usage:

    python3 extract.py HELP_ROOT [OUT_DIR]

HELP_ROOT is the directory holding ``en-US/`` and ``eu/`` (after
``dpkg -x``: ``<dir>/usr/share/libreoffice/help``).  OUT_DIR defaults to the
directory of this script.  Writes ``train.en.txt``, ``train.eu.txt``,
``valid.en.txt`` and ``valid.eu.txt`` and prints a statistics table.

The rules are described in PROVENANCE.md; the constants below are the
authoritative values.  Output depends only on the input pages, never on
the file system's listing order, the locale or the clock.
"""

import hashlib
import html.parser
import os
import re
import sys
import unicodedata

LANGS = (("en", "en-US"), ("eu", "eu"))

# A line that occurs on more than this many pages of one language is
# navigation / boilerplate ("To access this command...", "Related Topics", ...).
BOILERPLATE_MIN_PAGES = 51

# Validation: page in validation iff sha256(relpath) % VALID_MOD == 0 and the
# page exists (and has text) in both languages.
VALID_MOD = 20

# Basque training subset: a non-validation Basque page is kept iff
# (sha256(relpath) >> 128) % EU_TRAIN_MOD < EU_TRAIN_KEEP.  The high 128 bits
# are independent of the low bits used by the validation rule.
EU_TRAIN_MOD = 1000
EU_TRAIN_KEEP = 92

# Content lives in <div id="DisplayArea"> ... up to these markers.
CONTENT_START_ID = "DisplayArea"
CONTENT_END_IDS = {"SearchFrame", "DonationFrame"}

BLOCK_TAGS = {
    "p", "div", "h", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol",
    "td", "th", "tr", "table", "thead", "tbody", "br", "dl", "dt", "dd",
    "blockquote", "section", "article", "header", "footer", "nav", "aside",
    "title", "hr",
}
VOID_TAGS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link",
    "meta", "param", "source", "track", "wbr",
}
# Whole subtrees dropped: scripts, styles, code listings (<pre>).
SKIP_TAGS = {"script", "style", "noscript", "pre", "template", "svg", "button"}

WS_RE = re.compile(r"[ \t\n\r\f\v\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
# Invisible format characters that carry no text (zero-width spaces/joiners,
# soft hyphen, BOM, variation selectors).
INVISIBLE_RE = re.compile(r"[\u00ad\u200b-\u200d\u2060\ufeff\ufe00-\ufe0f]")


def path_hash(relpath):
    return int(hashlib.sha256(relpath.encode("utf-8")).hexdigest(), 16)


class HelpPageParser(html.parser.HTMLParser):
    """Collects the visible text of the content area of one help page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.in_content = False
        self.done = False
        self.skip_depth = 0  # >0 while inside a dropped subtree
        self.parts = []

    def _newline(self):
        self.parts.append("\n")

    def handle_starttag(self, tag, attrs):
        self._start(tag, dict(attrs), tag in VOID_TAGS)

    def handle_startendtag(self, tag, attrs):
        self._start(tag, dict(attrs), True)

    def _start(self, tag, attrs, void):
        if self.done:
            return
        elem_id = attrs.get("id") or ""
        if not self.in_content:
            if elem_id == CONTENT_START_ID:
                self.in_content = True
            return
        if elem_id in CONTENT_END_IDS or tag == "footer":
            self.in_content = False
            self.done = True
            return
        if self.skip_depth:
            if not void:
                self.skip_depth += 1
            return
        # Platform/module switches: every variant is a hidden <span>; the
        # "default…" one is what a Linux/Windows reader sees.  Drop the
        # others (MAC…, WIN…, UNIX…, WRITER…, CALC…, ...).
        hidden_variant = "hidden" in attrs and not elem_id.startswith("default")
        if (tag in SKIP_TAGS or hidden_variant) and not void:
            self.skip_depth = 1
            return
        if tag in BLOCK_TAGS:
            self._newline()

    def handle_endtag(self, tag):
        if self.done or not self.in_content or tag in VOID_TAGS:
            return
        if self.skip_depth:
            self.skip_depth -= 1
            return
        if tag in BLOCK_TAGS:
            self._newline()

    def handle_data(self, data):
        if self.in_content and not self.done and not self.skip_depth:
            self.parts.append(data)


def page_lines(path):
    with open(path, "r", encoding="utf-8") as f:
        src = f.read()
    parser = HelpPageParser()
    parser.feed(src)
    parser.close()
    text = "".join(parser.parts)
    lines = []
    for raw in text.split("\n"):
        line = INVISIBLE_RE.sub("", raw)
        line = WS_RE.sub(" ", line).strip()
        line = unicodedata.normalize("NFC", line)
        if line:
            lines.append(line)
    return lines


def has_letter(line):
    return any(unicodedata.category(c).startswith("L") for c in line)


def load_language(lang_dir):
    """Returns {relpath: [lines]} for every text/**/*.html page."""
    pages = {}
    text_root = os.path.join(lang_dir, "text")
    for dirpath, _dirnames, filenames in os.walk(text_root):
        for name in filenames:
            if not name.endswith(".html"):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, lang_dir).replace(os.sep, "/")
            pages[rel] = page_lines(full)
    return pages


def clean_language(pages):
    """Drops boilerplate and letterless lines; returns ({rel: [lines]}, dropped)."""
    page_count = {}
    for lines in pages.values():
        for line in set(lines):
            page_count[line] = page_count.get(line, 0) + 1
    boiler = {l for l, n in page_count.items() if n >= BOILERPLATE_MIN_PAGES}
    out = {}
    for rel in sorted(pages):
        kept = [l for l in pages[rel] if l not in boiler and has_letter(l)]
        if kept:
            out[rel] = kept
    return out, sorted(boiler, key=lambda l: (-page_count[l], l))


def write_pages(path, rels, pages):
    chunks = ["\n".join(pages[r]) + "\n" for r in rels]
    data = "\n".join(chunks).encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    return data


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    help_root = argv[1]
    out_dir = argv[2] if len(argv) == 3 else os.path.dirname(os.path.abspath(__file__))

    cleaned = {}
    for code, dirname in LANGS:
        lang_dir = os.path.join(help_root, dirname)
        if not os.path.isdir(os.path.join(lang_dir, "text")):
            sys.exit(f"extract.py: no {lang_dir}/text directory")
        pages, boiler = clean_language(load_language(lang_dir))
        cleaned[code] = pages
        print(f"# {code}: {len(pages)} pages with text; "
              f"{len(boiler)} boilerplate lines dropped, most frequent:")
        for line in boiler[:8]:
            print(f"#   {line!r}")

    en, eu = cleaned["en"], cleaned["eu"]
    common = set(en) & set(eu)
    valid = sorted(r for r in common if path_hash(r) % VALID_MOD == 0)
    valid_set = set(valid)
    en_train = sorted(r for r in en if r not in valid_set)
    eu_train = sorted(
        r for r in eu
        if r not in valid_set
        and (path_hash(r) >> 128) % EU_TRAIN_MOD < EU_TRAIN_KEEP
    )

    outputs = [
        ("train.en.txt", en_train, en),
        ("train.eu.txt", eu_train, eu),
        ("valid.en.txt", valid, en),
        ("valid.eu.txt", valid, eu),
    ]
    sizes = {}
    print("| file | bytes | lines | pages | sha256 |")
    print("|---|---:|---:|---:|---|")
    for name, rels, pages in outputs:
        data = write_pages(os.path.join(out_dir, name), rels, pages)
        sizes[name] = len(data)
        nlines = data.count(b"\n")
        print(f"| `{name}` | {len(data)} | {nlines} | {len(rels)} "
              f"| `{hashlib.sha256(data).hexdigest()}` |")
    tr_en, tr_eu = sizes["train.en.txt"], sizes["train.eu.txt"]
    total = sum(sizes.values())
    print(f"# training bytes: en {tr_en} ({100 * tr_en / (tr_en + tr_eu):.2f} %), "
          f"eu {tr_eu} ({100 * tr_eu / (tr_en + tr_eu):.2f} %); all four files {total} bytes")
    if total > 5_000_000:
        sys.exit(f"extract.py: total {total} bytes exceeds the 5 MB budget")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
