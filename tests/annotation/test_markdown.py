"""Safe Markdown (annotation.markdown.render_markdown): Markdown renders, raw HTML is text, links
keep only http, https and mailto addresses, images load only from the platform's own origin."""
from django.utils.safestring import SafeString

from annotation.markdown import render_markdown


def test_markdown_renders_and_is_marked_safe():
    html = render_markdown("# Title\n\n**bold** and *em*\n\n- one\n- two\n\n`code`")
    assert isinstance(html, SafeString)
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<em>em</em>" in html
    assert "<li>one</li>" in html and "<code>code</code>" in html


def test_raw_html_is_shown_as_text():
    html = render_markdown('Hi <script>alert(1)</script> <img src=x onerror="alert(2)"> <b onclick="x()">b</b>')
    assert "<script" not in html and "<img" not in html and "<b " not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "onerror" not in html.replace("onerror=&quot;", "") or "&lt;img" in html


def test_links_keep_only_http_https_and_mailto():
    html = render_markdown("[a](https://example.org/x) [b](http://example.org) [c](mailto:c@example.org) "
                           "[d](javascript:alert(1)) [e](JaVaScRiPt:alert(1)) [f](data:text/html,hi) "
                           "[g](vbscript:msgbox) [h](/relative/path) [i](ftp://example.org)")
    assert 'href="https://example.org/x"' in html and 'href="http://example.org"' in html
    assert 'href="mailto:c@example.org"' in html
    hrefs = [part.split('"')[1] for part in html.split("href=")[1:]]
    assert hrefs == ["https://example.org/x", "http://example.org", "mailto:c@example.org"]
    assert 'rel="noopener noreferrer nofollow"' in html


def test_images_load_only_from_the_platform_and_others_become_links(settings):
    settings.PUBLIC_BASE_URL = "https://captions.example.edu"
    html = render_markdown("![ok](/media/images/3/file) ![own](https://captions.example.edu/media/images/4/file) "
                           "![pixel](https://tracker.example.org/p.gif) ![proto](//tracker.example.org/p.gif) "
                           "![no](data:image/png;base64,AAAA) ![rel](a.png)")
    assert '<img src="/media/images/3/file" alt="ok">' in html
    assert '<img src="https://captions.example.edu/media/images/4/file" alt="own">' in html
    assert html.count("<img") == 2 and "tracker.example.org/p.gif\" alt" not in html
    assert '<a href="https://tracker.example.org/p.gif" rel="noopener noreferrer nofollow">pixel</a>' in html
    assert "data:" not in html and 'src="a.png"' not in html


def test_empty_and_none_give_empty_safe_strings():
    assert render_markdown("") == "" and render_markdown(None) == ""
    assert isinstance(render_markdown(None), SafeString)


def test_tables_keep_only_alignment_styles():
    html = render_markdown("| a | b |\n|:--|--:|\n| 1 | 2 |")
    assert '<th style="text-align:left">a</th>' in html and '<td style="text-align:right">2</td>' in html
