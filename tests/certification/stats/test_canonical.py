"""Canonicalisers: numeric and text forms, and the registry."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certification.stats import canonical
from certification.stats.canonical import (
    canonical_number,
    canonicaliser_names,
    get_canonicaliser,
    numeric,
    parse_number,
    register_canonicaliser,
    text,
)
from certification.stats.errors import StatsError


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("42", "42"),
        ("42.0", "42"),
        ("$42", "42"),
        ("42,000", "42000"),
        (" 42 ", "42"),
        ("+42", "42"),
        ("42.", "42"),
        ("42.00", "42"),
        ("$42.50", "42.5"),
        ("-$3.50", "-3.5"),
        ("$-3.50", "-3.5"),
        ("\u221242", "-42"),
        ("1,234,567.890", "1234567.89"),
        ("4.2e1", "42"),
        ("1/2", "0.5"),
        ("2/6", "1/3"),
        ("50%", "50"),
        ("-0", "0"),
        (".5", "0.5"),
        ("\uff14\uff12", "42"),  # full-width digits
        ("(42.0)", "42"),  # a number once punctuation is dropped
    ],
)
def test_numeric_forms(answer, expected):
    assert numeric(answer) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Forty-two", "fortytwo"),
        ("1,5", "1,5"),  # ambiguous separator: not a number, and not merged with 15
        ("1/0", "1/0"),
        ("", ""),
        ("1e999999999", "1e999999999"),  # exact arithmetic on this would never finish
        ("9" * 101, "9" * 101),
    ],
)
def test_numeric_falls_back_to_text(answer, expected):
    assert parse_number(answer) is None
    assert numeric(answer) == expected


def test_numbers_are_exact_not_rounded():
    assert numeric("0.1") != numeric("0.10000000000000001")
    assert numeric("1/3") != numeric("0.3333333333333333")
    assert parse_number("0.1") == Fraction(1, 10)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Paris.", "paris"),
        ("  PARIS  ", "paris"),
        ("The   Eiffel\tTower!", "the eiffel tower"),
        ("U.S.A.", "usa"),
        ("42.0", "42.0"),  # punctuation inside a number stays: "42.0" is not "420"
        ("-3", "-3"),
        ("covid-19", "covid19"),
        ("Straße", "strasse"),  # casefold, not lower
        ("ﬁne", "fine"),  # NFKC ligature
    ],
)
def test_text_forms(answer, expected):
    assert text(answer) == expected


def test_exact_keeps_everything():
    assert get_canonicaliser("exact")(" Paris. ") == " Paris. "


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**12), 10**12))
def test_integer_spellings_share_a_class(value):
    forms = [str(value), f"{value}.0", f"{value:,}", f"{value:,}.00"]
    if value >= 0:
        forms += [f"${value:,}", f"+{value}"]
    assert {numeric(form) for form in forms} == {str(value)}


@settings(max_examples=300, deadline=None)
@given(st.decimals(min_value=-(10**6), max_value=10**6, places=4, allow_nan=False))
def test_canonical_number_round_trips_and_is_idempotent(value):
    form = numeric(str(value))
    assert parse_number(form) == Fraction(Decimal(value))
    assert numeric(form) == form


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=30), st.text(alphabet="0123456789.,$-+/%() eE", max_size=12)))
def test_canonicalisers_are_idempotent_on_any_text(answer):
    assert text(text(answer)) == text(answer)
    assert numeric(numeric(answer)) == numeric(answer)


def test_canonical_number_forms():
    assert canonical_number(Fraction(7, 4)) == "1.75"
    assert canonical_number(Fraction(-1, 8)) == "-0.125"
    assert canonical_number(Fraction(2, 3)) == "2/3"
    assert canonical_number(Fraction(-5)) == "-5"


def test_registry():
    assert {"exact", "numeric", "text"} <= set(canonicaliser_names())
    assert get_canonicaliser("numeric") is numeric
    with pytest.raises(StatsError, match="unknown canonicaliser 'roman'; known: exact"):
        get_canonicaliser("roman")
    with pytest.raises(StatsError, match="already registered"):
        register_canonicaliser("text", str.upper)
    with pytest.raises(StatsError, match="callable"):
        register_canonicaliser("bad", "not a function")


def test_registering_a_canonicaliser(monkeypatch):
    monkeypatch.setattr(canonical, "_REGISTRY", dict(canonical._REGISTRY))
    register_canonicaliser("upper", str.upper)
    assert get_canonicaliser("upper")("abc") == "ABC"
    register_canonicaliser("upper", str.lower, replace=True)
    assert get_canonicaliser("upper")("ABC") == "abc"


def test_non_strings_are_refused():
    for function in (numeric, text, get_canonicaliser("exact")):
        with pytest.raises(StatsError, match="answer must be a string"):
            function(42)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("(-3)", "-3"),
        ("x=-3", "x=-3"),
        ("answer:-7", "answer -7"),
        ("[-1, 2]", "-1 2"),
        ("1e-5", "1e-5"),
        ("covid-19", "covid19"),
    ],
)
def test_a_minus_sign_after_punctuation_or_in_an_exponent_is_kept(answer, expected):
    # "(-3)" and "(3)" are different answers; so are "1e-5" and "1e5"
    assert text(answer) == expected
    assert text(expected) == expected


def test_negative_numbers_in_brackets_stay_negative():
    assert numeric("(-3)") == "-3" != numeric("(3)")
    assert numeric("answer:-7") != numeric("answer:7")
