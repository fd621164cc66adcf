"""Calibration specs: validation naming the field, content hash, immutability, new versions."""

from __future__ import annotations

from decimal import Decimal

import pytest

from certification.exceptions import InvalidSpec, SpecFrozen
from certification.models import CalibrationRun, CalibrationSpec
from certification.services import (
    calibration_run_request,
    calibration_spec_create,
    calibration_spec_revise,
    calibration_spec_update,
    spec_content,
    spec_sha256,
)
from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import Role
from tests.factories import (
    UserFactory,
    calibration_candidate,
    calibration_project,
    calibration_record,
    make_spec,
)

pytestmark = pytest.mark.django_db

VALID = {
    "method": "selective_risk",
    "alpha": "0.1",
    "delta": "0.05",
    "thresholds": [0.5, 0.7, 0.9],
    "score_field": "acceptance_score",
    "selector": "is_selected",
}


@pytest.fixture
def manager(member):
    return member(Role.MANAGER)


def create(project, manager, **overrides):
    return calibration_spec_create(
        project=project, actor=manager, name=overrides.pop("name", "main"), **{**VALID, **overrides}
    )


# -- validation --------------------------------------------------------------------------------
def test_creates_a_spec_with_defaults_and_its_content_hash(project, manager):
    spec = create(project, manager)
    assert (spec.version, spec.previous, spec.created_by) == (1, None, manager)
    assert spec.alpha == Decimal("0.1") and spec.delta == Decimal("0.05")
    assert spec.thresholds == [0.5, 0.7, 0.9]
    assert (spec.acceptance, spec.multiplicity, spec.utility) == (">=", "bonferroni", "answer_rate")
    assert (spec.unresolved_as, spec.evidence_unavailable_as, spec.abstained_as) == ("error",) * 3
    assert spec.pending_as == "exclude"
    assert len(spec.content_sha256) == 64
    assert spec.content_sha256 == spec_sha256(spec)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"alpha": "0"}, "alpha"),
        ({"alpha": "1"}, "alpha"),
        ({"alpha": "1.5"}, "alpha"),
        ({"alpha": "-0.1"}, "alpha"),
        ({"alpha": "ten percent"}, "alpha"),
        ({"alpha": None}, "alpha"),
        ({"alpha": "0.123456789"}, "alpha"),
        ({"delta": "0"}, "delta"),
        ({"delta": "1"}, "delta"),
        ({"report_confidence": "1"}, "report_confidence"),
        ({"stopping_delta": "2"}, "stopping_delta"),
        ({"thresholds": []}, "thresholds"),
        ({"thresholds": "not a list"}, "thresholds[0]"),
        ({"thresholds": [0.5, "x"]}, "thresholds[1]"),
        ({"thresholds": [0.5, 0.5]}, "thresholds[1]"),
        ({"thresholds": [float("inf")]}, "thresholds[0]"),
        ({"thresholds": [True]}, "thresholds[0]"),
        ({"score_field": "made_up"}, "score_field"),
        ({"score_field": "evaluator:nobody@1"}, "score_field"),
        ({"score_field": ""}, "score_field"),
        ({"method": "magic"}, "method"),
        ({"method": ""}, "method"),
        ({"selector": "best"}, "selector"),
        ({"acceptance": "=="}, "acceptance"),
        ({"multiplicity": "holm"}, "multiplicity"),
        ({"unresolved_as": "ignore"}, "unresolved_as"),
        ({"pending_as": "admissible"}, "pending_as"),
        ({"canonicaliser": "stemmer"}, "canonicaliser"),
        ({"tie_rule": "random"}, "tie_rule"),
        ({"partition": "test"}, "partition"),
        ({"seed": -1}, "seed"),
        ({"seed": "x"}, "seed"),
        ({"method": "conformal_set", "selector": "each_candidate"}, "selector"),
        ({"colour": "blue"}, "colour"),
        ({"name": ""}, "name"),
    ],
)
def test_refuses_an_invalid_field_and_names_it(project, manager, overrides, field):
    with pytest.raises(InvalidSpec) as caught:
        create(project, manager, **overrides)
    assert caught.value.field == field
    assert caught.value.message.startswith(f"{field}: ")
    assert not CalibrationSpec.objects.exists()


def test_a_conformal_spec_needs_no_score_field_or_thresholds(project, manager):
    spec = create(
        project, manager, method="conformal_set", selector="mode", thresholds=[], score_field=""
    )
    assert spec.thresholds == [] and spec.score_field == ""


def test_accepts_an_evaluator_score_of_the_project(project, manager, import_records):
    record = calibration_record(
        "q1", [calibration_candidate("a", evaluator=("hhem", "2.1", 0.8), selected=True)]
    )
    import_records([record])
    spec = create(project, manager, score_field="evaluator:hhem@2.1")
    assert spec.score_field == "evaluator:hhem@2.1"


def test_thresholds_may_be_typed_as_text(project, manager):
    spec = create(project, manager, thresholds="0.9, 0.7 0.5")
    assert spec.thresholds == [0.9, 0.7, 0.5]  # the declared order is kept


def test_the_name_is_unique_in_the_project(project, manager):
    create(project, manager)
    with pytest.raises(InvalidSpec) as caught:
        create(project, manager)
    assert caught.value.field == "name"


@pytest.mark.parametrize(
    ("role", "error"),
    [(Role.ANNOTATOR, PermissionDenied), (Role.ADJUDICATOR, PermissionDenied)],
)
def test_only_managers_write_specs(project, member, role, error):
    with pytest.raises(error):
        create(project, member(role))


def test_a_non_member_does_not_see_the_project(project):
    with pytest.raises(NotFound):
        create(project, UserFactory())


# -- the content hash --------------------------------------------------------------------------
def test_the_hash_covers_the_contract_and_not_the_name(project, manager):
    a = create(project, manager, name="a")
    b = create(project, manager, name="b")
    c = create(project, manager, name="c", alpha="0.10000000")
    d = create(project, manager, name="d", alpha="0.2")
    e = create(project, manager, name="e", thresholds=[0.9, 0.7, 0.5])
    assert a.content_sha256 == b.content_sha256 == c.content_sha256
    assert len({a.content_sha256, d.content_sha256, e.content_sha256}) == 3


def test_the_contract_is_canonical_json_primitives(project, manager):
    spec = create(project, manager, stopping_delta="0.05")
    content = spec_content(spec)
    assert content["alpha"] == "0.1" and content["stopping_delta"] == "0.05"
    assert content["report_confidence"] == "0.95"
    assert "name" not in content and "version" not in content


# -- immutability and versions -----------------------------------------------------------------
def _used(project, manager):
    calibration_project(
        project,
        {"calibration": [calibration_record("q1", [calibration_candidate("a", score=0.8)])]},
    )
    spec = make_spec(project, actor=manager)
    calibration_run_request(spec=spec, trigger="manual")
    return spec


def test_an_unused_spec_may_change_in_place(project, manager):
    spec = create(project, manager)
    before = spec.content_sha256
    updated = calibration_spec_update(spec=spec, actor=manager, alpha="0.2")
    assert updated.pk == spec.pk and updated.alpha == Decimal("0.2")
    assert updated.content_sha256 != before


def test_a_used_spec_refuses_edits(project, manager):
    spec = _used(project, manager)
    with pytest.raises(SpecFrozen):
        calibration_spec_update(spec=spec, actor=manager, alpha="0.2")
    spec.refresh_from_db()
    assert spec.alpha == Decimal("0.1")


def test_revising_makes_a_new_version_linked_to_the_old(project, manager):
    spec = _used(project, manager)
    new = calibration_spec_revise(spec=spec, actor=manager, alpha="0.2", thresholds=[0.6])
    assert (new.name, new.version, new.previous) == (spec.name, 2, spec)
    assert new.alpha == Decimal("0.2") and new.thresholds == [0.6]
    assert new.delta == spec.delta and new.score_field == spec.score_field  # kept
    spec.refresh_from_db()
    assert spec.alpha == Decimal("0.1")  # the old version never changes
    assert CalibrationRun.objects.filter(spec=new).count() == 0


def test_only_the_latest_version_can_be_revised(project, manager):
    spec = _used(project, manager)
    calibration_spec_revise(spec=spec, actor=manager, alpha="0.2")
    with pytest.raises(SpecFrozen):
        calibration_spec_revise(spec=spec, actor=manager, alpha="0.3")
    with pytest.raises(SpecFrozen):
        calibration_spec_update(spec=spec, actor=manager, alpha="0.3")


def test_a_revision_is_validated_like_a_new_spec(project, manager):
    spec = _used(project, manager)
    with pytest.raises(InvalidSpec) as caught:
        calibration_spec_revise(spec=spec, actor=manager, delta="1")
    assert caught.value.field == "delta"
    assert CalibrationSpec.objects.count() == 1


def test_adjudicators_cannot_revise(project, manager, member):
    spec = _used(project, manager)
    with pytest.raises(PermissionDenied):
        calibration_spec_revise(spec=spec, actor=member(Role.ADJUDICATOR), alpha="0.2")
