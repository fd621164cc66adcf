"""REST API routes of the labelling side (token or session auth; see labeling/api/catalog.py).

Catalogue endpoints are in ``catalog`` and ``items``, labelling work in ``work``, adjudication in
``adjudication``, a project's labelling settings, start and progress in ``labelling``. The agreement
report is routed by ``certification.api.urls`` (``labeling`` never imports ``certification``).
"""

from django.urls import path

from labeling.api import (
    account,
    adjudication,
    auth,
    catalog,
    gold,
    items,
    jobs,
    labelling,
    members,
    policies,
    policy_versions,
    reports,
    work,
)

P = "projects/<slug:slug>/"

urlpatterns = [
    path("auth/token/", auth.TokenObtainApi.as_view(), name="api-token"),
    path("account/tokens/", account.AccountTokenListApi.as_view(), name="api-account-tokens"),
    path(
        "account/tokens/<int:token_id>/",
        account.AccountTokenDetailApi.as_view(),
        name="api-account-token-detail",
    ),
    path("projects/", catalog.ProjectListApi.as_view(), name="api-project-list"),
    path(P, catalog.ProjectDetailApi.as_view(), name="api-project-detail"),
    path(f"{P}items/", items.ItemListApi.as_view(), name="api-item-list"),
    path(f"{P}items/<int:item_id>/", items.ItemDetailApi.as_view(), name="api-item-detail"),
    path(f"{P}imports/", catalog.ImportCreateApi.as_view(), name="api-import-create"),
    path(
        f"{P}evaluator-labels/",
        catalog.EvaluatorLabelImportApi.as_view(),
        name="api-evaluator-label-import",
    ),
    path(f"{P}partition/", catalog.PartitionFreezeApi.as_view(), name="api-partition-freeze"),
    path(f"{P}policy/", policies.ProjectPolicyApi.as_view(), name="api-policy"),
    path(f"{P}evaluators/", policies.EvaluatorListApi.as_view(), name="api-evaluator-list"),
    # Annotators
    path(
        f"{P}assignments/next/",
        work.AssignmentClaimNextApi.as_view(),
        name="api-assignment-next",
    ),
    path(
        f"{P}assignments/<int:assignment_id>/",
        work.AssignmentDetailApi.as_view(),
        name="api-assignment-detail",
    ),
    path(
        f"{P}assignments/<int:assignment_id>/annotation/",
        work.AnnotationSubmitApi.as_view(),
        name="api-annotation-submit",
    ),
    path(
        f"{P}assignments/<int:assignment_id>/skip/",
        work.AssignmentSkipApi.as_view(),
        name="api-assignment-skip",
    ),
    path(f"{P}annotations/", work.AnnotationListApi.as_view(), name="api-annotation-list"),
    # Adjudicators
    path(
        f"{P}disagreements/",
        adjudication.DisagreementListApi.as_view(),
        name="api-disagreement-list",
    ),
    path(
        f"{P}disagreements/<int:item_id>/",
        adjudication.DisagreementDetailApi.as_view(),
        name="api-disagreement-detail",
    ),
    path(
        f"{P}disagreements/<int:item_id>/resolve/",
        adjudication.AdjudicationResolveApi.as_view(),
        name="api-adjudication-resolve",
    ),
    path(
        f"{P}disagreements/<int:item_id>/unresolved/",
        adjudication.AdjudicationMarkUnresolvedApi.as_view(),
        name="api-adjudication-unresolved",
    ),
    path(f"{P}progress/", labelling.ProjectProgressApi.as_view(), name="api-progress"),
    # Managers
    path(f"{P}settings/", labelling.ProjectSettingsApi.as_view(), name="api-settings"),
    path(
        f"{P}policy/versions/",
        policy_versions.PolicyVersionListApi.as_view(),
        name="api-policy-versions",
    ),
    path(f"{P}labelling/start/", labelling.LabellingStartApi.as_view(), name="api-labelling-start"),
    path(f"{P}reports/work/", reports.WorkReportApi.as_view(), name="api-work-report"),
    path(
        f"{P}reports/work/items/",
        reports.WorkItemTimesApi.as_view(),
        name="api-work-report-items",
    ),
    path(f"{P}jobs/", jobs.JobListApi.as_view(), name="api-job-list"),
    path(f"{P}jobs/<int:job_id>/", jobs.JobDetailApi.as_view(), name="api-job-detail"),
    path(f"{P}gold/", gold.GoldItemListApi.as_view(), name="api-gold-items"),
    path(
        f"{P}items/<int:item_id>/gold/",
        gold.GoldReferenceApi.as_view(),
        name="api-gold-reference",
    ),
    path(
        f"{P}qualifications/",
        gold.QualificationListApi.as_view(),
        name="api-qualifications",
    ),
    path(
        f"{P}qualifications/<int:user_id>/decision/",
        gold.QualificationDecideApi.as_view(),
        name="api-qualification-decide",
    ),
    path(f"{P}members/", members.MemberListApi.as_view(), name="api-member-list"),
    path(
        f"{P}members/<int:user_id>/",
        members.MemberDetailApi.as_view(),
        name="api-member-update",
    ),
    path(f"{P}invitations/", members.InvitationListApi.as_view(), name="api-invitation-list"),
    path(
        f"{P}invitations/<int:invitation_id>/",
        members.InvitationDetailApi.as_view(),
        name="api-invitation-detail",
    ),
    # the requesting account's own invitations
    path("invitations/", members.OwnInvitationListApi.as_view(), name="api-own-invitation-list"),
    path(
        "invitations/<int:invitation_id>/accept/",
        members.OwnInvitationAcceptApi.as_view(),
        name="api-own-invitation-accept",
    ),
    path(
        "invitations/<int:invitation_id>/decline/",
        members.OwnInvitationDeclineApi.as_view(),
        name="api-own-invitation-decline",
    ),
]
