"""HTML pages of the labelling side: thin adapters over selectors and services.

Each view resolves the project for the user (a non-member gets 404) and checks the role with
``common.project_for`` before reading a form (the check the services repeat), calls one
selector or service and renders or redirects. Domain errors become messages or form
errors on the page, with the user's input kept. Every page needs a login.

Modules: ``catalog`` (project list, dashboard, item browser, import, partition), ``annotate``
(next item, labelling form, skip, own annotations), ``adjudicate`` (queue, side-by-side),
``manage`` (settings, start); ``gold`` (gold references, qualification); ``members``
(members, invitations, join, password reset);
``projects`` (new project, label policy); ``policy_versions`` (publishing a label policy version
after labelling started); ``labels`` holds the form model shared by the labelling and
adjudication pages; ``panels`` lets other apps add dashboard panels; ``health`` answers the
probes of load balancers and supervisors (``/health/live``, ``/health/ready``: no login).
"""

from labeling.views.adjudicate import adjudication_item, adjudication_queue
from labeling.views.annotate import (
    annotate_ahead,
    annotate_form,
    annotate_next,
    annotate_skip,
    annotate_skip_undo,
    my_annotations,
)
from labeling.views.catalog import (
    Segment,
    answer_segments,
    import_create,
    item_browse,
    item_detail,
    partition_freeze_view,
    project_detail,
    project_list,
)
from labeling.views.gold import gold_overview, gold_reference_view
from labeling.views.jobs import job_detail, job_list_view
from labeling.views.manage import project_labelling_start_view, project_settings
from labeling.views.members import (
    invitation_join_view,
    invitation_respond,
    project_members,
)
from labeling.views.policy_versions import policy_versions
from labeling.views.projects import project_create_view, project_policy

__all__ = [
    "Segment",
    "adjudication_item",
    "adjudication_queue",
    "annotate_ahead",
    "annotate_form",
    "annotate_next",
    "annotate_skip",
    "annotate_skip_undo",
    "gold_overview",
    "gold_reference_view",
    "answer_segments",
    "import_create",
    "invitation_join_view",
    "invitation_respond",
    "item_browse",
    "item_detail",
    "job_detail",
    "policy_versions",
    "job_list_view",
    "my_annotations",
    "partition_freeze_view",
    "project_detail",
    "project_create_view",
    "project_labelling_start_view",
    "project_list",
    "project_members",
    "project_policy",
    "project_settings",
]
