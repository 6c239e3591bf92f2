"""Markup: HTML tags and character entities stripped from alt-text, or the caption dropped.

Web alt-text is often harvested with its markup ("<b>Sunset</b> over the bay &amp; harbour",
"<p>Two kids</p><br/>playing", "Dog&nbsp;running"); to the later filters a tag is a run of unknown
characters that fails them. ``markup`` (a transform, first of the presets' text steps) removes it: tags,
comments and declarations go, the contents of script and style elements with them, entities are decoded
(``html.unescape``, as a browser decodes text), block tags leave a space ("Two kids playing") and inline
ones none ("<b>Sun</b>set" is "Sunset"), and whitespace runs close up to one space. Escaped markup
("&lt;b&gt;Dog&lt;/b&gt;", common in CMS exports) is stripped once more after decoding. ``mode`` "drop"
drops a caption with markup instead (reason ``markup``); one that is nothing but markup is dropped in
either mode (``markup_only``); one without markup goes on unchanged (``no_markup``).

Only real markup counts: an HTML or SVG element name (or a namespaced "o:p" or custom "my-card" one)
after "<", and entities the stdlib decodes. "3 < 5 apples", "a <3 heart", "AT&T" and the "<unk>" of
caption datasets are plain text, left for the later filters. A tag cut off at the end of a truncated
alt-text ("A dog <a href=\"http://ex") is markup too.

The output is not the raw text with spans removed (entities are decoded, whitespace closed up), so no
removed spans are noted: the review page shows a word diff. The decision depends on the text alone.
"""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from ..base import KEEP, Decision, drop
from ..registry import register
from .common import TextFilter

MAX_TAGS_LISTED = 5  # tag names listed in a decision's details

# Inline elements: removing them joins what surrounds them ("<b>Sun</b>set"); any other known tag
# separates words ("<p>Two kids</p><br/>playing").
INLINE = frozenset("a abbr b bdi bdo big cite code data del dfn em font i ins kbd mark nobr q s samp small "
                   "span strike strong sub sup time tt u var wbr".split())
KNOWN = INLINE | frozenset(
    "address area article aside audio base basefont blink blockquote body br button canvas caption center col "
    "colgroup dd details dialog dir div dl dt embed fieldset figcaption figure footer form frame frameset h1 h2 "
    "h3 h4 h5 h6 head header hgroup hr html iframe img input label legend li link main map marquee menu meta "
    "meter nav noscript object ol optgroup option output p param picture pre progress rp rt ruby script "
    "section select slot source style summary table tbody td template textarea tfoot th thead title tr track "
    "ul video svg path g rect circle ellipse line polyline polygon use defs symbol math".split())
HIDDEN = frozenset({"script", "style"})  # their contents are code, never caption text
# A tag cut off by a truncated alt-text, no ">" up to the end: "</name" or "<name attributes" (a bare
# "<b" at the end may be "a<b").
_TRUNCATED_RE = re.compile(r"<(?:/([A-Za-z][\w:-]*)\s*|([A-Za-z][\w:-]*)\s[^<>]*)$")
# What html.unescape decodes (its own pattern): counted, to tell text with entities from plain text.
_ENTITY_RE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")


def _is_markup(name: str) -> bool:
    return name in KNOWN or ":" in name or "-" in name


class _Stripper(HTMLParser):
    """Collects the text of a document and the names of the markup it removed."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.source = text
        self.out: list[str] = []
        self.tags: list[str] = []  # in order, repeats included
        self._line_starts: list[int] | None = None

    def _tag(self, name: str) -> None:
        self.tags.append(name)
        if name not in INLINE:
            self.out.append(" ")

    def handle_starttag(self, tag, attrs):
        if _is_markup(tag):
            self._tag(tag)
        else:
            self.out.append(self.get_starttag_text())

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)  # "<br/>": no end tag follows, no script content either

    def handle_endtag(self, tag):
        if _is_markup(tag):
            self._tag(tag)
        else:  # "</unk>": its source, from where it starts to its ">"
            if self._line_starts is None:  # getpos() counts lines; the source is one string
                self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.source)]
            line, column = self.getpos()
            start = self._line_starts[line - 1] + column
            end = self.source.find(">", start)
            self.out.append(self.source[start:end + 1 if end >= 0 else len(self.source)])

    def handle_data(self, data):
        if self.cdata_elem not in HIDDEN:
            self.out.append(data)

    def handle_comment(self, data):
        self.tags.append("comment")

    def handle_decl(self, decl):
        self.tags.append("declaration")

    handle_pi = unknown_decl = handle_decl


def _strip_once(text: str) -> tuple[str, list[str], int]:
    """(text without markup, names of the markup removed, entities decoded); the text is ``text`` itself
    when it has no markup."""
    tags: list[str] = []
    body = text
    cut = _TRUNCATED_RE.search(text) if "<" in text else None
    name = (cut.group(1) or cut.group(2)).lower() if cut else ""
    if cut and _is_markup(name):
        body, tags = text[:cut.start()], [name]
    entities = sum(1 for m in _ENTITY_RE.finditer(body) if html.unescape(m.group()) != m.group()) if "&" in body else 0
    if "<" in body:
        parser = _Stripper(body)
        parser.feed(body)
        parser.close()
        tags = parser.tags + tags
        if tags or entities:
            body = "".join(parser.out)
    elif entities:
        body = html.unescape(body)
    if not tags and not entities:
        return text, [], 0
    return " ".join(body.split()), tags, entities


def strip_markup(text: str) -> tuple[str, list[str], int]:
    """(the text without markup, whitespace closed up; the names of the markup removed, in order; the
    number of entities decoded). A text without markup comes back as it is, with ([], 0)."""
    if "<" not in text and "&" not in text:
        return text, [], 0
    cleaned, tags, entities = _strip_once(text)
    if (tags or entities) and "<" in cleaned:  # escaped markup, decoded by the first pass
        cleaned, more, decoded = _strip_once(cleaned)
        tags, entities = tags + more, entities + decoded
    return cleaned, tags, entities


@register
class MarkupFilter(TextFilter):
    name = "markup"
    label = "HTML markup"
    description = ("HTML tags and entities in alt-text (\"<b>Sunset</b> over the bay &amp; harbour\"): mode "
                   "\"strip\" (default) removes tags, script and style contents, decodes entities and keeps the "
                   "cleaned text; mode \"drop\" drops the caption. A caption that is only markup is dropped. "
                   "\"3 < 5\" and \"<3\" are not markup.")
    is_transform = True
    defaults = {"mode": "strip"}

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        if self.params["mode"] not in ("strip", "drop"):
            raise ValueError(f"markup: mode must be 'strip' or 'drop', not {self.params['mode']!r}")

    def decide(self, item):
        text = item.text
        cleaned, tags, entities = strip_markup(text)
        if not tags and not entities:
            return Decision(KEEP, "no_markup")
        details = {"tags": list(dict.fromkeys(tags))[:MAX_TAGS_LISTED], "entities": entities}
        if not cleaned:
            return drop("markup_only", **details)
        if self.params["mode"] == "drop":
            return drop("markup", **details)
        return Decision(KEEP, "markup_stripped", details=details, text=cleaned)
