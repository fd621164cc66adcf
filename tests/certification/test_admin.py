"""Django admin of certification: every model registered, the reports view-only."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from certification.models import AgreementReport
from certification.services import agreement_recompute, reliability_recompute

pytestmark = pytest.mark.django_db


def test_every_certification_model_is_registered():
    models = apps.get_app_config("certification").get_models()
    assert [m.__name__ for m in models if not admin.site.is_registered(m)] == []


def test_agreement_report_pages_render_read_only(admin_client, project):
    report = agreement_recompute(project_id=project.pk)
    changelist = admin_client.get(reverse("admin:certification_agreementreport_changelist"))
    assert changelist.status_code == 200
    assert project.slug in changelist.content.decode()
    change = admin_client.get(
        reverse("admin:certification_agreementreport_change", args=[report.pk])
    )
    assert change.status_code == 200
    assert 'name="_save"' not in change.content.decode()
    add = admin_client.get(reverse("admin:certification_agreementreport_add"))
    assert add.status_code == 403
    assert AgreementReport.objects.count() == 1


def test_reliability_report_pages_render_read_only(admin_client, project):
    report = reliability_recompute(project_id=project.pk)
    changelist = admin_client.get(reverse("admin:certification_reliabilityreport_changelist"))
    assert changelist.status_code == 200
    assert project.slug in changelist.content.decode()
    change = admin_client.get(
        reverse("admin:certification_reliabilityreport_change", args=[report.pk])
    )
    assert change.status_code == 200
    assert 'name="_save"' not in change.content.decode()
    assert admin_client.get(reverse("admin:certification_reliabilityreport_add")).status_code == 403
