"""The ``source_text`` filter: the DOM text of a rendered source equals the stored text."""

from __future__ import annotations

import html
import re

import pytest
from django.template import Context, Template

from labeling.templatetags.certlabel import source_text


def dom_text(markup: str) -> str:
    """What an HTML parser makes of character data in an element (WHATWG HTML, sections
    13.2.3.5 and 13.2.5): newlines are normalised first (CRLF and a lone CR become LF), then
    character references are decoded."""
    normalised = markup.replace("\r\n", "\n").replace("\r", "\n")
    assert "<" not in normalised, "the text must be a single text node"
    return html.unescape(normalised)


@pytest.mark.parametrize(
    "text",
    [
        "Line one.\r\nLine two.\r\n",
        "\r\nstarts with CRLF, has a lone\rCR and a lone\nLF",
        "Cafe\u0301 \U0001f44d\U0001f3fd \U0001f1e6\U0001f1fa <b>bold</b> & \"quotes\" 'apos'",
        "&#13; is literal here, and so is &amp;",
        "\n\nleading newlines survive (no <pre>)",
    ],
)
def test_dom_text_equals_the_stored_text(text):
    rendered = str(source_text(text))

    assert "\r" not in rendered
    assert dom_text(rendered) == text


def test_carriage_returns_become_character_references_and_markup_is_escaped():
    rendered = str(source_text("a\r\nb <i>c</i>\rd"))

    assert rendered == "a&#13;\nb &lt;i&gt;c&lt;/i&gt;&#13;d"


def test_the_filter_is_applied_in_a_template_without_double_escaping():
    template = Template('{% load certlabel %}<div class="source-text">{{ text|source_text }}</div>')

    rendered = template.render(Context({"text": "x & y\r\nz"}))

    assert rendered == '<div class="source-text">x &amp; y&#13;\nz</div>'


def test_utf16_offsets_of_the_dom_text_match_the_stored_text():
    # a browser counts the offsets of a selection in UTF-16 units of the DOM text
    text = "\U0001f44d\U0001f3fd caf\u0065\u0301\r\nThe bridge opened in 1932."
    rendered = str(source_text(text))
    dom = dom_text(rendered)

    start = len(dom[: dom.index("The bridge")].encode("utf-16-le")) // 2

    # each emoji is two UTF-16 units; CR and LF count one each, as in the stored text
    assert start == len(text[: text.index("The bridge")].encode("utf-16-le")) // 2
    assert re.search("&#13;\nThe bridge", rendered)
