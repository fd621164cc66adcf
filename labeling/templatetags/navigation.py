"""Template tags of the site navigation (``templates/base.html``).

``{% aria_current 'release-list' 'release-*' %}`` marks the link of the page being shown: it
renders ``aria-current="page"`` when the current URL's name is the first name given (the link's
own page), ``aria-current="true"`` when it matches one of the others (a page of the link's
section; a trailing ``*`` matches every URL name with that prefix), and nothing otherwise.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


def _matches(name: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


@register.simple_tag(takes_context=True)
def aria_current(context: template.Context, page: str, *section: str) -> SafeString:
    """Return the ``aria-current`` attribute (with its leading space) of a navigation link.

    Args:
        context: the template context; its ``request`` (absent on the 500 page) gives the
            current URL name.
        page: the URL name of the link's own page.
        *section: further URL names (or ``prefix*`` patterns) of the link's section.

    Returns:
        ``' aria-current="page"'``, ``' aria-current="true"'`` or ``""``.
    """
    request: Any = context.get("request")
    match = getattr(request, "resolver_match", None)
    name = getattr(match, "url_name", None)
    if not name:
        return mark_safe("")
    if name == page:
        return mark_safe(' aria-current="page"')
    if any(_matches(name, pattern) for pattern in section):
        return mark_safe(' aria-current="true"')
    return mark_safe("")
