"""Markdown for text people write in the product (a label policy's guideline), made safe to show.

The text is rendered with Python-Markdown (tables, fenced code, definition lists) and the HTML
is then sanitised with nh3 (an allow-list: no script, style, event attributes or ``javascript:``
URLs; links get ``rel="noopener noreferrer"``). Raw HTML in the source is escaped by nh3, not
trusted. The result is safe to insert into a page as is.
"""

from __future__ import annotations

import re

import markdown as md
import nh3
from django.utils.safestring import SafeString, mark_safe

# What a guideline may contain once rendered: text structure, tables, code and links. No
# images: a guideline is read on every labelling page, and an image from elsewhere would be a
# request to another site (which the pages' security policy refuses anyway).
ALLOWED_TAGS = frozenset(
    {
        "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "mark", "ol", "p",
        "pre", "s", "span", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr",
        "u", "ul",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "td": {"align"},
    "th": {"align"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
EXTENSIONS = ["tables", "fenced_code", "def_list", "sane_lists"]
HEADING = re.compile(r"<(/?)h([1-6])>")


def markdown_html(text: str, *, heading_offset: int = 0) -> SafeString:
    """Return ``text`` (Markdown) as sanitised HTML, safe to insert into a page.

    Args:
        text: Markdown source, any length; an empty string gives an empty result.
        heading_offset: levels added to every heading (at most h6), so that a text shown
            inside a page section keeps the page's outline: with 2, ``# Title`` becomes
            ``<h3>``.

    Returns:
        HTML marked safe for Django templates; every tag and attribute outside the allow-list
        above is removed (its text kept), images included, and URLs other than http, https
        and mailto dropped.
    """
    if not text.strip():
        return mark_safe("")  # noqa: S308 - empty
    html = md.markdown(text, extensions=EXTENSIONS, output_format="html")
    clean = nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(attrs) for tag, attrs in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer",
    )
    if heading_offset:
        clean = HEADING.sub(
            lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + heading_offset)}>", clean
        )
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above
