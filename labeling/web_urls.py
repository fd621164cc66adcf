"""HTML pages of the labelling side (login required; scoped by project membership)."""

from django.urls import path

from labeling import views
from labeling.views import account, reports

urlpatterns = [
    path("", views.project_list, name="project-list"),
    path("projects/new/", views.project_create_view, name="project-create"),
    path("account/", account.account, name="account"),
    path(
        "account/tokens/<int:token_id>/revoke/",
        account.account_token_revoke,
        name="account-token-revoke",
    ),
    path("p/<slug:slug>/", views.project_detail, name="project-detail"),
    path("p/<slug:slug>/items/", views.item_browse, name="item-list"),
    path("p/<slug:slug>/items/<int:item_id>/", views.item_detail, name="item-detail"),
    path("p/<slug:slug>/import/", views.import_create, name="import-create"),
    path("p/<slug:slug>/partition/", views.partition_freeze_view, name="partition-freeze"),
    path("p/<slug:slug>/policy/", views.project_policy, name="project-policy"),
    # annotators
    path("p/<slug:slug>/annotate/", views.annotate_next, name="annotate-next"),
    path("p/<slug:slug>/annotate/<int:assignment_id>/", views.annotate_form, name="annotate-form"),
    path(
        "p/<slug:slug>/annotate/<int:assignment_id>/skip/",
        views.annotate_skip,
        name="annotate-skip",
    ),
    path(
        "p/<slug:slug>/annotate/<int:assignment_id>/skip/undo/",
        views.annotate_skip_undo,
        name="annotate-skip-undo",
    ),
    path(
        "p/<slug:slug>/annotate/<int:assignment_id>/ahead/",
        views.annotate_ahead,
        name="annotate-ahead",
    ),
    path("p/<slug:slug>/my/", views.my_annotations, name="my-annotations"),
    # work reports: managers (everyone), annotators (their own figures)
    path("p/<slug:slug>/reports/work/", reports.work_report_page, name="work-report"),
    path(
        "p/<slug:slug>/reports/work/annotators.csv",
        reports.work_report_csv,
        name="work-report-csv",
    ),
    path("p/<slug:slug>/reports/work/items.csv", reports.work_items_csv, name="work-items-csv"),
    # adjudicators
    path("p/<slug:slug>/adjudicate/", views.adjudication_queue, name="adjudication-queue"),
    path(
        "p/<slug:slug>/adjudicate/<int:item_id>/",
        views.adjudication_item,
        name="adjudication-item",
    ),
    # managers
    path("p/<slug:slug>/settings/", views.project_settings, name="project-settings"),
    path(
        "p/<slug:slug>/settings/start/",
        views.project_labelling_start_view,
        name="project-labelling-start",
    ),
    path("p/<slug:slug>/members/", views.project_members, name="project-members"),
    path("p/<slug:slug>/gold/", views.gold_overview, name="gold-overview"),
    path(
        "p/<slug:slug>/items/<int:item_id>/gold/",
        views.gold_reference_view,
        name="gold-reference",
    ),
    path("p/<slug:slug>/policy/versions/", views.policy_versions, name="policy-versions"),
    # an account's own invitations (listed on the project list); the e-mailed join link
    path(
        "invitations/<int:invitation_id>/accept/",
        views.invitation_respond,
        {"answer": "accept"},
        name="invitation-accept",
    ),
    path(
        "invitations/<int:invitation_id>/decline/",
        views.invitation_respond,
        {"answer": "decline"},
        name="invitation-decline",
    ),
    path("accounts/join/<str:token>/", views.invitation_join_view, name="invitation-join"),
    path("p/<slug:slug>/jobs/", views.job_list_view, name="job-list"),
    path("p/<slug:slug>/jobs/<int:job_id>/", views.job_detail, name="job-detail"),
]
