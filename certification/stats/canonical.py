"""Canonicalisers: map a sampled answer to the canonical class it is counted under.

Self-consistency counts answers by class, so "42", "42.0", "$42" and " 42 " must land in one class
and "Paris" / "paris." in another; which forms are merged is a declared part of the calibration
spec, and calibration and test must use the same canonicaliser. A
canonicaliser is any ``Callable[[str], str]``; the registry maps the names a spec stores to them.

Built-in canonicalisers:

- ``"exact"``: the answer unchanged (no merging at all).
- ``"text"``: Unicode NFKC, case-folded, punctuation removed (except inside numbers and a leading
  minus), whitespace collapsed — the SQuAD answer normalisation (Rajpurkar et al. 2016,
  ``evaluate-v1.1.py`` ``normalize_answer``) without its English-specific article removal and
  without merging "42.0" into "420".
- ``"numeric"``: a number written as "42", "42.0", "+42", "$42", "42,000", "4.2e1", "1/2" or "50%"
  is replaced by its exact canonical value (via :class:`fractions.Fraction`, so no float rounding
  can merge different numbers); anything else falls back to ``"text"``.

Source: Mouzouni (2026), arXiv:2602.21368, pipeline step 2 ("Answers are mapped to canonical forms
(e.g., "42", "42.0" -> 42)").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from fractions import Fraction

from certification.stats.errors import StatsError

__all__ = [
    "Canonicaliser",
    "canonical_number",
    "canonicaliser_names",
    "exact",
    "get_canonicaliser",
    "numeric",
    "parse_number",
    "register_canonicaliser",
    "text",
]

Canonicaliser = Callable[[str], str]

# Currency symbols that precede or follow a number in answer text (GSM8K writes "$42").
_CURRENCY = "$€£¥₹"
# Minus-like characters NFKC leaves alone; they all mean "-" in an answer.
_MINUS = {"\u2212": "-", "\u2012": "-", "\u2013": "-", "\ufe63": "-", "\uff0d": "-"}
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d*)?")
_DECIMAL = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,2})?")
# Longer strings are not read as numbers: exact arithmetic on "1e999999999" or a 10,000-digit
# string would be a denial of service, and no answer key writes numbers that long.
_MAX_NUMBER_CHARS = 100
_FRACTION = re.compile(r"(\d+)/(\d+)")
_SPACE = re.compile(r"\s+")


def _require_str(answer: object) -> str:
    if not isinstance(answer, str):
        raise StatsError(f"answer must be a string, got {type(answer).__name__}")
    return answer


def exact(answer: str) -> str:
    """Return the answer unchanged (every distinct string is its own class).

    Raises:
        StatsError: if ``answer`` is not a string.
    """
    return _require_str(answer)


def text(answer: str) -> str:
    """Normalise case, whitespace and punctuation: NFKC, casefold, drop punctuation, squeeze spaces.

    Punctuation is every character of a Unicode ``P*`` category ("Paris." -> "paris",
    "U.S.A." -> "usa"), except between two digits ("42.0", "1,5", "1/2" keep theirs, so "42.0" and
    "420" stay apart) and a dash used as a minus sign (before a digit and not inside a word: "-3",
    "(-3)" -> "-3", "x=-3", "1e-5"; punctuation dropped before such a sign becomes a space).
    Symbols (``S*``, e.g. "$", "+") are kept, so "1+1" and "11" stay apart. The result is a
    fixed point: canonicalising it again changes nothing. "" is a class (nothing but punctuation
    and space remained).

    Raises:
        StatsError: if ``answer`` is not a string.

    Source: SQuAD v1.1 ``normalize_answer`` (Rajpurkar et al. 2016) minus article removal.
    """
    # NFKC again after casefolding: a folded string need not be NFKC-normal, and the result
    # must be a fixed point (canonicalising twice changes nothing).
    folded = unicodedata.normalize(
        "NFKC", unicodedata.normalize("NFKC", _require_str(answer)).casefold()
    )
    kept = "".join(
        ch if _keep(folded, i) else (" " if _before_sign(folded, i) else "")
        for i, ch in enumerate(folded)
    )
    return _SPACE.sub(" ", kept).strip()


def _is_sign(folded: str, i: int) -> bool:
    """A dash before a digit that is not inside a word ("-3", "(-3)", "x=-3", "1e-5")."""
    if unicodedata.category(folded[i]) != "Pd" or i + 1 >= len(folded):
        return False
    if not folded[i + 1].isdigit():
        return False
    before = folded[i - 1] if i else ""
    if before in ("e", "E") and i >= 2 and folded[i - 2].isdigit():
        return True  # an exponent: "1e-5" must not become "1e5"
    return not before.isalnum()


def _before_sign(folded: str, i: int) -> bool:
    """Dropped punctuation right before a sign becomes a space, keeping the sign a sign."""
    return i + 1 < len(folded) and _is_sign(folded, i + 1)


def _keep(folded: str, i: int) -> bool:
    ch = folded[i]
    if not unicodedata.category(ch).startswith("P"):
        return True
    before = folded[i - 1] if i else ""
    after = folded[i + 1] if i + 1 < len(folded) else ""
    # Inside a number ("42.0", "1,5", "1/2", "3:45") punctuation carries meaning: dropping it
    # would merge "42.0" with "420".
    if before.isdigit() and after.isdigit():
        return True
    # A minus that is not inside a word ("-3", "(-3)", "x=-3", "1e-5") is a sign, not
    # punctuation; "covid-19" loses its dash. Punctuation dropped right before a sign becomes a
    # space (text()), so a second pass still sees a sign: the result is a fixed point.
    return _is_sign(folded, i)


def parse_number(answer: str) -> Fraction | None:
    """Parse a number written in a common answer form, exactly; None if it is not one.

    Accepted, after NFKC and trimming: an optional sign ("+", "-" or a Unicode minus), an optional
    currency symbol ($ € £ ¥ ₹) before or after the sign, digits with optional comma thousands
    separators in groups of three ("42,000"; "1,5" is *not* a number, it is ambiguous), an
    optional decimal part and exponent of at most two digits ("4.2e1"), or a fraction "p/q" with
    q > 0, at most 100 characters in all; then an optional trailing currency symbol, "%" (dropped:
    answer keys state the number without the sign) and a final full stop ("42."). The value is a
    :class:`~fractions.Fraction`.

    Raises:
        StatsError: if ``answer`` is not a string.
    """
    value = unicodedata.normalize("NFKC", _require_str(answer)).strip()
    for dash, minus in _MINUS.items():
        value = value.replace(dash, minus)
    if value.endswith(".") and not value.endswith(".."):
        value = value[:-1]
    value = value.removesuffix("%").strip()
    sign = 1
    value = value.lstrip(_CURRENCY).strip()
    if value and value[0] in "+-":
        sign = -1 if value[0] == "-" else 1
        value = value[1:].strip().lstrip(_CURRENCY).strip()
    value = value.rstrip(_CURRENCY).strip()
    if not value or len(value) > _MAX_NUMBER_CHARS:
        return None
    if _GROUPED.fullmatch(value):
        value = value.replace(",", "")
    if _DECIMAL.fullmatch(value):
        return sign * Fraction(value)
    fraction = _FRACTION.fullmatch(value)
    if fraction and int(fraction.group(2)) != 0:
        return sign * Fraction(int(fraction.group(1)), int(fraction.group(2)))
    return None


def canonical_number(value: Fraction) -> str:
    """Write an exact number in one canonical form.

    Integers as plain digits ("42", "0", never "-0"); terminating decimals without trailing zeros
    ("0.5", "-2.75"); other fractions as reduced "p/q" ("1/3"), so no rounding merges numbers.
    """
    if value.denominator == 1:
        return str(value.numerator)
    denominator, twos, fives = value.denominator, 0, 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    scaled = abs(value) * 10**places  # an integer: the denominator divides 10**places
    digits = str(int(scaled)).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def numeric(answer: str) -> str:
    """Canonicalise numbers exactly ("42", "42.0", "$42" -> "42"; "42,000" -> "42000").

    :func:`canonical_number` of :func:`parse_number` when the answer, or its :func:`text` form,
    is a number ("(42.0)" -> "42"); else the :func:`text` form (so "Forty-two" stays a class of
    its own, "fortytwo"). Applying it twice changes nothing.

    Raises:
        StatsError: if ``answer`` is not a string.
    """
    value = parse_number(answer)
    if value is None:
        folded = text(answer)
        value = parse_number(folded)
        if value is None:
            return folded
    return canonical_number(value)


_REGISTRY: dict[str, Canonicaliser] = {"exact": exact, "text": text, "numeric": numeric}


def register_canonicaliser(name: str, function: Canonicaliser, *, replace: bool = False) -> None:
    """Add a canonicaliser under ``name`` so a spec can refer to it.

    ``function`` must be deterministic, since calibration and test must canonicalise
    identically; ``replace`` allows reusing a name (off by default: a stored spec's name must
    keep its meaning).

    Raises:
        StatsError: if the name is empty or taken (without ``replace``), or ``function`` is not
            callable.
    """
    if not name or not isinstance(name, str):
        raise StatsError("name must be a non-empty string")
    if not callable(function):
        raise StatsError(f"function must be callable, got {function!r}")
    if name in _REGISTRY and not replace:
        raise StatsError(f"canonicaliser {name!r} is already registered")
    _REGISTRY[name] = function


def get_canonicaliser(name: str) -> Canonicaliser:
    """Return the canonicaliser registered as ``name``.

    Raises:
        StatsError: if no canonicaliser has that name (the message lists the known names).
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise StatsError(
            f"unknown canonicaliser {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def canonicaliser_names() -> tuple[str, ...]:
    """Return the registered names, sorted."""
    return tuple(sorted(_REGISTRY))
