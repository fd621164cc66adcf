"""The problems of a refused submission in the page's words (labeling.views.problems), shared by
the labelling and adjudication pages."""

from __future__ import annotations

from labeling.exceptions import InvalidInput
from labeling.forms import ClaimState, EvidenceState, LabelsState
from labeling.views.labels import errors_from
from labeling.views.problems import PROBLEM_WORDS, problems_in_words, problems_of

EVIDENCE = EvidenceState(source_version_id="1", start="0", end="3", quote="abc", unit="utf16")


def state(**claims: ClaimState) -> LabelsState:
    return LabelsState(
        answer_label="evidence_unavailable",
        answer_reason="",
        claims={int(k[1:]): v for k, v in claims.items()},
    )


def test_each_field_path_reads_as_a_sentence_of_the_page():
    sent = state(
        c10=ClaimState(label="supported"),
        c11=ClaimState(label=""),
        c12=ClaimState(label="not_supported", reason="blocked"),
        c13=ClaimState(label="supported", evidence=[EVIDENCE, EVIDENCE]),
        c14=ClaimState(label="bogus"),
    )
    errors = [
        {"field": "answer_reason", "reason": "evidence_unavailable needs a reason, one of [...]"},
        {"field": "claims[0].evidence", "reason": "supported needs at least one evidence span"},
        {"field": "claims[1].label", "reason": "'' is not one of [...]"},
        {"field": "claims[2].reason", "reason": "a reason is given only with ..."},
        {"field": "claims[3].evidence[1].quote", "reason": "the quote does not match"},
        {"field": "claims[3].evidence[0].source_version_id", "reason": "not pinned"},
        {"field": "claims[4].label", "reason": "'bogus' is not one of [...]"},
        {"field": "claims", "reason": "every claim needs a label; missing: claim 9 (index 5)"},
        {"field": "comment", "reason": "at most 5000 characters"},
    ]

    problems = problems_in_words(
        errors, state=sent, claim_ids=[10, 11, 12, 13, 14], claim_names=["Claim 1", "Claim 2"]
    )

    assert [p.message for p in problems] == [
        "The answer — 'evidence unavailable' needs a reason: choose why the evidence is "
        "unavailable",
        "Claim 1 — 'supported' needs evidence: select text in a source and press c",
        "Claim 2 — choose a label",
        "Claim 3 — a reason is given only with 'evidence unavailable': clear the reason",
        "Claim 4 — evidence 2 no longer matches its source text: remove it and cite the text again",
        "Claim 4 — evidence 1 is not from a source of this item: remove it",
        "Claim 5 — 'bogus' is not a label of this policy: choose one of the labels shown",
        "every claim needs a label: reload the page and label each claim",
        "Comment — at most 5000 characters",
    ]
    assert [(p.target, p.claim_position) for p in problems[:3]] == [
        ("answer", None),
        ("claim", 0),
        ("claim", 1),
    ]


def test_the_page_script_uses_the_same_sentences():
    # the client-side check fills these templates: they must give the server's words
    assert PROBLEM_WORDS["evidence_missing"].format(label="supported") == (
        "'supported' needs evidence: select text in a source and press c"
    )
    assert PROBLEM_WORDS["label_missing"] == "choose a label"


def test_a_page_field_named_by_the_caller_and_an_unknown_field():
    problems = problems_in_words(
        [
            {"field": "unresolved_reason", "reason": "choose why it stays unresolved"},
            {"field": "expected_version", "reason": "expected a number"},
        ],
        state=LabelsState(),
        claim_ids=[],
        field_names={"unresolved_reason": ("general", "Decision")},
    )
    assert [p.message for p in problems] == [
        "Decision — choose why it stays unresolved",
        "expected_version: expected a number",
    ]


def test_an_error_without_a_list_is_placed_by_its_field_and_kept_as_written():
    exc = InvalidInput("2 values given; this field takes exactly one", field="claims[1].label")

    [problem] = problems_of(exc, state=LabelsState(), claim_ids=[7, 8])

    assert (problem.target, problem.claim_position, problem.message) == (
        "claim",
        1,
        "Claim 2 — claims[1].label: 2 values given; this field takes exactly one",
    )


def test_errors_from_places_every_problem_and_lists_them_in_the_summary():
    exc = InvalidInput(
        "x",
        field="answer_label",
        data={
            "errors": [
                {"field": "answer_label", "reason": "'' is not one of [...]"},
                {"field": "claims[1].label", "reason": "'' is not one of [...]"},
                {"field": "claims[1].evidence", "reason": "at most 50 spans per claim"},
            ]
        },
    )

    errors = errors_from(exc, state=LabelsState(), claim_ids=[4, 5])

    assert errors.answer == "choose a label"
    assert errors.claims == {1: "choose a label at most 50 spans per claim"}
    assert errors.claim_texts(1) == ("choose a label", "at most 50 spans per claim")
    assert len(errors.summary) == 3 and errors.general is None
