"""Permission matrix over every endpoint and role, generated from the URL configuration.

Every URL pattern of the application (REST API and HTML pages) is collected by walking
``django.urls.get_resolver()`` (``tests/worlds.py``); a few third-party trees are skipped, each
with its reason (``SKIPPED_PREFIXES``, ``SKIPPED_NAMES``). Path parameters are filled from a
world (``tests/worlds.py``) with items in every state, and each (URL, method, role) is requested
with roles annotator, adjudicator, manager, member of another project and anonymous; the status
must equal the one in ``EXPECTED``, an explicit table keyed by URL name. A URL name missing from
the table fails ("new endpoint not covered"), so a new endpoint cannot go untested.

Also, for every URL with an object id: the id of the same kind of object in *another* project
answers 404 to every role that may use the endpoint; HEAD answers a manager and an anonymous
visitor as GET does, with no body; and every method the table does not list answers 405 to a
manager.

Each request runs in a savepoint that is rolled back, so the roles see the same world. The world
is built once per module (fixture ``world`` of tests/conftest.py); each test runs in a savepoint
of its own, rolled back after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.shortcuts import resolve_url
from django.test import Client
from django.urls import get_resolver
from rest_framework.test import APIClient

from labeling.services.tokens import api_token_create
from tests.conftest import jsonl_bytes, native_record
from tests.worlds import (
    Route,
    World,
    app_routes,
    claim_ids,
    token_for,
    url_for,
    walk_urlconf,
)

ROLES = ("annotator", "adjudicator", "manager", "other_member", "anonymous")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
LOGIN = "login"  # a 302 redirect to settings.LOGIN_URL

# Per URL name and method: status for (annotator, adjudicator, manager, other_member, anonymous).
# API: anonymous is 401 (token auth answers with WWW-Authenticate); pages: 302 to the login.
EXPECTED: dict[str, dict[str, tuple[int | str, ...]]] = {
    # the token endpoint takes credentials in the body, not a session or token: none is 400
    "api-token": {"POST": (400, 400, 400, 400, 400)},
    # the signed-in user's own API tokens: every signed-in user lists and makes their own; the
    # token in the URL is the manager's, so anyone else's revocation is 404 (not theirs)
    "api-account-tokens": {"GET": (200, 200, 200, 200, 401), "POST": (201, 201, 201, 201, 401)},
    "api-account-token-detail": {"DELETE": (404, 404, 204, 404, 401)},
    # --- REST API: catalogue ------------------------------------------------------------------
    # creating a project: staff, labeling.add_project or the setting; no member of the world
    "api-project-list": {"GET": (200, 200, 200, 200, 401), "POST": (403, 403, 403, 403, 401)},
    "api-project-detail": {"GET": (200, 200, 200, 404, 401)},
    "api-item-list": {"GET": (403, 200, 200, 404, 401)},
    "api-item-detail": {"GET": (403, 200, 200, 404, 401)},
    "api-import-create": {"POST": (403, 403, 201, 404, 401)},
    # evaluator labels as their own import: a new judge version's label, managers only
    "api-evaluator-label-import": {"POST": (403, 403, 201, 404, 401)},
    # labelling has started in the world: the partition can no longer be frozen (409)
    "api-partition-freeze": {"POST": (403, 403, 409, 404, 401)},
    # every member reads the label policy; labelling has started: the manager's edit is 409
    "api-policy": {"GET": (200, 200, 200, 404, 401), "PUT": (403, 403, 409, 404, 401)},
    "api-evaluator-list": {"GET": (403, 200, 200, 404, 401)},
    # --- REST API: annotators -----------------------------------------------------------------
    # adjudicators and managers hold no assignment: the id is not theirs (404) or, where the
    # service checks the role first, the operation is refused (403)
    "api-assignment-next": {"POST": (200, 403, 403, 404, 401)},
    "api-assignment-detail": {"GET": (200, 404, 404, 404, 401)},
    "api-annotation-submit": {"PUT": (200, 404, 404, 404, 401)},
    "api-assignment-skip": {"POST": (200, 403, 403, 404, 401)},
    "api-annotation-list": {"GET": (200, 200, 200, 404, 401)},
    # --- REST API: adjudicators ---------------------------------------------------------------
    "api-disagreement-list": {"GET": (403, 200, 200, 404, 401)},
    "api-disagreement-detail": {"GET": (403, 200, 200, 404, 401)},
    "api-adjudication-resolve": {"POST": (403, 201, 201, 404, 401)},
    "api-adjudication-unresolved": {"POST": (403, 201, 201, 404, 401)},
    "api-progress": {"GET": (403, 200, 200, 404, 401)},
    "api-agreement": {"GET": (403, 200, 200, 404, 401)},
    # derived results: freshness read by reviewers; a recomputation requested by managers (202)
    "api-derived-freshness": {"GET": (403, 200, 200, 404, 401)},
    "api-agreement-recompute": {"POST": (403, 403, 202, 404, 401)},
    "api-calibration-recompute": {"POST": (403, 403, 202, 404, 401)},
    "api-audit-recompute": {"POST": (403, 403, 202, 404, 401)},
    # per-person reliability names and judges people: managers only
    "api-reliability": {"GET": (403, 403, 200, 404, 401)},
    "api-reliability-recompute": {"POST": (403, 403, 202, 404, 401)},
    # --- REST API: calibration; the world's spec is used by a run: PATCH is 409 ---------------
    "api-calibration-spec-list": {
        "GET": (403, 200, 200, 404, 401),
        "POST": (403, 403, 201, 404, 401),
    },
    "api-calibration-spec-detail": {
        "GET": (403, 200, 200, 404, 401),
        "PATCH": (403, 403, 409, 404, 401),
    },
    "api-calibration-spec-revise": {"POST": (403, 403, 201, 404, 401)},
    # applying a done run's certificate writes nothing: reviewers, as they read the run; the
    # world's run has no conformal threshold (no resolved calibration question): 409
    "api-calibration-run-apply": {"POST": (403, 409, 409, 404, 401)},
    # the label budget plan is read like the spec: reviewers and managers
    "api-calibration-spec-plan": {"GET": (403, 200, 200, 404, 401)},
    "api-calibration-run-list": {
        "GET": (403, 200, 200, 404, 401),
        "POST": (403, 403, 202, 404, 401),
    },
    "api-calibration-run-detail": {"GET": (403, 200, 200, 404, 401)},
    # --- REST API: managers -------------------------------------------------------------------
    "api-settings": {"GET": (403, 403, 200, 404, 401), "PATCH": (403, 403, 200, 404, 401)},
    # labelling has started in the world: the manager's second start is a conflict
    "api-labelling-start": {"POST": (403, 403, 409, 404, 401)},
    "api-member-list": {"GET": (403, 403, 200, 404, 401)},
    "api-member-update": {
        "PATCH": (403, 403, 200, 404, 401),
        "DELETE": (403, 403, 204, 404, 401),
    },
    "api-invitation-list": {
        "GET": (403, 403, 200, 404, 401),
        "POST": (403, 403, 201, 404, 401),
    },
    "api-invitation-detail": {"DELETE": (403, 403, 204, 404, 401)},
    # an account's own invitations: the world's is addressed to other_member; anyone else's
    # answers 404 (it does not exist for them)
    "api-own-invitation-list": {"GET": (200, 200, 200, 200, 401)},
    "api-own-invitation-accept": {"POST": (404, 404, 404, 200, 401)},
    "api-own-invitation-decline": {"POST": (404, 404, 404, 204, 401)},
    # work reports: managers read everyone's figures, annotators their own (scoped, not
    # refused); adjudicators have none to read
    "api-work-report": {"GET": (200, 403, 200, 404, 401)},
    "api-work-report-items": {"GET": (200, 403, 200, 404, 401)},
    # label policy versions: managers only (the POST of the matrix is a dry run: 200)
    "api-policy-versions": {"GET": (403, 403, 200, 404, 401), "POST": (403, 403, 200, 404, 401)},
    # gold items and qualification: managers only (the reference and which items are gold are
    # their secrets); the world's gold item gets the same reference again (200, nothing written)
    "api-gold-items": {"GET": (403, 403, 200, 404, 401)},
    "api-gold-reference": {"GET": (403, 403, 200, 404, 401), "PUT": (403, 403, 200, 404, 401)},
    "api-qualifications": {"GET": (403, 403, 200, 404, 401)},
    "api-qualification-decide": {"POST": (403, 403, 200, 404, 401)},
    # background jobs (large imports, starting labelling on a large project): managers only
    "api-job-list": {"GET": (403, 403, 200, 404, 401)},
    "api-job-detail": {"GET": (403, 403, 200, 404, 401)},
    # --- health probes: anyone, no login, GET and HEAD only (labeling/views/health.py) ---------
    "health-live": {"GET": (200, 200, 200, 200, 200)},
    "health-ready": {"GET": (200, 200, 200, 200, 200)},
    # --- HTML pages ---------------------------------------------------------------------------
    # "My account": the user's own tokens (a POST makes one and shows its secret on the page)
    "account": {"GET": (200, 200, 200, 200, LOGIN), "POST": (200, 200, 200, 200, LOGIN)},
    "account-token-revoke": {"POST": (404, 404, 302, 404, LOGIN)},
    "project-list": {"GET": (200, 200, 200, 200, LOGIN)},
    # no member of the world may create projects (staff, labeling.add_project or the setting)
    "project-create": {"GET": (403, 403, 403, 403, LOGIN), "POST": (403, 403, 403, 403, LOGIN)},
    # every member reads the policy; labelling has started: the manager's save is 409
    "project-policy": {"GET": (200, 200, 200, 404, LOGIN), "POST": (403, 403, 409, 404, LOGIN)},
    "project-detail": {"GET": (200, 200, 200, 404, LOGIN)},
    # bulk actions (prioritise, return to the queue): managers only; 302 back to the list
    "item-list": {"GET": (404, 200, 200, 404, LOGIN), "POST": (404, 403, 302, 404, LOGIN)},
    "item-detail": {"GET": (404, 200, 200, 404, LOGIN)},
    "import-create": {"GET": (403, 403, 200, 404, LOGIN), "POST": (403, 403, 302, 404, LOGIN)},
    # (the refused freeze re-renders the form with the error: 400)
    "partition-freeze": {"GET": (403, 403, 200, 404, LOGIN), "POST": (403, 403, 400, 404, LOGIN)},
    "annotate-next": {"GET": (200, 403, 403, 404, LOGIN), "POST": (302, 403, 403, 404, LOGIN)},
    "annotate-form": {"GET": (200, 403, 403, 404, LOGIN), "POST": (302, 403, 403, 404, LOGIN)},
    "annotate-skip": {"GET": (200, 403, 403, 404, LOGIN), "POST": (302, 403, 403, 404, LOGIN)},
    # the annotator's leased assignment is not skipped: the undo is refused (409)
    "annotate-skip-undo": {"POST": (409, 403, 403, 404, LOGIN)},
    # the annotator's leased assignment is their current item: the next one is reserved (200)
    "annotate-ahead": {"POST": (200, 403, 403, 404, LOGIN)},
    "my-annotations": {"GET": (200, 200, 200, 404, LOGIN)},
    # the pages hide adjudication from annotators (404); the API refuses it (403)
    "adjudication-queue": {"GET": (404, 200, 200, 404, LOGIN)},
    "adjudication-item": {"GET": (404, 200, 200, 404, LOGIN), "POST": (404, 302, 302, 404, LOGIN)},
    "project-settings": {"GET": (403, 403, 200, 404, LOGIN), "POST": (403, 403, 302, 404, LOGIN)},
    "project-labelling-start": {"POST": (403, 403, 302, 404, LOGIN)},
    "project-members": {"GET": (403, 403, 200, 404, LOGIN), "POST": (403, 403, 302, 404, LOGIN)},
    # gold pages do not exist for anyone but managers (404)
    "gold-overview": {"GET": (404, 404, 200, 404, LOGIN), "POST": (404, 404, 302, 404, LOGIN)},
    "gold-reference": {"GET": (404, 404, 200, 404, LOGIN), "POST": (404, 404, 302, 404, LOGIN)},
    # the POST previews the next version (nothing written): the page with the diff
    "policy-versions": {"GET": (403, 403, 200, 404, LOGIN), "POST": (403, 403, 200, 404, LOGIN)},
    "invitation-accept": {"POST": (404, 404, 404, 302, LOGIN)},
    "invitation-decline": {"POST": (404, 404, 404, 302, LOGIN)},
    "job-list": {"GET": (403, 403, 200, 404, LOGIN)},
    "work-report": {"GET": (200, 403, 200, 404, LOGIN)},
    "work-report-csv": {"GET": (200, 403, 200, 404, LOGIN)},
    "work-items-csv": {"GET": (200, 403, 200, 404, LOGIN)},
    "job-detail": {"GET": (403, 403, 200, 404, LOGIN)},
    # calibration pages do not exist for annotators (404); adjudicators read only (403 on writes)
    "calibration-home": {"GET": (404, 200, 200, 404, LOGIN)},
    "calibration-spec-new": {
        "GET": (404, 403, 200, 404, LOGIN),
        "POST": (404, 403, 302, 404, LOGIN),
    },
    "calibration-spec-detail": {"GET": (404, 200, 200, 404, LOGIN)},
    "calibration-spec-revise": {
        "GET": (404, 403, 200, 404, LOGIN),
        "POST": (404, 403, 302, 404, LOGIN),
    },
    "calibration-run-start": {"POST": (404, 403, 302, 404, LOGIN)},
    "calibration-run-detail": {"GET": (404, 200, 200, 404, LOGIN)},
    "calibration-run-decisions-csv": {"GET": (404, 200, 200, 404, LOGIN)},
    "calibration-run-decisions-json": {"GET": (404, 200, 200, 404, LOGIN)},
    # a recomputation requested from a page: managers only, then back to the page (302)
    "agreement-recompute": {"POST": (404, 403, 302, 404, LOGIN)},
    "calibration-recompute": {"POST": (404, 403, 302, 404, LOGIN)},
    "audit-recompute": {"POST": (404, 403, 302, 404, LOGIN)},
    "reliability-recompute": {"POST": (404, 403, 302, 404, LOGIN)},
    # per-person reliability: managers only (adjudicators 403; annotators 404, as every
    # certification page)
    "reliability": {"GET": (404, 403, 200, 404, LOGIN)},
    # evaluator audits: evaluator labels never reach annotators (404 on pages)
    "audit-list": {"GET": (404, 200, 200, 404, LOGIN)},
    "audit-detail": {
        "GET": (404, 200, 200, 404, LOGIN),
        "POST": (404, 403, 302, 404, LOGIN),
    },
    "audit-disagreements-csv": {"GET": (404, 200, 200, 404, LOGIN)},
    "audit-sample-draw": {"POST": (404, 403, 302, 404, LOGIN)},
    "audit-target": {"POST": (404, 403, 302, 404, LOGIN)},
    "api-audit-target": {"POST": (403, 403, 200, 404, 401)},
    "api-audit-sample-list": {
        "GET": (403, 200, 200, 404, 401),
        "POST": (403, 403, 201, 404, 401),
    },
    "api-audit-detail": {
        "GET": (403, 200, 200, 404, 401),
        "POST": (403, 403, 200, 404, 401),
    },
    # releases: a release holds everybody's labels; annotators never reach it (pages
    # 404, API 403); adjudicators see the list and details, only managers download (the files
    # hold pending items' evaluator labels and votes), freeze, rebuild and move tags.
    # Releases are immutable: no PUT, PATCH or DELETE anywhere (405, checked below).
    "release-list": {"GET": (404, 200, 200, 404, LOGIN), "POST": (404, 403, 302, 404, LOGIN)},
    "release-detail": {"GET": (404, 200, 200, 404, LOGIN)},
    "release-file": {"GET": (404, 403, 200, 404, LOGIN)},
    "release-rebuild": {"POST": (404, 403, 302, 404, LOGIN)},
    "release-tag-move": {"POST": (404, 403, 302, 404, LOGIN)},
    "api-release-list": {
        "GET": (403, 200, 200, 404, 401),
        "POST": (403, 403, 201, 404, 401),
    },
    "api-release-detail": {"GET": (403, 200, 200, 404, 401)},
    "api-release-rebuild": {"POST": (403, 403, 202, 404, 401)},
    "api-release-file": {"GET": (403, 403, 200, 404, 401)},
    "api-release-tag-list": {
        "GET": (403, 200, 200, 404, 401),
        "POST": (403, 403, 200, 404, 401),
    },
    # the coverage calculator reads no project data: every signed-in user; without its
    # required query parameters (n, alpha) the API answers 400
    "coverage-calculator": {"GET": (200, 200, 200, 200, LOGIN)},
    "api-coverage-calculator": {"GET": (400, 400, 400, 400, 401)},
    # RCCS of a project's answers: reviewers read; the world's candidates carry no retrieval
    # score or confidence, so the API refuses with 404 (rccs_not_available) and the page says why
    "rccs-report": {"GET": (404, 200, 200, 404, LOGIN)},
    "api-rccs": {"GET": (403, 404, 404, 404, 401)},
}


# ---------------------------------------------------------------------------------------------
# The URLconf, walked
# ---------------------------------------------------------------------------------------------


ROUTES = app_routes()


def test_every_url_has_a_name():
    unnamed = [r for r in walk_urlconf(get_resolver().url_patterns) if isinstance(r, str)]
    assert unnamed == [], "name every URL pattern so the permission matrix can cover it"


def test_the_walk_finds_the_known_trees():
    # guards the generator: a broken walk would make every test below pass vacuously
    names = {r.name for r in ROUTES}
    assert {"api-project-list", "api-assignment-next", "project-detail", "annotate-form"} <= names
    assert len(ROUTES) >= 30


def test_every_url_is_in_the_table():
    missing = sorted({r.name for r in ROUTES} - set(EXPECTED))
    assert missing == [], f"new endpoint not covered by the permission matrix: {missing}"


def test_the_table_has_no_stale_entries():
    assert sorted(set(EXPECTED) - {r.name for r in ROUTES}) == []


# ---------------------------------------------------------------------------------------------
# Parameters and bodies from the world
# ---------------------------------------------------------------------------------------------

# Which item each URL with an ``item_id`` addresses (default: the item in disagreement).
ITEM_FOR: dict[str, str] = {
    "api-item-detail": "open",
    "item-detail": "open",
    "api-gold-reference": "gold",
    "gold-reference": "gold",
}


def params_for(route: Route, world: World, *, foreign: bool = False) -> dict[str, Any]:
    """Fill the route's parameters: A's objects, or (``foreign``) B's objects of the same kind."""
    values: dict[str, Any] = {"slug": world.a.slug}
    for name in route.params:
        if name == "item_id":
            item = (
                world.b_item if foreign else world.items[ITEM_FOR.get(route.name, "disagreement")]
            )
            values[name] = item.pk
        elif name == "assignment_id":
            values[name] = (world.b_assignment if foreign else world.assignments["leased"]).pk
        elif name == "user_id":
            values[name] = (world.b_user if foreign else world.users["other_annotator"]).pk
        elif name == "spec_id":
            values[name] = world.specs["b" if foreign else "a"].pk
        elif name == "run_id":
            values[name] = world.runs["b" if foreign else "a"].pk
        elif name == "evaluator_id":
            values[name] = world.evaluators["b" if foreign else "a"].pk
        elif name == "job_id":
            values[name] = world.jobs["b" if foreign else "a"].pk
        elif name == "release_id":
            values[name] = world.releases["b" if foreign else "a"].pk
        elif name == "invitation_id":
            values[name] = world.invitations["b" if foreign else "a"].pk
        elif name == "token_id":  # an API token of the manager (of B's user: foreign)
            owner = world.b_user if foreign else world.users["manager"]
            values[name] = api_token_create(user=owner, name="matrix").token.pk
        elif name == "name":  # a file of a release
            values[name] = "labels.jsonl"
        elif name != "slug":
            raise AssertionError(f"no world value for parameter {name!r} of {route.name}")
    return values


def _upload() -> SimpleUploadedFile:
    data = jsonl_bytes([native_record("new-question")])
    return SimpleUploadedFile("new.jsonl", data, content_type="application/x-ndjson")


def _evaluator_labels() -> SimpleUploadedFile:
    label = {"question": "q1", "candidate": "c0", "evaluator": "matrix-judge", "version": "1"}
    data = jsonl_bytes([{**label, "label": "admissible"}])
    return SimpleUploadedFile("labels.jsonl", data, content_type="application/x-ndjson")


def _labels_form(world: World, item_key: str, prefix_extra: dict[str, str]) -> dict[str, str]:
    item = world.items[item_key]
    data = {"answer_label": "admissible", "comment": "", **prefix_extra}
    for claim in claim_ids(item):
        data[f"claim-{claim}-label"] = "not_supported"
    return data


def _spec_form(name: str) -> dict[str, str]:
    """The calibration spec editor's fields for a conformal spec."""
    return {
        "name": name,
        "method": "conformal_set",
        "loss": "answer_inadmissible",
        "denominator": "accepted_answers",
        "alpha": "0.2",
        "delta": "0.05",
        "acceptance": ">=",
        "selector": "mode",
        "utility": "answer_rate",
        "multiplicity": "bonferroni",
        "canonicaliser": "exact",
        "tie_rule": "canonical_ascending",
        "answer_field": "canonical_form",
        "partition": "calibration",
        "unresolved_as": "error",
        "evidence_unavailable_as": "error",
        "abstained_as": "error",
        "pending_as": "exclude",
        "report_confidence": "0.95",
        "seed": "0",
    }


def _labels_json(world: World, item_key: str) -> dict[str, Any]:
    return {
        "answer_label": "admissible",
        "claims": [
            {"claim_id": c, "label": "not_supported"} for c in claim_ids(world.items[item_key])
        ],
    }


def _gold_reference_json(world: World) -> dict[str, Any]:
    """The gold item's current reference, as the API takes it (setting it again: a no-op)."""
    from labeling.selectors.gold import gold_reference_current

    reference = gold_reference_current(item=world.items["gold"])
    assert reference is not None
    return {
        "answer_label": reference.answer_label,
        "rationale": reference.rationale,
        "claims": [
            {
                "claim_id": cl.claim_id,
                "label": cl.label,
                "evidence": [
                    {
                        "source_version_id": e.source_version_id,
                        "start": e.start,
                        "end": e.end,
                        "quote": e.quote,
                        "unit": "codepoint",
                    }
                    for e in cl.evidence.all()
                ],
            }
            for cl in reference.claim_labels.all()
        ],
    }


def _gold_reference_form(world: World) -> dict[str, str]:
    """The reference page's form holding the same reference (its quote located again)."""
    body = _gold_reference_json(world)
    form = {"answer_label": body["answer_label"], "rationale": body["rationale"]}
    for claim in body["claims"]:
        form[f"claim-{claim['claim_id']}-label"] = claim["label"]
        form[f"claim-{claim['claim_id']}-quote"] = claim["evidence"][0]["quote"]
    return form


def _policy_preview(world: World) -> dict[str, Any]:
    """A dry run of the next policy version of project a: the guideline changed."""
    from labeling.selectors.policies import policy_description_data
    from labeling.selectors.review import labelling_policy_get

    current = labelling_policy_get(project=world.a)
    return {
        "based_on_version": current.version,
        "note": "clearer guideline",
        "content": {**policy_description_data(current), "guideline": "A clearer guideline."},
        "dry_run": True,
    }


def _policy_preview_form(world: World) -> dict[str, str]:
    """The policy page's preview of the same change, as form fields."""
    body = _policy_preview(world)
    content = body["content"]
    form = {
        "action": "preview",
        "based_on_version": str(body["based_on_version"]),
        "note": body["note"],
        "evidence_relation": content["evidence_relation"],
        "guideline": content["guideline"],
        "resolved": "keep",
        "gold_rate": str(content["gold_rate"]),
        "qualification_items": str(content["qualification_items"]),
        "qualification_threshold": str(content["qualification_threshold"]),
        "answer_scale": content["answer_scale"],
        "claim_scale": content["claim_scale"],
    }
    for level in ("answer", "claim"):
        for n, row in enumerate(content[f"{level}_labels"], start=1):
            prefix = f"{level}-{row['value']}-"
            form |= {
                prefix + "offered": "on",
                prefix + "position": str(n),
                prefix + "text": row["text"],
                prefix + "description": row["description"],
                prefix + "key": row["key"],
            }
            if row.get("requires_evidence"):
                form[prefix + "requires_evidence"] = "on"
    for row in content["unavailable_reasons"]:
        form |= {f"reason-{row['value']}-offered": "on", f"reason-{row['value']}-text": row["text"]}
    return form


# (URL name, method) -> request body built from the world: (data, format) where format is
# "json" or "multipart" for the API, "form" for pages.
BODIES: dict[tuple[str, str], Callable[[World], tuple[Any, str]]] = {
    ("api-import-create", "POST"): lambda w: ({"file": _upload()}, "multipart"),
    ("api-evaluator-label-import", "POST"): lambda w: ({"file": _evaluator_labels()}, "multipart"),
    ("api-partition-freeze", "POST"): lambda w: ({"seed": 7}, "json"),
    ("api-annotation-submit", "PUT"): lambda w: (_labels_json(w, "leased"), "json"),
    ("api-assignment-skip", "POST"): lambda w: ({"reason": "other", "note": "n"}, "json"),
    ("api-adjudication-resolve", "POST"): lambda w: (
        {
            **_labels_json(w, "disagreement"),
            "expected_version": w.items["disagreement"].version,
            "rationale": "because",
        },
        "json",
    ),
    ("api-adjudication-unresolved", "POST"): lambda w: (
        {"expected_version": w.items["disagreement"].version, "reason": "ambiguous_guideline"},
        "json",
    ),
    ("api-settings", "PATCH"): lambda w: ({"lease_minutes": 45}, "json"),
    ("api-project-list", "POST"): lambda w: ({"slug": "new", "name": "New"}, "json"),
    ("api-invitation-list", "POST"): lambda w: ({"invitee": "newbie", "role": "annotator"}, "json"),
    ("api-member-update", "PATCH"): lambda w: ({"role": "adjudicator"}, "json"),
    ("api-policy-versions", "POST"): lambda w: (_policy_preview(w), "json"),
    ("api-gold-reference", "PUT"): lambda w: (_gold_reference_json(w), "json"),
    ("gold-reference", "POST"): lambda w: (_gold_reference_form(w), "form"),
    ("api-qualification-decide", "POST"): lambda w: ({"admit": True}, "json"),
    ("gold-overview", "POST"): lambda w: (
        {"user_id": str(w.users["other_annotator"].pk), "decision": "admit"},
        "form",
    ),
    ("policy-versions", "POST"): lambda w: (_policy_preview_form(w), "form"),
    ("api-account-tokens", "POST"): lambda w: ({"name": "matrix", "expires_in_days": 7}, "json"),
    ("account", "POST"): lambda w: ({"name": "matrix", "expires_in_days": "7"}, "form"),
    ("import-create", "POST"): lambda w: ({"file": _upload(), "format": "native"}, "form"),
    ("item-list", "POST"): lambda w: (
        {"action": "return", "items": [w.items["resolved"].pk]},
        "form",
    ),
    ("partition-freeze", "POST"): lambda w: (
        {"seed": 7, "dev": 0.2, "calibration": 0.4, "test": 0.4},
        "form",
    ),
    ("annotate-form", "POST"): lambda w: (_labels_form(w, "leased", {}), "form"),
    ("annotate-skip", "POST"): lambda w: ({"reason": "other", "note": "n"}, "form"),
    ("adjudication-item", "POST"): lambda w: (
        _labels_form(
            w,
            "disagreement",
            {
                "action": "resolve",
                "expected_version": str(w.items["disagreement"].version),
                "rationale": "because",
            },
        ),
        "form",
    ),
    ("project-settings", "POST"): lambda w: (
        {"overlap": 2, "lease_minutes": 45, "serving_order": "partition"},
        "form",
    ),
    ("project-members", "POST"): lambda w: (
        {"action": "invite", "invitee": "newbie", "role": "annotator"},
        "form",
    ),
    ("api-calibration-spec-list", "POST"): lambda w: (
        {
            "name": "new",
            "method": "conformal_set",
            "selector": "mode",
            "alpha": "0.1",
            "delta": "0.05",
        },
        "json",
    ),
    ("api-calibration-spec-detail", "PATCH"): lambda w: ({"alpha": "0.2"}, "json"),
    ("api-calibration-spec-revise", "POST"): lambda w: ({"alpha": "0.2"}, "json"),
    ("api-calibration-run-apply", "POST"): lambda w: (
        {"questions": [{"id": "q", "candidates": [{"answer": "x"}]}]},
        "json",
    ),
    ("calibration-spec-new", "POST"): lambda w: (_spec_form("new"), "form"),
    ("audit-detail", "POST"): lambda w: (
        {"human_positive": "inadmissible", "evaluator_positive": "inadmissible"}
        | {"flag_when": "<", "confidence": "0.95"},
        "form",
    ),
    ("api-audit-detail", "POST"): lambda w: ({"human_positive": ["inadmissible"]}, "json"),
    ("audit-sample-draw", "POST"): lambda w: ({"size": "2", "seed": "1"}, "form"),
    ("audit-target", "POST"): lambda w: ({"anytime_target": "0.1"}, "form"),
    ("api-audit-target", "POST"): lambda w: ({"target": "0.1"}, "json"),
    ("api-audit-sample-list", "POST"): lambda w: ({"size": 2, "seed": 1}, "json"),
    ("calibration-spec-revise", "POST"): lambda w: (_spec_form("world"), "form"),
    ("release-list", "POST"): lambda w: (
        {"version": "2", "parent": str(w.releases["a"].pk), "notes": "n"},
        "form",
    ),
    ("release-tag-move", "POST"): lambda w: ({"name": "latest"}, "form"),
    ("api-release-list", "POST"): lambda w: ({"version": "2", "notes": "n"}, "json"),
    ("api-release-tag-list", "POST"): lambda w: (
        {"name": "latest", "release": w.releases["a"].pk},
        "json",
    ),
}


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------


def clients(world: World) -> dict[str, tuple[APIClient, Client]]:
    """Per role: an API client with a token, and a page client with a session."""
    result = {}
    for role in ROLES:
        api, page = APIClient(), Client()
        if role != "anonymous":
            user = world.users[role]
            api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
            page.force_login(user)
        result[role] = (api, page)
    return result


def request(
    route: Route, method: str, url: str, client_pair: tuple[APIClient, Client], world: World
) -> Any:
    """Send one request in a savepoint that is rolled back afterwards."""
    api, page = client_pair
    body = BODIES.get((route.name, method))
    data, fmt = body(world) if body else (None, "json")
    with transaction.atomic():
        if route.api:
            kwargs = {"format": fmt} if data is not None else {}
            response = getattr(api, method.lower())(url, data, **kwargs)
        elif method in ("GET", "HEAD", "DELETE"):
            response = getattr(page, method.lower())(url)
        else:
            response = getattr(page, method.lower())(url, data or {})
        transaction.set_rollback(True)
    return response


def outcome(response: Any) -> int | str:
    """The status, or LOGIN for a redirect to the login page."""
    if response.status_code == 302 and response["Location"].startswith(
        resolve_url(settings.LOGIN_URL)
    ):
        return LOGIN
    return response.status_code


SUCCESS = {200, 201, 202, 204, 302, 409}


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
def test_permission_matrix(route, world):
    assert route.name in EXPECTED, f"new endpoint not covered by the permission matrix: {route}"
    by_role = clients(world)
    got: dict[tuple[str, str, str], Any] = {}
    want: dict[tuple[str, str, str], Any] = {}
    for method, statuses in EXPECTED[route.name].items():
        for role, expected in zip(ROLES, statuses, strict=True):
            # then: A's objects answer as the table says
            url = url_for(route, params_for(route, world))
            got[(method, role, "own")] = outcome(request(route, method, url, by_role[role], world))
            want[(method, role, "own")] = expected
            # and: B's objects through A's URL answer 404 to whoever may use the endpoint
            if set(route.params) - {"slug"} and role != "anonymous":
                url = url_for(route, params_for(route, world, foreign=True))
                got[(method, role, "foreign")] = outcome(
                    request(route, method, url, by_role[role], world)
                )
                want[(method, role, "foreign")] = 404 if expected in SUCCESS else expected
    # and: HEAD answers as GET does, with no body
    if "GET" in EXPECTED[route.name]:
        url = url_for(route, params_for(route, world))
        for role in ("manager", "anonymous"):
            response = request(route, "HEAD", url, by_role[role], world)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            got[("HEAD", role, "own")] = (outcome(response), body)
            want[("HEAD", role, "own")] = (EXPECTED[route.name]["GET"][ROLES.index(role)], b"")
    # and: methods the table does not list are refused
    for method in sorted(set(METHODS) - set(EXPECTED[route.name])):
        url = url_for(route, params_for(route, world))
        got[(method, "manager", "unlisted")] = outcome(
            request(route, method, url, by_role["manager"], world)
        )
        want[(method, "manager", "unlisted")] = 405
    mismatches = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert mismatches == {}, f"{route.route}: (method, role, objects): (got, expected)"
