"""Every mutating service that takes an ``actor`` refuses a wrong role itself, without HTTP.

The adapters check the same role sets before they validate a body (403 before 400), but the
services must not rely on them: a new caller (a view, a task, a script) gets the refusal too.
Each service is called directly, as each role of the project and as a non-member, with
arguments the role check comes before; nothing may be written. ``actor=None`` is the command
line: allowed.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from certification.models import CalibrationSpec, Release
from certification.services import (
    audit_report_configure,
    audit_sample_draw,
    calibration_run_start,
    calibration_spec_create,
    calibration_spec_revise,
    calibration_spec_update,
)
from certification.services.releases.freeze import release_freeze, release_rebuild, release_tag_move
from labeling import permissions
from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import Evaluator, Project, Question, Role
from labeling.services import (
    adjudication_mark_unresolved,
    adjudication_resolve,
    assignment_skip,
    evaluator_labels_import,
    item_claim_next,
    items_bulk_prioritise,
    items_return_to_queue,
    partition_freeze,
    project_labelling_configure,
    project_labelling_start,
    workload_import,
    workload_import_file,
)
from labeling.services.imports import workload_import_directory
from labeling.services.members import (
    invitation_create,
    invitation_revoke,
    membership_change,
    membership_deactivate,
    membership_reactivate,
    membership_remove,
)
from tests.conftest import native_record, row_counts
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PROPORTIONS = {"dev": 0.2, "calibration": 0.4, "test": 0.4}
Call = Callable[[Project, Any], object]


def _evaluator(project: Project) -> Evaluator:
    return Evaluator(project=project, name="judge", version="v1")


# (service, the roles it allows, a call of it by ``actor`` in ``project``)
SERVICES: list[tuple[str, frozenset[str], Call]] = [
    (
        "workload_import",
        permissions.MANAGERS,
        lambda p, a: workload_import(
            project=p, records=[], format="native", filename="x", file_sha256="0" * 64, actor=a
        ),
    ),
    (
        "workload_import_file",
        permissions.MANAGERS,
        lambda p, a: workload_import_file(
            project=p, stream=io.BytesIO(b""), format_name="native", filename="x", actor=a
        ),
    ),
    (
        "workload_import_directory",
        permissions.MANAGERS,
        lambda p, a: workload_import_directory(
            project=p, directory=Path("."), format_name="release", actor=a
        ),
    ),
    (
        "evaluator_labels_import",
        permissions.MANAGERS,
        lambda p, a: evaluator_labels_import(project=p, records=[], actor=a, filename="x"),
    ),
    (
        "items_bulk_prioritise",
        permissions.MANAGERS,
        lambda p, a: items_bulk_prioritise(project=p, actor=a, item_ids=[1]),
    ),
    (
        "items_return_to_queue",
        permissions.MANAGERS,
        lambda p, a: items_return_to_queue(project=p, actor=a, item_ids=[1]),
    ),
    (
        "partition_freeze",
        permissions.MANAGERS,
        lambda p, a: partition_freeze(project=p, proportions=PROPORTIONS, seed=1, actor=a),
    ),
    (
        "project_labelling_configure",
        permissions.MANAGERS,
        lambda p, a: project_labelling_configure(project=p, actor=a, overlap=3),
    ),
    (
        "project_labelling_start",
        permissions.MANAGERS,
        lambda p, a: project_labelling_start(project=p, actor=a),
    ),
    (
        "invitation_create",
        permissions.MANAGERS,
        lambda p, a: invitation_create(
            project=p, actor=a, invitee="new", role=Role.ANNOTATOR, site="http://testserver"
        ),
    ),
    (
        "invitation_revoke",
        permissions.MANAGERS,
        lambda p, a: invitation_revoke(project=p, actor=a, invitation_id=1),
    ),
    (
        "membership_deactivate",
        permissions.MANAGERS,
        lambda p, a: membership_deactivate(project=p, actor=a, user_id=a.pk),
    ),
    (
        "membership_reactivate",
        permissions.MANAGERS,
        lambda p, a: membership_reactivate(project=p, actor=a, user_id=a.pk),
    ),
    (
        "membership_remove",
        permissions.MANAGERS,
        lambda p, a: membership_remove(project=p, actor=a, user_id=a.pk),
    ),
    (
        "membership_change",
        permissions.MANAGERS,
        lambda p, a: membership_change(project=p, actor=a, user_id=a.pk, role=Role.MANAGER),
    ),
    (
        "item_claim_next",
        permissions.ANNOTATORS,
        lambda p, a: item_claim_next(project=p, actor=a),
    ),
    (
        "assignment_skip",
        permissions.ANNOTATORS,
        lambda p, a: assignment_skip(project=p, assignment_id=1, actor=a, reason="other"),
    ),
    (
        "adjudication_resolve",
        permissions.REVIEWERS,
        lambda p, a: adjudication_resolve(
            project=p,
            item_id=1,
            actor=a,
            expected_version=0,
            answer_label="admissible",
            claims=[],
            rationale="r",
        ),
    ),
    (
        "adjudication_mark_unresolved",
        permissions.REVIEWERS,
        lambda p, a: adjudication_mark_unresolved(
            project=p, item_id=1, actor=a, expected_version=0, reason="other", rationale="r"
        ),
    ),
    (
        "calibration_spec_create",
        permissions.MANAGERS,
        lambda p, a: calibration_spec_create(project=p, actor=a, name="main"),
    ),
    (
        "calibration_spec_update",
        permissions.MANAGERS,
        lambda p, a: calibration_spec_update(spec=CalibrationSpec(project=p), actor=a),
    ),
    (
        "calibration_spec_revise",
        permissions.MANAGERS,
        lambda p, a: calibration_spec_revise(spec=CalibrationSpec(project=p), actor=a),
    ),
    (
        "calibration_run_start",
        permissions.MANAGERS,
        lambda p, a: calibration_run_start(spec=CalibrationSpec(project=p), actor=a),
    ),
    (
        "audit_report_configure",
        permissions.MANAGERS,
        lambda p, a: audit_report_configure(project=p, evaluator=_evaluator(p), actor=a),
    ),
    (
        "audit_sample_draw",
        permissions.MANAGERS,
        lambda p, a: audit_sample_draw(project=p, evaluator=_evaluator(p), actor=a, size=1, seed=1),
    ),
    (
        "release_freeze",
        permissions.MANAGERS,
        lambda p, a: release_freeze(project=p, actor=a, version="1"),
    ),
    (
        "release_rebuild",
        permissions.MANAGERS,
        lambda p, a: release_rebuild(release=Release(project=p), actor=a),
    ),
    (
        "release_tag_move",
        permissions.MANAGERS,
        lambda p, a: release_tag_move(
            project=p, actor=a, name="stable", release=Release(project=p)
        ),
    ),
]
REFUSALS = [
    pytest.param(call, role, id=f"{name}-{role}")
    for name, allowed, call in SERVICES
    for role in Role.values
    if role not in allowed
]


@pytest.mark.parametrize(("call", "role"), REFUSALS)
def test_the_service_refuses_a_member_of_another_role(project, member, call, role):
    # given a member of the project whose role the service does not allow
    actor = member(role)
    before = row_counts()
    # when they call the service directly
    with pytest.raises(PermissionDenied, match="only .* may "):
        call(project, actor)
    # then it refused them itself, and wrote nothing
    assert row_counts() == before


@pytest.mark.parametrize("call", [pytest.param(c, id=n) for n, _, c in SERVICES])
def test_the_service_refuses_a_non_member(project, call):
    # given a user of no role in the project (the adapters answer 404 before any service)
    outsider = UserFactory()
    before = row_counts()
    # when they call the service directly, it refuses them and writes nothing
    with pytest.raises((NotFound, PermissionDenied)):
        call(project, outsider)
    assert row_counts() == before


def test_every_role_set_service_is_listed():
    # guards the table: each role set is exercised by some service, each role refused somewhere
    assert {allowed for _, allowed, _ in SERVICES} == {
        permissions.MANAGERS,
        permissions.ANNOTATORS,
        permissions.REVIEWERS,
    }
    assert {role for _, role in (p.values for p in REFUSALS)} == set(Role.values)


@pytest.mark.parametrize("actor", ["manager", "command line"])
def test_a_manager_and_the_command_line_import_and_freeze(project, member, actor):
    # given a project with questions, and a manager or the command line (actor None)
    user = member(Role.MANAGER) if actor == "manager" else None
    record = native_record("q1")
    data = (json.dumps(record) + "\n").encode()
    # when they import a workload file and freeze the partition
    result = workload_import_file(
        project=project, stream=io.BytesIO(data), format_name="native", filename="w", actor=user
    )
    frozen = partition_freeze(project=project, proportions=PROPORTIONS, seed=7, actor=user)
    # then both went through the services' own role check
    assert result.batch is not None
    assert sum(frozen.questions.values()) == Question.objects.filter(project=project).count()
