"""Label policy descriptions: validation naming the field, presets, editing the draft only."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.utils import timezone

from labeling.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from labeling.importers import formats
from labeling.markdown import markdown_html
from labeling.models import Claim, DerivedChange, DerivedKind, Item, LabelPolicy, Role
from labeling.policy_presets import DEFAULT_PRESET, preset_get, presets
from labeling.selectors.policies import (
    policy_description_data,
    policy_label_choices,
    policy_reason_choices,
)
from labeling.services.label_checks import ClaimInput, labels_check
from labeling.services.policies import policy_description_check, policy_update
from tests.factories import UserFactory, work_record


def _default() -> dict[str, Any]:
    return copy.deepcopy(preset_get(DEFAULT_PRESET).description_data())


def _refused(data: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        policy_description_check(data)
    return caught.value


# -- validation -------------------------------------------------------------------------------


def test_a_preset_description_round_trips():
    data = _default()

    checked = policy_description_check(data)

    assert [c.value for c in checked.claim_labels] == [
        "supported",
        "contradicted",
        "not_supported",
        "evidence_unavailable",
    ]
    assert checked.model_fields()["evidence_labels"] == ["supported", "contradicted"]
    assert [c.key for c in checked.answer_labels] == ["1", "2", "3", "4"]


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        (lambda d: d["claim_labels"].append({"value": "partially_supported"}), "claim_labels[4]"
         ".value", "not a claim label"),
        (lambda d: d["answer_labels"].append({"value": "admissible"}), "answer_labels[4].value",
         "offered twice"),
        (lambda d: d["claim_labels"][1].update(key="1"), "claim_labels[1].key",
         "already the key of supported"),
        (lambda d: d["claim_labels"][0].update(key="12"), "claim_labels[0].key",
         "one lower-case letter or digit"),
        (lambda d: d["claim_labels"][0].update(key="s"), "claim_labels[0].key", "reserved"),
        (lambda d: d["answer_labels"][0].update(key="0"), "answer_labels[0].key", "reserved"),
        (lambda d: d["claim_labels"][3].update(requires_evidence=True),
         "claim_labels[3].requires_evidence", "cannot cite evidence"),
        (lambda d: d["answer_labels"][0].update(requires_evidence=True),
         "answer_labels[0].requires_evidence", "only claim labels"),
        (lambda d: d["answer_labels"][0].update(text="  "), "answer_labels[0].text", "empty"),
        (lambda d: d["answer_labels"][0].update(text="x" * 61), "answer_labels[0].text",
         "at most 60"),
        (lambda d: d.update(unavailable_reasons=[]), "unavailable_reasons",
         "give at least one reason"),
        (lambda d: d["unavailable_reasons"].append({"value": "too_long"}),
         "unavailable_reasons[3].value", "not a reason"),
        (lambda d: d.update(answer_labels=[]), "answer_labels", "at least one label"),
        (lambda d: d.update(claim_labels=[{"value": "evidence_unavailable"}]), "claim_labels",
         "besides evidence_unavailable"),
        (lambda d: d.update(evidence_relation="vibes"), "evidence_relation", "not one of"),
        (lambda d: d.update(guideline="a\x00b"), "guideline", "control character"),
        (lambda d: d.update(colour="red"), "colour", "unknown field"),
        (lambda d: d.pop("guideline"), "guideline", "required"),
    ],
)  # fmt: skip
def test_validation_names_the_field(change, field, reason):
    data = _default()
    change(data)

    error = _refused(data)

    assert error.field == field
    assert reason in error.reason
    assert error.data["errors"][0]["field"] == field


def test_every_problem_is_listed():
    data = _default()
    data["answer_labels"][0]["key"] = "ab"
    data["claim_labels"][2]["requires_evidence"] = "yes"

    error = _refused(data)

    assert [e["field"] for e in error.data["errors"]] == [
        "answer_labels[0].key",
        "claim_labels[2].requires_evidence",
    ]


def test_a_policy_may_leave_labels_out_and_rename_them():
    data = _default()
    data["answer_labels"] = [
        {"value": "admissible", "text": "Faithful", "key": "f"},
        {"value": "inadmissible", "text": "Unfaithful", "key": "i"},
    ]
    data["claim_labels"] = [
        {"value": "supported", "requires_evidence": False},
        {"value": "not_supported", "requires_evidence": True, "key": "m"},
    ]
    data["unavailable_reasons"] = []

    checked = policy_description_check(data)

    fields = checked.model_fields()
    assert fields["answer_labels"] == ["admissible", "inadmissible"]
    assert fields["label_details"]["answer"]["admissible"]["text"] == "Faithful"
    assert fields["evidence_labels"] == ["not_supported"]
    assert fields["unavailable_reasons"] == []
    # Defaults fill what is not given: the text, the description and the position's key.
    assert fields["label_details"]["claim"]["supported"] == {
        "text": "supported",
        "description": "The evidence states the claim or directly implies it.",
        "key": "1",
    }


def test_not_an_object_is_refused():
    assert _refused(["a"]).field == "policy"


def test_a_description_without_scales_is_nominal():
    data = _default()
    del data["answer_scale"], data["claim_scale"]

    fields = policy_description_check(data).model_fields()

    assert (fields["answer_scale"], fields["claim_scale"]) == ("nominal", "nominal")


@pytest.mark.parametrize("level", ["answer", "claim"])
@pytest.mark.parametrize("scale", ["nominal", "ordinal"])
def test_a_scale_over_named_labels_is_kept(level, scale):
    data = _default()
    data[f"{level}_scale"] = scale

    checked = policy_description_check(data)

    assert checked.model_fields()[f"{level}_scale"] == scale
    assert checked.data()[f"{level}_scale"] == scale


@pytest.mark.parametrize(("level", "first"), [("answer", "admissible"), ("claim", "supported")])
@pytest.mark.parametrize("scale", ["interval", "ratio"])
def test_a_numeric_scale_over_named_labels_names_the_level_and_label(level, first, scale):
    data = _default()
    data[f"{level}_scale"] = scale

    error = _refused(data)

    assert error.field == f"{level}_scale"
    reason = f"the {level} label {first!r} is not a number, as the {scale} scale needs"
    assert error.reason == reason


def test_an_unknown_scale_is_refused():
    data = _default()
    data["claim_scale"] = "Ordinal"

    error = _refused(data)

    assert (error.field, error.reason) == (
        "claim_scale",
        "expected one of nominal, ordinal, interval, ratio, got 'Ordinal'",
    )


# -- presets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["source_relative", "external_truth", "faithbench", "expertqa",
                                  "gsm8k", "wice"])  # fmt: skip
def test_every_preset_is_valid_and_its_guideline_explains_every_label(name):
    preset = presets()[name]
    data = preset.description_data()

    assert policy_description_check(data) == preset.description
    guideline = preset.description.guideline
    for row in (*data["answer_labels"], *data["claim_labels"]):
        assert f"**{row['text']}** (key `{row['key']}`)" in guideline
    for row in data["unavailable_reasons"]:
        assert f"- **{row['text']}**:" in guideline
    assert "DESIGN" not in guideline and "§" not in guideline
    html = markdown_html(guideline)
    assert "<h2>" in html and "<li>" in html


def test_every_preset_is_nominal():
    for preset in presets().values():
        data = preset.description_data()
        assert (data["answer_scale"], data["claim_scale"]) == ("nominal", "nominal")


def test_source_relative_requires_evidence_and_external_truth_does_not():
    assert "must cite at least one" in preset_get("source_relative").description.guideline
    assert preset_get("source_relative").description.model_fields()["evidence_labels"] == [
        "supported",
        "contradicted",
    ]
    external = preset_get("external_truth").description
    assert external.evidence_relation == "external_truth"
    assert external.model_fields()["evidence_labels"] == []
    assert "No label requires evidence" in external.guideline


def test_unknown_preset_names_the_field():
    with pytest.raises(InvalidInput) as caught:
        preset_get("nope")
    assert caught.value.field == "preset"


# -- the selector -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_choices_of_a_policy_without_details_are_the_defaults(project):
    policy = LabelPolicy.objects.get(project=project)
    LabelPolicy.objects.filter(pk=policy.pk).update(label_details={}, reason_texts={})
    policy.refresh_from_db()

    choices = policy_label_choices(policy, "claim", cannot_decide=True)

    assert [(c.value, c.text, c.key, c.requires_evidence) for c in choices] == [
        ("supported", "supported", "1", True),
        ("contradicted", "contradicted", "2", True),
        ("not_supported", "not supported", "3", False),
        ("evidence_unavailable", "evidence unavailable", "4", False),
        ("cannot_decide", "can't decide", "0", False),
    ]
    assert [(r.value, r.text) for r in policy_reason_choices(policy)][0] == (
        "not_found",
        "source not found",
    )


# -- editing the draft ------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_manager_edits_the_draft(project, member):
    manager = member(Role.MANAGER)
    data = policy_description_data(LabelPolicy.objects.get(project=project))
    data["claim_labels"][0].update(text="backed by the source", key="y")
    data["claim_labels"][2]["requires_evidence"] = True
    data["guideline"] = "# Our rules\n\nBe careful."

    policy = policy_update(project=project, actor=manager, description=data)

    policy.refresh_from_db()
    assert policy.guideline == "# Our rules\n\nBe careful."
    assert policy.evidence_labels == ["supported", "contradicted", "not_supported"]
    choice = policy_label_choices(policy, "claim")[0]
    assert (choice.text, choice.key) == ("backed by the source", "y")
    assert policy_description_data(policy) == policy_description_check(data).data()


@pytest.mark.django_db
def test_a_scale_change_marks_the_agreement_stale_and_other_edits_do_not(project, member):
    manager = member(Role.MANAGER)
    data = policy_description_data(LabelPolicy.objects.get(project=project))
    marks = DerivedChange.objects.filter(project=project, kind=DerivedKind.AGREEMENT)
    data["guideline"] = "Be careful."
    policy_update(project=project, actor=manager, description=data)
    assert not marks.exists()

    data["claim_scale"] = "ordinal"
    policy = policy_update(project=project, actor=manager, description=data)

    policy.refresh_from_db()
    assert (policy.answer_scale, policy.claim_scale) == ("nominal", "ordinal")
    assert marks.count() == 1


@pytest.mark.django_db
def test_only_managers_edit_and_a_frozen_policy_never_changes(project, member):
    data = policy_description_data(LabelPolicy.objects.get(project=project))
    with pytest.raises(PermissionDenied):
        policy_update(project=project, actor=member(Role.ADJUDICATOR), description=data)
    with pytest.raises(PermissionDenied):
        policy_update(project=project, actor=UserFactory(), description=data)
    LabelPolicy.objects.filter(project=project).update(frozen_at=timezone.now())
    data["guideline"] = "changed"

    with pytest.raises(InvalidTransition) as caught:
        policy_update(project=project, actor=member(Role.MANAGER), description=data)

    assert caught.value.code == "policy_frozen"
    assert "publish a new version" in caught.value.reason
    assert LabelPolicy.objects.get(project=project).guideline != "changed"


# -- the policy's evidence rule in labels_check, the formats' presets ----------------------------


@pytest.mark.django_db
def test_labels_check_requires_evidence_for_the_policy_evidence_labels(project, import_records):
    import_records([work_record()])
    item = Item.objects.get(candidate__key="c0")
    first, second = Claim.objects.filter(candidate=item.candidate).order_by("index")
    data = policy_description_data(LabelPolicy.objects.get(project=project))
    for row in data["claim_labels"]:
        row["requires_evidence"] = row["value"] == "not_supported"
    policy = policy_update(project=project, actor=None, description=data)

    def check(label: str) -> None:
        labels_check(
            item=item,
            policy=policy,
            answer_label="admissible",
            answer_reason=None,
            claims=[ClaimInput(first.pk, label), ClaimInput(second.pk, "contradicted")],
            allow_cannot_decide=False,
        )

    check("supported")  # supported and contradicted no longer need a span
    with pytest.raises(InvalidInput) as caught:
        check("not_supported")
    assert caught.value.field == "claims[0].evidence"
    assert caught.value.reason == "not_supported needs at least one evidence span"


def test_every_format_names_a_preset():
    assert {name: f.policy_preset for name, f in formats().items()} == {
        "native": "source_relative",
        "faithbench": "faithbench",
        "expertqa": "expertqa",
        "gsm8k": "gsm8k",
        "otel": "source_relative",
        "ragas": "source_relative",
        "ragtruth": "ragtruth",
        "release": "source_relative",
        "wice": "wice",
        "xsum": "source_relative",
    }
