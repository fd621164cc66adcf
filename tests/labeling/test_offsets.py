"""Browser UTF-16 offsets to code points, and the checks every cited span passes."""

from __future__ import annotations

import hashlib

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.exceptions import InvalidInput
from labeling.offsets import evidence_span_check, is_grapheme_boundary, utf16_to_codepoint
from tests.factories import WORK_SOURCE, utf16_span

EMOJI = "\U0001f600"  # one code point, two UTF-16 units
THUMB = "\U0001f44d\U0001f3fd"  # thumbs up + skin tone: one grapheme, two code points
FLAG = "\U0001f1e6\U0001f1fa"  # two regional indicators: one grapheme


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check(text: str, start: int, end: int, quote: str, unit: str = "utf16") -> tuple[int, int]:
    return evidence_span_check(
        text=text, sha256=sha(text), start=start, end=end, quote=quote, unit=unit
    )


def field_of(exc: pytest.ExceptionInfo[InvalidInput]) -> str:
    return exc.value.field


# -- utf16_to_codepoint ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "utf16", "expected"),
    [
        ("abc", 0, 0),
        ("abc", 3, 3),
        (f"a{EMOJI}b", 1, 1),
        (f"a{EMOJI}b", 3, 2),
        (f"a{EMOJI}b", 4, 3),
        (f"{EMOJI}{EMOJI}", 4, 2),
        ("e\u0301", 2, 2),
        ("", 0, 0),
    ],
)
def test_converts_utf16_units_to_code_points(text, utf16, expected):
    assert utf16_to_codepoint(text, utf16) == expected


@pytest.mark.parametrize(
    ("offset", "reason"), [(2, "surrogate pair"), (5, "past the end"), (-1, "negative")]
)
def test_refuses_offsets_inside_a_surrogate_pair_or_out_of_range(offset, reason):
    # given "a😀b": units a, high, low, b
    with pytest.raises(InvalidInput, match=reason):
        utf16_to_codepoint(f"a{EMOJI}b", offset, field="start")


# -- evidence_span_check --------------------------------------------------------------------


def test_a_browser_selection_after_an_emoji_gives_code_point_offsets():
    # given the browser's offsets of "It spans the harbour" in a text with an astral emoji
    quote = "It spans the harbour"
    start, end = utf16_span(WORK_SOURCE, quote)
    # when checked
    cp = check(WORK_SOURCE, start, end, quote)
    # then the code-point slice is the quote, shifted by one per astral character before it
    assert WORK_SOURCE[cp[0] : cp[1]] == quote
    assert cp == (start - 2, end - 2)


def test_code_point_offsets_are_taken_as_they_are():
    quote = "cafe\u0301s"
    start = WORK_SOURCE.index(quote)
    assert check(WORK_SOURCE, start, start + len(quote), quote, unit="codepoint") == (
        start,
        start + len(quote),
    )


def test_a_quote_that_differs_from_the_text_is_refused_showing_both_cut_to_40():
    # given a selection whose quote is one character off (nothing may be shifted silently)
    text = "x" * 100 + "The bridge opened in 1932." + "y" * 100
    with pytest.raises(InvalidInput) as exc:
        check(text, 100, 126, "the bridge opened in 1932.")
    assert field_of(exc) == "quote"
    assert "'the bridge opened in 1932.'" in exc.value.message
    assert "'The bridge opened in 1932.'" in exc.value.message
    # a long quote is shown cut to 40 code points
    with pytest.raises(InvalidInput) as exc:
        check(text, 0, 150, "z" * 150)
    assert "'" + "z" * 40 + "…'" in exc.value.message
    assert "z" * 41 not in exc.value.message


def test_a_text_that_no_longer_matches_its_hash_is_refused():
    with pytest.raises(InvalidInput) as exc:
        evidence_span_check(
            text="abc", sha256=sha("abd"), start=0, end=1, quote="a", unit="codepoint"
        )
    assert field_of(exc) == "source"
    assert "sha256" in exc.value.message


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [(3, 3, "end"), (4, 2, "end"), (0, 99, "end"), (-1, 2, "start")],
)
def test_empty_reversed_and_out_of_range_spans_are_refused(start, end, field):
    with pytest.raises(InvalidInput) as exc:
        check("abcdef", start, end, "abcdef"[max(start, 0) : end], unit="codepoint")
    assert field_of(exc) == field


def test_an_unknown_unit_is_refused():
    with pytest.raises(InvalidInput) as exc:
        check("abc", 0, 1, "a", unit="bytes")
    assert field_of(exc) == "unit"


@pytest.mark.parametrize(
    ("text", "start", "end", "field"),
    [
        # half of an emoji's surrogate pair (UTF-16 offsets)
        (f"a{EMOJI}b", 0, 2, "end"),
        (f"a{EMOJI}b", 2, 4, "start"),
    ],
)
def test_a_span_splitting_a_surrogate_pair_is_refused(text, start, end, field):
    with pytest.raises(InvalidInput, match="surrogate") as exc:
        check(text, start, end, "?")
    assert field_of(exc) == field


@pytest.mark.parametrize(
    ("text", "quote", "field"),
    [
        ("cafe\u0301 noir", "cafe", "end"),  # base letter without its combining accent
        ("cafe\u0301 noir", "\u0301 noir", "start"),  # the accent alone
        (f"ok {THUMB}!", "ok \U0001f44d", "end"),  # emoji without its skin tone
        (f"ok {FLAG}!", "\U0001f1fa!", "start"),  # half a flag
    ],
)
def test_a_span_splitting_a_grapheme_cluster_is_refused(text, quote, field):
    start = text.index(quote)
    with pytest.raises(InvalidInput, match="grapheme") as exc:
        check(text, start, start + len(quote), quote, unit="codepoint")
    assert field_of(exc) == field


@pytest.mark.parametrize(("quote", "field"), [("one\r", "end"), ("\ntwo", "start")])
def test_a_span_splitting_crlf_is_refused(quote, field):
    text = "one\r\ntwo"
    start = text.index(quote)
    with pytest.raises(InvalidInput, match="CRLF") as exc:
        check(text, start, start + len(quote), quote, unit="codepoint")
    assert field_of(exc) == field


def test_a_span_over_whole_lines_with_crlf_is_accepted():
    text = "one\r\ntwo\r\nthree"
    start, end = utf16_span(text, "one\r\ntwo\r\n")
    assert check(text, start, end, "one\r\ntwo\r\n") == (0, 10)


def test_grapheme_boundaries_far_into_a_long_text_use_the_last_line_break():
    text = ("line\n" * 10_000) + "cafe\u0301"
    assert is_grapheme_boundary(text, len(text) - 1) is False
    assert is_grapheme_boundary(text, len(text) - 2) is True
    assert is_grapheme_boundary(text, 5) is True


# -- property: grapheme-aligned browser spans always land on the quote ------------------------

# Letters, astral characters (emoji, skin tones, regional indicators, a CJK extension B
# ideograph), combining marks, CR/LF and spaces.
PIECES = st.sampled_from(
    [
        "a",
        "Z",
        " ",
        "é",
        "\u0301",
        "\u0308",
        "\r\n",
        "\n",
        "\r",
        EMOJI,
        "\U0001f3fd",
        "\U0001f1e6",
        "\U0001f1fa",
        "\U00020000",
        "\u200d",
        "ß",
    ]
)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(PIECES, min_size=1, max_size=40), data=st.data())
def test_grapheme_aligned_utf16_spans_convert_to_the_quote(pieces, data):
    # given a text with astral characters, combining marks and CRLF, and a span between two
    # grapheme-cluster boundaries, as a browser reports it (UTF-16 units)
    text = "".join(pieces)
    boundaries = sorted({0, len(text), *(m.end() for m in regex.finditer(r"\X", text))})
    start_cp = data.draw(st.sampled_from(boundaries[:-1]))
    end_cp = data.draw(st.sampled_from([b for b in boundaries if b > start_cp]))
    quote = text[start_cp:end_cp]
    start, end = utf16_len(text[:start_cp]), utf16_len(text[:end_cp])
    # when checked
    got = check(text, start, end, quote)
    # then the code-point offsets slice out exactly the quote
    assert got == (start_cp, end_cp)
    assert text[got[0] : got[1]] == quote


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(PIECES, min_size=1, max_size=30), data=st.data())
def test_any_accepted_span_slices_out_its_quote(pieces, data):
    # given arbitrary UTF-16 offsets (aligned or not)
    text = "".join(pieces)
    n = utf16_len(text)
    start = data.draw(st.integers(0, n))
    end = data.draw(st.integers(0, n))
    encoded = text.encode("utf-16-le")
    quote = encoded[2 * min(start, end) : 2 * max(start, end)].decode("utf-16-le", "replace")
    # then a span is either refused, or accepted with offsets whose slice is the quote and
    # whose ends are grapheme boundaries not inside CRLF
    try:
        s, e = check(text, start, end, quote)
    except InvalidInput:
        return
    assert text[s:e] == quote
    assert is_grapheme_boundary(text, s) and is_grapheme_boundary(text, e)
    assert not (0 < s < len(text) and text[s - 1 : s + 1] == "\r\n")
