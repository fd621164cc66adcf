"""Domain errors carry reason, field, code and data; the message and the API body come from them."""

from __future__ import annotations

from certification.exceptions import InvalidAudit, InvalidSpec, ReleaseNotFound
from labeling.api_errors import exception_handler
from labeling.exceptions import InvalidInput, LabelingError, NotFound, StaleVersion


def test_the_message_is_built_from_field_and_reason():
    named = InvalidInput("at most 5 spans per claim", field="claims[2].evidence")
    whole = NotFound("no project 'study'")

    assert (named.field, named.reason, named.code) == (
        "claims[2].evidence",
        "at most 5 spans per claim",
        "invalid_input",
    )
    assert named.message == str(named) == "claims[2].evidence: at most 5 spans per claim"
    assert (whole.field, whole.message, whole.data) == (None, "no project 'study'", {})


def test_a_reason_that_reads_on_its_own_keeps_the_field_out_of_the_message():
    error = InvalidInput("release 3 already exists", field="version", prefix=False)

    assert (error.field, error.message) == ("version", "release 3 already exists")


def test_code_defaults_to_the_class_and_may_be_given():
    assert StaleVersion("changed").code == "stale_version"
    assert LabelingError("x", code="custom").code == "custom"
    assert LabelingError("x").code == "labeling_error"


def test_data_holds_the_payload_but_never_the_field():
    error = StaleVersion("item 4 changed", data={"expected_version": 1, "version": 2})

    assert error.data == {"expected_version": 1, "version": 2}
    assert InvalidSpec("alpha", "must lie strictly between 0 and 1").data == {}


def test_certification_field_errors_use_the_base():
    spec = InvalidSpec("thresholds[1]", "must be finite")
    audit = InvalidAudit("confidence", "must be a number")

    assert (spec.field, spec.reason, spec.message) == (
        "thresholds[1]",
        "must be finite",
        "thresholds[1]: must be finite",
    )
    assert (audit.field, audit.reason, audit.code) == (
        "confidence",
        "must be a number",
        "invalid_audit",
    )
    assert audit.message == "confidence: must be a number"


def test_release_not_found_lives_with_the_other_certification_errors():
    assert issubclass(ReleaseNotFound, NotFound)
    assert ReleaseNotFound("no release 9").code == "release_not_found"


def test_the_api_body_adds_the_field_when_the_error_names_one():
    named = exception_handler(InvalidInput("not a number", field="seed", data={"hint": 1}), {})
    whole = exception_handler(NotFound("no project 'study'"), {})

    assert named is not None and whole is not None
    assert (named.status_code, named.data) == (
        400,
        {
            "detail": "seed: not a number",
            "code": "invalid_input",
            "errors": [{"field": "seed", "reason": "not a number"}],
            "field": "seed",
            "hint": 1,
        },
    )
    assert (whole.status_code, whole.data) == (
        404,
        {
            "detail": "no project 'study'",
            "code": "not_found",
            "errors": [{"field": None, "reason": "no project 'study'"}],
        },
    )
