"""Safe Markdown for text that curators write and annotators read (campaign instructions,
training feedback).

Two layers, so that one mistake is not enough: markdown-it-py renders with raw HTML disabled
(the "js-default" preset: an HTML tag in the source comes out as escaped text, and
``javascript:``/``vbscript:``/``file:``/``data:`` links are not made into links), then nh3 (ammonia)
keeps only a short list of tags and attributes and drops every link address that is not an
absolute http, https or mailto URL. The result is marked safe only after both steps.

Images load only from the platform itself (a root-relative path such as ``/media/images/12/file``,
or PUBLIC_BASE_URL's origin): an image from another host would tell that host which annotator opened
the instructions and when. Such an image becomes a link the annotator may follow; the page's
Content-Security-Policy (img-src) refuses it as well.
"""
from __future__ import annotations

from urllib.parse import urlsplit

import nh3
from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

MAX_CHARS = 50_000  # the instructions' own limit (services.check_settings)

TAGS = {
    "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "img", "table", "thead", "tbody", "tr", "th", "td",
}
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "ol": {"start"},
              "th": {"style"}, "td": {"style"}}
LINK_SCHEMES = {"http", "https", "mailto"}

_md = MarkdownIt("js-default", {"html": False, "linkify": False, "typographer": False}).enable("table")


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def _own_image(src: str) -> bool:
    src = src.strip()
    if src.startswith("/") and not src.startswith("//") and "\\" not in src:
        return True
    base = settings.PUBLIC_BASE_URL
    try:
        return bool(base) and _origin(src) == _origin(base)
    except ValueError:
        return False


def _render_image(self, tokens, idx, options, env):
    """An image from another host is shown as a link to it, never loaded."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    if _own_image(src):
        return self.image(tokens, idx, options, env)
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    return f'<a href="{escape(src)}">{escape(alt)}</a> (external image, not shown)'


_md.add_render_rule("image", _render_image)


def _allowed_url(value: str, schemes: set[str]) -> bool:
    try:
        scheme = urlsplit(value.strip()).scheme.lower()
    except ValueError:
        return False
    return scheme in schemes


def _attribute_filter(tag: str, attribute: str, value: str):
    """nh3 calls this for every kept attribute; returning None drops it. Relative and other-scheme
    addresses go (a link without href is plain text)."""
    if attribute == "href":
        return value if _allowed_url(value, LINK_SCHEMES) else None
    if attribute == "src":
        return value if _own_image(value) else None
    if attribute == "style":  # markdown-it writes text-align on table cells; nothing else passes
        return value if value.replace(" ", "") in ("text-align:left", "text-align:right", "text-align:center") else None
    return value


def render_markdown(text: str | None) -> SafeString:
    """HTML for a Markdown text, safe to put in a page as is."""
    if not text:
        return mark_safe("")
    html = _md.render(str(text)[:MAX_CHARS])
    clean = nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        attribute_filter=_attribute_filter,
        url_schemes=LINK_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return mark_safe(clean)  # noqa: S308 - sanitised just above


__all__ = ["render_markdown"]
