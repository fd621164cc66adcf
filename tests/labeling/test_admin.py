"""Django admin: every model is registered and renders; imported data is view-only."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from labeling.models import (
    Item,
    Job,
    JobKind,
    LabelPolicy,
    Membership,
    PeriodicRun,
    PriorAnnotation,
    Project,
    Role,
    SourceVersion,
)
from labeling.services import (
    AnnotationInput,
    ClaimInput,
    EvidenceInput,
    adjudication_resolve,
    annotation_submit,
    membership_set,
    project_create,
)
from labeling.services.gold import qualification_decide
from labeling.services.members import invitation_create
from labeling.services.sso import sso_sign_in
from labeling.services.tokens import api_token_create
from labeling.services.vote_tally import vote_tally_fold
from tests.conftest import import_native, module_data, native_record
from tests.factories import (
    WORK_SOURCE,
    AssignmentFactory,
    UserFactory,
    start_labelling,
    utf16_span,
    work_record,
)

pytestmark = pytest.mark.django_db

LABELING_MODELS = list(apps.get_app_config("labeling").get_models())
READ_ONLY = [
    "sourcedocument",
    "sourceversion",
    "retrievallink",
    "question",
    "candidateanswer",
    "claim",
    "item",
    "importbatch",
    "evaluator",
    "evaluatorlabel",
    "priorannotation",
    "priorclaimlabel",
    "priorevidence",
    "priorspan",
    "assignment",
    "annotation",
    "annotationrevision",
    "claimlabel",
    "evidencespan",
    "disagreement",
    "resolution",
    "resolvedclaimlabel",
    "resolvedevidence",
    "derivedchange",
    "invitation",
]


@pytest.fixture(scope="module")
def _rows_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """The rows of :func:`admin_client_with_data`, written once per module (``module_data`` in
    tests/conftest.py; each test runs in a savepoint rolled back after it). Their project is
    not ``study``, so that the tests making their own ``study`` project see them beside it."""
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(_rows)


@pytest.fixture
def admin_client_with_data(admin_client, _rows_once):
    """A superuser client and a project holding every kind of row."""
    return admin_client


def _rows():
    project = project_create(slug="admin-data", name="Admin data")
    record = native_record("q1")
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": "judge", "version": "1", "label": "admissible"}
    ]
    record["candidates"][0]["prior_annotations"] = [
        {
            "annotator": "a1",
            "claim_labels": [
                {
                    "claim": 0,
                    "label": "supported",
                    "evidence": [
                        {
                            "source": "doc-q1",
                            "start": 0,
                            "end": 26,
                            "quote": "The bridge opened in 1932.",
                        }
                    ],
                }
            ],
            "spans": [{"start": 0, "end": 2, "quote": "It", "labels": ["x"]}],
        }
    ]
    gold = work_record("q3")
    start = WORK_SOURCE.index("opened in 1932")
    gold["candidates"][1]["gold"] = {
        "answer_label": "inadmissible",
        "claim_labels": [
            {
                "claim": 0,
                "label": "contradicted",
                "evidence": [
                    {
                        "source": "doc-q3",
                        "start": start,
                        "end": start + 14,
                        "quote": "opened in 1932",
                    }
                ],
            }
        ],
    }
    import_native(project, [record, work_record("q2"), gold])
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    _label_and_adjudicate(project)
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    qualification_decide(project=project, annotator_id=annotator.pk, actor=manager, admit=True)
    Job.objects.create(project=project, kind=JobKind.WORKLOAD_IMPORT, message="import of x.jsonl")
    PeriodicRun.objects.create(name="work-recover", last_at=timezone.now())
    invitation_create(
        project=project, actor=None, invitee="new@example.org", role=Role.ANNOTATOR, site="http://x"
    )
    api_token_create(user=UserFactory(), name="admin page")
    sso_sign_in(claims={"iss": "https://idp.example.org", "sub": "admin-page", "email": "x"})


def _label_and_adjudicate(project):
    """Two annotators disagree on one item, then an adjudicator resolves it (every work row).

    The vote tally is counted first, so the votes leave their counted rows and a change.
    """
    start_labelling(project, overlap=2)
    vote_tally_fold(project=project)
    item = Item.objects.get(candidate__question__external_id="q2", candidate__key="c1")
    claim = item.candidate.claims.get()
    start, end = utf16_span(WORK_SOURCE, "opened in 1932")
    version = SourceVersion.objects.get(document__key="doc-q2")
    evidence = (EvidenceInput(version.pk, start, end, "opened in 1932"),)
    for label in ("contradicted", "supported"):
        annotator = UserFactory()
        membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
        assignment = AssignmentFactory(item=item, annotator=annotator)
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=annotator,
            data=AnnotationInput(
                answer_label="inadmissible",
                claims=(ClaimInput(claim.pk, label, evidence=evidence),),
            ),
        )
    adjudicator = UserFactory()
    membership_set(project=project, user=adjudicator, role=Role.ADJUDICATOR)
    item.refresh_from_db()
    adjudication_resolve(
        project=project,
        item_id=item.pk,
        actor=adjudicator,
        expected_version=item.version,
        answer_label="inadmissible",
        claims=(ClaimInput(claim.pk, "contradicted", evidence=evidence),),
        rationale="The source says 1932.",
    )


def test_every_labeling_model_is_registered():
    assert [m.__name__ for m in LABELING_MODELS if not admin.site.is_registered(m)] == []


@pytest.mark.parametrize("model", LABELING_MODELS, ids=lambda m: m.__name__)
def test_changelist_search_and_change_page_render(admin_client_with_data, model):
    # given one row of the model
    obj = model.objects.first()
    assert obj is not None, f"no {model.__name__} row in the test data"
    app, name = model._meta.app_label, model._meta.model_name

    # when a superuser opens the list (with a search) and the row
    listing = admin_client_with_data.get(reverse(f"admin:{app}_{name}_changelist"), {"q": "x"})
    page = admin_client_with_data.get(reverse(f"admin:{app}_{name}_change", args=[obj.pk]))

    # then both render
    assert listing.status_code == 200
    assert page.status_code == 200


@pytest.mark.parametrize("model_name", READ_ONLY)
def test_imported_data_is_view_only(admin_client_with_data, model_name):
    model = apps.get_model("labeling", model_name)
    obj = model.objects.first()
    model_admin = admin.site._registry[model]
    request = admin_client_with_data.get("/admin/").wsgi_request

    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, obj)
    assert not model_admin.has_delete_permission(request, obj)
    delete_url = reverse(f"admin:labeling_{model_name}_delete", args=[obj.pk])
    assert admin_client_with_data.post(delete_url, {"post": "yes"}).status_code == 403
    assert model.objects.filter(pk=obj.pk).exists()


def test_source_version_cannot_be_edited_through_the_admin(admin_client_with_data):
    version = SourceVersion.objects.get(document__key="doc-q1")
    url = reverse("admin:labeling_sourceversion_change", args=[version.pk])

    page = admin_client_with_data.get(url)
    response = admin_client_with_data.post(url, {"text": "changed", "sha256": "0" * 64})

    assert b'name="text"' not in page.content
    assert response.status_code == 403
    version.refresh_from_db()
    assert version.text == "The bridge opened in 1932. It spans the harbour."


def test_prior_annotation_add_page_is_refused(admin_client_with_data):
    assert PriorAnnotation.objects.exists()

    response = admin_client_with_data.get(reverse("admin:labeling_priorannotation_add"))

    assert response.status_code == 403


def test_adding_a_project_in_the_admin_creates_policy_v1(admin_client):
    response = admin_client.post(
        reverse("admin:labeling_project_add"),
        {
            "slug": "fresh",
            "name": "Fresh",
            "description": "",
            "overlap": 3,
            "lease_minutes": 30,
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    project = Project.objects.get(slug="fresh")
    assert project.overlap == 3
    versions = LabelPolicy.objects.filter(project=project).values_list("version", flat=True)
    assert list(versions) == [1]


def test_frozen_policy_cannot_be_changed(admin_client, project):
    from django.utils import timezone

    policy = project.policies.get()
    policy.frozen_at = timezone.now()
    policy.save()
    request = admin_client.get("/admin/").wsgi_request

    assert not admin.site._registry[LabelPolicy].has_change_permission(request, policy)


def test_membership_can_be_added_in_the_admin(admin_client, project):
    user = UserFactory()

    response = admin_client.post(
        reverse("admin:labeling_membership_add"),
        {"project": project.pk, "user": user.pk, "role": Role.ADJUDICATOR, "is_active": "on"},
    )

    assert response.status_code == 302
    membership = Membership.objects.get(user=user)
    assert (membership.role, membership.is_active) == (Role.ADJUDICATOR, True)


def _manager_membership(project):
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    return Membership.objects.get(user=manager)


@pytest.mark.parametrize(
    "change", [{"role": Role.ANNOTATOR, "is_active": "on"}, {"role": Role.MANAGER}]
)
def test_the_admin_refuses_to_demote_or_deactivate_the_last_manager(admin_client, project, change):
    membership = _manager_membership(project)

    response = admin_client.post(
        reverse("admin:labeling_membership_change", args=[membership.pk]), change
    )

    assert response.status_code == 200  # the form again, with the error
    assert b"last active manager" in response.content
    membership.refresh_from_db()
    assert (membership.role, membership.is_active) == (Role.MANAGER, True)


def test_the_admin_refuses_to_remove_the_last_manager(admin_client, project):
    membership = _manager_membership(project)
    url = reverse("admin:labeling_membership_delete", args=[membership.pk])

    page = admin_client.get(url)
    posted = admin_client.post(url, {"post": "yes"})
    bulk = admin_client.post(
        reverse("admin:labeling_membership_changelist"),
        {"action": "delete_selected", "_selected_action": [membership.pk], "post": "yes"},
    )

    assert (page.status_code, posted.status_code) == (403, 403)
    assert bulk.status_code in (200, 302)  # no such action: nothing is deleted
    assert Membership.objects.filter(pk=membership.pk).exists()


def test_admin_changes_go_through_the_services(admin_client, project):
    keeper = _manager_membership(project)
    other = _manager_membership(project)
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    annotator_membership = Membership.objects.get(user=annotator)

    demoted = admin_client.post(
        reverse("admin:labeling_membership_change", args=[other.pk]),
        {"role": Role.ADJUDICATOR, "is_active": "on"},
    )
    deactivated = admin_client.post(
        reverse("admin:labeling_membership_change", args=[annotator_membership.pk]),
        {"role": Role.ANNOTATOR},
    )
    removed = admin_client.post(
        reverse("admin:labeling_membership_delete", args=[other.pk]), {"post": "yes"}
    )

    assert (demoted.status_code, deactivated.status_code, removed.status_code) == (302, 302, 302)
    assert not Membership.objects.filter(pk=other.pk).exists()
    assert Membership.objects.get(pk=annotator_membership.pk).is_active is False
    assert Membership.objects.get(pk=keeper.pk).role == Role.MANAGER


def test_the_project_page_shows_members_read_only(admin_client, project):
    _manager_membership(project)

    page = admin_client.get(reverse("admin:labeling_project_change", args=[project.pk]))

    assert page.status_code == 200
    assert b"memberships-0-role" not in page.content  # no editable role in the inline


def test_the_admin_refuses_to_delete_the_account_of_a_projects_last_manager(admin_client, project):
    membership = _manager_membership(project)
    url = reverse("admin:auth_user_delete", args=[membership.user_id])

    refused = admin_client.post(url, {"post": "yes"})
    _manager_membership(project)  # a second manager: the first may go
    allowed = admin_client.post(url, {"post": "yes"})

    assert refused.status_code == 403
    assert allowed.status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
