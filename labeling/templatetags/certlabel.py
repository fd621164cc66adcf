"""Template filters of the labelling pages.

``source_text`` renders a stored text so that the browser's DOM text equals it exactly, which
the evidence offsets depend on (a browser counts a selection's offsets in the DOM text).
"""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter(is_safe=True)
def source_text(value: object) -> SafeString:
    """Escape ``value`` and write every carriage return as the reference ``&#13;``.

    The HTML parser turns CRLF and a lone CR into LF before it builds the DOM, so a raw CR would
    vanish and every offset after it would shift by one. A character reference is decoded after
    that normalisation and survives. Render the result as the only content of an element with
    ``white-space: pre-wrap`` (not ``<pre>``, whose first newline the parser drops), so the
    element holds a single text node equal to the stored text.

    NUL (U+0000) cannot be carried by HTML at all; stored texts never contain it (PostgreSQL
    refuses it in text columns).
    """
    return mark_safe(escape(str(value)).replace("\r", "&#13;"))  # noqa: S308 — escaped above


@register.filter
def lookup(mapping: object, key: object) -> object:
    """Return ``mapping[key]``, trying ``int(key)`` too (form values are strings); "" if absent."""
    if not isinstance(mapping, dict):
        return ""
    if key in mapping:
        return mapping[key]
    try:
        return mapping.get(int(str(key)), "")
    except ValueError:
        return ""


@register.filter
def label_text(value: object, texts: object) -> str:
    """Render a label or reason token as the policy's display text (``texts``: token → text).

    A token ``texts`` does not name is rendered as words (``not_supported`` → "not supported").
    """
    if isinstance(texts, dict) and value in texts:
        return str(texts[value])
    return words_filter(value)


@register.filter(name="markdown")
def markdown_filter(value: object, heading_offset: int = 0) -> SafeString:
    """Render ``value`` (Markdown, e.g. a policy's guideline) as sanitised HTML.

    ``{{ text|markdown:2 }}`` shifts its headings two levels down (``#`` becomes ``<h3>``), for
    a text shown inside a section of a page.
    """
    from labeling.markdown import markdown_html

    return markdown_html(str(value or ""), heading_offset=int(heading_offset))


@register.filter(name="words")
def words_filter(value: object) -> str:
    """Render a label or reason token as words (``not_found`` → "not found")."""
    from labeling.views.problems import label_words

    return label_words(str(value or ""))
