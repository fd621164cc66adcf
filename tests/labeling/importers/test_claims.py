"""Claim splitting at import (labeling.importers.claims): offsets, modes, counts, refusals."""

from __future__ import annotations

import io
from importlib.metadata import version

import pytest
from django.core.management import CommandError, call_command

from labeling.exceptions import InvalidInput
from labeling.importers.claims import CLAIM_MODES, SENTENCES, WHOLE, ClaimSplitter
from labeling.services import workload_import_file
from tests.conftest import jsonl_bytes, native_record

# Two astral characters (one UTF-16 surrogate pair each, 4 UTF-8 bytes) and a decomposed é:
# code-point offsets differ from UTF-16 and UTF-8 offsets from the first one on.
ANSWER = "  \U0001d400 is bold. Caf\u0065\u0301 opened \U0001f551 at 9.\n Done!  "


def test_sentences_are_code_point_spans_of_the_stored_text():
    splitter = ClaimSplitter(SENTENCES)
    claims = splitter.claims(ANSWER)
    assert [c["text"] for c in claims] == [
        "\U0001d400 is bold.",
        "Caf\u0065\u0301 opened \U0001f551 at 9.",
        "Done!",
    ]
    # Counted by hand: 2 spaces; "𝐀 is bold." is 10 code points; a space; "Café opened 🕑 at
    # 9." is 20 (e + U+0301 are two); "\n "; "Done!" is 5.
    assert [(c["start"], c["end"]) for c in claims] == [(2, 12), (13, 33), (35, 40)]
    assert all(ANSWER[c["start"] : c["end"]] == c["text"] for c in claims)
    assert all(c["machine_split"] for c in claims)
    # Not UTF-16 units: there the second claim would start at 14 (the first astral is 2 units).
    assert len(ANSWER[:13].encode("utf-16-le")) // 2 == 14


def test_whole_is_one_claim_per_answer_trimmed_by_offsets():
    splitter = ClaimSplitter(WHOLE)
    [claim] = splitter.claims(ANSWER)
    assert (claim["start"], claim["end"]) == (2, 40)
    assert claim["text"] == ANSWER.strip()
    assert claim["machine_split"] is False


@pytest.mark.parametrize("mode", list(CLAIM_MODES))
def test_blank_answers_have_no_claims_and_are_counted(mode):
    splitter = ClaimSplitter(mode)
    assert splitter.claims("") == []
    assert splitter.claims(" \n\t") == []
    splitter.claims("One. Two.")
    expected_claims = 2 if mode == SENTENCES else 1
    assert splitter.counts == {
        "mode": mode,
        "splitter": f"pysbd {version('pysbd')} (en)" if mode == SENTENCES else "none",
        "answers": 3,
        "claims": expected_claims,
        "answers_without_claims": 2,
        "sentence_gaps_filled": 0,
    }


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown claim splitting 'words'"):
        ClaimSplitter("words")


@pytest.mark.django_db
def test_a_claims_choice_for_a_format_with_its_own_claims_is_refused(project):
    stream = io.BytesIO(jsonl_bytes([native_record("q1")]))
    with pytest.raises(InvalidInput, match="the native format gives its own claims") as info:
        workload_import_file(
            project=project,
            stream=stream,
            format_name="native",
            filename="w.jsonl",
            actor=None,
            claims=WHOLE,
        )
    assert info.value.field == "claims"
    with pytest.raises(InvalidInput, match="unknown claim splitting 'words'"):
        workload_import_file(
            project=project,
            stream=stream,
            format_name="native",
            filename="w.jsonl",
            actor=None,
            claims="words",
        )


@pytest.mark.django_db
def test_the_command_refuses_claims_for_a_format_with_its_own_claims(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_bytes(jsonl_bytes([native_record("q1")]))
    with pytest.raises(CommandError, match="--claims: the native format gives its own claims"):
        call_command(
            "import_workload", str(path), "--project", "p", "--create", "--claims", "whole",
            "--no-progress", stdout=io.StringIO(), stderr=io.StringIO(),
        )  # fmt: skip
