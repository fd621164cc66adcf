"""The audit page with an active sample: the design choice and the saving shown."""

from __future__ import annotations

import pytest

from certification.models import AuditSample
from certification.services import audit_report_configure
from labeling.models import Role
from tests.certification.audit_helpers import scored_project

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification/audits"


@pytest.fixture
def scored(project, member):
    project, hhem = scored_project(project)
    audit_report_configure(
        project=project, evaluator=hhem, actor=member(Role.MANAGER), score_threshold=0.5
    )
    return project, hhem


def test_a_manager_draws_an_active_sample_and_reads_the_saving(scored, login):
    _, hhem = scored
    client = login("manager")
    form = client.get(f"{BASE}/{hhem.pk}/").content.decode()
    assert 'name="kind"' in form and 'name="floor"' in form
    response = client.post(
        f"{BASE}/{hhem.pk}/samples/", {"size": "12", "seed": "9", "kind": "active"}
    )
    assert response.status_code == 302
    sample = AuditSample.objects.get()
    assert sample.kind == "active"
    html = client.get(f"{BASE}/{hhem.pk}/").content.decode()
    assert 'id="active-error-rate"' in html and 'class="sample-kind">active<' in html
    saving = sample.evaluator.audit_report.result["active"]["estimate"]["saving"]
    assert f'id="active-saving">{round(saving * 100)}%' in html


def test_an_active_draw_with_a_slice_is_a_message(scored, login):
    _, hhem = scored
    response = login("manager").post(
        f"{BASE}/{hhem.pk}/samples/",
        {"size": "5", "seed": "1", "kind": "active", "slice_dimension": "domain"},
        follow=True,
    )
    assert response.status_code == 200
    assert "No sample drawn" in response.content.decode()
    assert not AuditSample.objects.exists()
