"""A labelling "world" for the generated permission-matrix and blindness tests.

Project A (``study``, overlap 2) holds items in every state, built through the real services in
serving order (questions q1..q4, candidates c0 and c1 each):

- ``disagreement``: q1/c0, labelled by the annotator and by another annotator, differently;
- ``consensus``: q1/c1, both gave the same labels;
- ``resolved``: q2/c0, labelled differently, then adjudicated with a rationale;
- ``prior``: q2/c1, one imported prior vote plus the annotator's (different) vote: disagreement;
- ``leased``: q3/c0, leased by the annotator now (after the other annotator skipped it);
- ``open``: q4/c0, never touched;
- ``gold``: q5/c0, a gold item (marked before labelling started; the policy serves gold at
  rate 1, so it is each annotator's first item): its reference says abstained and contradicted
  (citing ``OTHER_QUOTE``) with the rationale ``GOLD_RATIONALE``; the annotator labelled it as
  they label everything, the other annotator as they label everything.

Project B (``other``) has a disagreement of its own, so A's URLs can be probed with B's ids.
Each project also has a calibration spec with a done run, an evaluator audit and a built
release ``1`` certifying the run (its files in the test's release storage).

Every piece of data an annotator of A must never see carries a unique token (``SECRETS``): the
other annotator's username, comment and skip note, the evaluator's name, version, raw output
and score, the prior annotator's id, note, span labels and raw record, the question's metadata
(GSM8K keeps its reference solution there) and the adjudicator's rationale. ``OTHER_QUOTE`` is
the other annotator's evidence: it is part of a pinned source (which the annotator sees in
full), so it may appear only inside that source's text.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from certification.models import ReleaseBuild
from certification.services import (
    audit_report_configure,
    calibration_run_execute,
    calibration_run_request,
    calibration_spec_create,
)
from certification.services.releases import release_build_execute, release_freeze
from labeling.importers.native import read_jsonl
from labeling.models import (
    Assignment,
    Claim,
    Evaluator,
    Item,
    Job,
    JobKind,
    JobStatus,
    Project,
    Role,
)
from labeling.selectors.policies import policy_description_data
from labeling.services import (
    AnnotationInput,
    ClaimInput,
    EvidenceInput,
    adjudication_resolve,
    annotation_submit,
    assignment_skip,
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_configure,
    project_labelling_start,
    workload_import,
)
from labeling.services.gold import GoldReferenceInput, gold_reference_set
from labeling.services.imports import fingerprint
from labeling.services.members import invitation_create
from labeling.services.policies import policy_update
from labeling.services.sso import sso_sign_in
from labeling.services.tokens import api_token_create
from tests.conftest import jsonl_bytes
from tests.factories import WORK_SOURCE, UserFactory

OTHER_USERNAME = "zz-other-annotator-5521"
# The identity provider of the annotator of A (an account made by single sign-on).
SSO_ISSUER = "https://idp.example.org"
OTHER_COMMENT = "ZZ-OTHER-COMMENT-7731"
OTHER_SKIP_NOTE = "ZZ-OTHER-SKIPNOTE-1180"
OTHER_QUOTE = "ZZ-OTHER-QUOTE-4410"
EVALUATOR = "zz-judge-8812"
INVITEE = "zz-invitee-6620@example.org"
EVALUATOR_VERSION = "zz-judge-version-2093"
EVALUATOR_RAW = "ZZ-EVAL-RAW-5093"
EVALUATOR_SCORE = 0.123457
PRIOR_ANNOTATOR = "zz-prior-annotator-4471"
PRIOR_NOTE = "ZZ-PRIOR-NOTE-9034"
PRIOR_SPAN_LABEL = "ZZ-PRIOR-SPANLABEL-3120"
PRIOR_SPAN_NOTE = "ZZ-PRIOR-SPANNOTE-8127"
PRIOR_RAW = "ZZ-PRIOR-RAW-6604"
REFERENCE_SOLUTION = "ZZ-REFERENCE-SOLUTION-2208"
RATIONALE = "ZZ-ADJUDICATION-RATIONALE-6650"
GOLD_RATIONALE = "ZZ-GOLD-REFERENCE-RATIONALE-3371"
OWN_COMMENT = "my own comment"

# Strings that must appear in no response to the annotator of project A.
SECRETS: dict[str, str] = {
    "other annotator's username": OTHER_USERNAME,
    "other annotator's comment": OTHER_COMMENT,
    "other annotator's skip note": OTHER_SKIP_NOTE,
    "evaluator name": EVALUATOR,
    "evaluator version": EVALUATOR_VERSION,
    "evaluator raw output": EVALUATOR_RAW,
    "evaluator score": str(EVALUATOR_SCORE),
    "prior annotator id": PRIOR_ANNOTATOR,
    "prior annotation note": PRIOR_NOTE,
    "prior span label": PRIOR_SPAN_LABEL,
    "prior span note": PRIOR_SPAN_NOTE,
    "prior raw record": PRIOR_RAW,
    "question metadata (reference solution)": REFERENCE_SOLUTION,
    "adjudication rationale": RATIONALE,
    "gold reference rationale": GOLD_RATIONALE,
    "another person's invitation": INVITEE,
}

# A pinned source holding the other annotator's evidence quote (plain ASCII, one line, so that
# it appears verbatim in JSON and HTML wherever the source is shown in full).
# The quote stands past the source's first eight words, which head an untitled source on the page.
QUOTE_SOURCE = (
    f"Records kept by the harbour authority since its founding: {OTHER_QUOTE} marks the disputed "
    "opening date."
)
ANSWER = "It opened in 1932. It spans the harbour."


def _record(external_id: str, *, prior: bool = False) -> dict[str, Any]:
    evaluator_labels = [
        {
            "evaluator": EVALUATOR,
            "version": EVALUATOR_VERSION,
            "label": "inadmissible",
            "score": EVALUATOR_SCORE,
            "raw": {"explanation": EVALUATOR_RAW},
        },
        {"evaluator": EVALUATOR, "version": EVALUATOR_VERSION, "claim": 0, "label": "contradicted"},
    ]
    candidates: list[dict[str, Any]] = [
        {
            "id": key,
            "text": ANSWER,
            "generator": "model-a",
            "claims": [{"text": "It opened in 1932."}, {"text": "It spans the harbour."}],
            "evaluator_labels": evaluator_labels,
        }
        for key in ("c0", "c1")
    ]
    if prior:
        candidates[1]["prior_annotations"] = [
            {
                "annotator": PRIOR_ANNOTATOR,
                "answer_label": "inadmissible",
                "note": PRIOR_NOTE,
                "raw": {"record": PRIOR_RAW},
                "claim_labels": [
                    {"claim": 0, "label": "not_supported"},
                    {"claim": 1, "label": "not_supported"},
                ],
                "spans": [
                    {
                        "start": 0,
                        "end": 2,
                        "quote": "It",
                        "labels": [PRIOR_SPAN_LABEL],
                        "note": PRIOR_SPAN_NOTE,
                    }
                ],
            }
        ]
    return {
        "external_id": external_id,
        "text": f"When did the bridge open ({external_id})?",
        "metadata": {"reference_solution": REFERENCE_SOLUTION},
        "sources": [
            {"id": f"doc-{external_id}", "text": WORK_SOURCE, "rank": 1},
            {"id": f"authority-{external_id}", "text": QUOTE_SOURCE, "rank": 2},
        ],
        "candidates": candidates,
    }


def _import(project: Project, records: list[dict[str, Any]]) -> None:
    data = jsonl_bytes(records)
    workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="world.jsonl",
        file_sha256=fingerprint(data.decode("utf-8")),
    )


def claim_ids(item: Item) -> list[int]:
    """Return the ids of the item's claims, by index."""
    return list(
        Claim.objects.filter(candidate_id=item.candidate_id)
        .order_by("index")
        .values_list("pk", flat=True)
    )


def own_labels(item: Item, *, comment: str = OWN_COMMENT) -> AnnotationInput:
    """The annotator's labels: admissible, every claim not_supported (no evidence needed)."""
    return AnnotationInput(
        answer_label="admissible",
        claims=tuple(ClaimInput(claim_id=c, label="not_supported") for c in claim_ids(item)),
        comment=comment,
        time_spent_seconds=12.5,
    )


def quote_evidence(item: Item) -> EvidenceInput:
    """A span citing :data:`OTHER_QUOTE` in the item's authority source (code points)."""
    from labeling.models import RetrievalLink

    link = RetrievalLink.objects.get(
        question_id=item.candidate.question_id, source_version__text=QUOTE_SOURCE
    )
    start = QUOTE_SOURCE.index(OTHER_QUOTE)
    return EvidenceInput(
        source_version_id=link.source_version_id,
        start=start,
        end=start + len(OTHER_QUOTE),
        quote=OTHER_QUOTE,
        unit="codepoint",
    )


def other_labels(item: Item) -> AnnotationInput:
    """The other annotator's labels: abstained, claims contradicted citing OTHER_QUOTE."""
    return AnnotationInput(
        answer_label="abstained",
        claims=tuple(
            ClaimInput(claim_id=c, label="contradicted", evidence=(quote_evidence(item),))
            for c in claim_ids(item)
        ),
        comment=OTHER_COMMENT,
        time_spent_seconds=30,
    )


@dataclass
class World:
    """Everything the generated tests address by name."""

    a: Project
    b: Project
    users: dict[str, Any]
    items: dict[str, Item]
    assignments: dict[str, Assignment]
    b_item: Item
    b_assignment: Assignment
    b_user: Any
    tokens: dict[str, str] = field(default_factory=dict)
    # calibration: per project ("a", "b"), a spec and its done run
    specs: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    # evaluator audits: per project ("a", "b"), the evaluator, its audit declared
    evaluators: dict[str, Any] = field(default_factory=dict)
    # releases: per project ("a", "b"), release "1" certifying the run, built
    releases: dict[str, Any] = field(default_factory=dict)
    # background jobs: per project ("a", "b"), a finished workload import job
    jobs: dict[str, Any] = field(default_factory=dict)
    # invitations, pending: "a" offers project A to users["other_member"] (a member of B only),
    # "b" offers project B to an account that is in neither project
    invitations: dict[str, Any] = field(default_factory=dict)

    def refresh(self) -> None:
        """Reload items (their versions change)."""
        for item in [*self.items.values(), self.b_item]:
            item.refresh_from_db()


def _claim(project: Project, user: Any, expected: Item) -> Assignment:
    assignment = item_claim_next(project=project, actor=user)
    assert assignment is not None and assignment.item_id == expected.pk, (
        f"serving order changed: expected item {expected.pk}, got {assignment}"
    )
    return assignment


def _item(project: Project, question: str, key: str) -> Item:
    return Item.objects.select_related("candidate").get(
        project=project, candidate__question__external_id=question, candidate__key=key
    )


def _user(username: str | None = None) -> AbstractBaseUser:
    return UserFactory(username=username) if username else UserFactory()


def _sso_user(username: str, project: Project, role: str) -> Any:
    """An account made by a single sign-on, its role in ``project`` granted by a group."""
    group = f"{project.slug}-{role}s"
    with override_settings(CERTLABEL_OIDC_ROLE_MAP=f"{group}={project.slug}:{role}"):
        signed_in = sso_sign_in(
            claims={
                "iss": SSO_ISSUER,
                "sub": f"subject-of-{username}",
                "preferred_username": username,
                "groups": [group],
            }
        )
    assert signed_in.created and signed_in.roles == {project.slug: role}
    return signed_in.user


def build_world() -> World:
    """Build the world (see the module docstring) through the real services."""
    manager, adjudicator = _user("mgr-a"), _user("adj-a")
    other, b_member, b_other = _user(OTHER_USERNAME), _user("ann-b"), _user("ann-b2")

    a = project_create(slug="study", name="Study", manager=manager)
    membership_set(project=a, user=adjudicator, role=Role.ADJUDICATOR)
    # The annotator of A signs in through single sign-on; their role comes from a group.
    me = _sso_user("ann-a", a, Role.ANNOTATOR)
    membership_set(project=a, user=other, role=Role.ANNOTATOR)
    _import(
        a, [_record("q1"), _record("q2", prior=True), _record("q3"), _record("q4"), _record("q5")]
    )
    gold = _item(a, "q5", "c0")
    gold_reference_set(
        project=a,
        item_id=gold.pk,
        actor=manager,
        data=GoldReferenceInput(
            answer_label="abstained",
            claims=tuple(
                ClaimInput(claim_id=c, label="contradicted", evidence=(quote_evidence(gold),))
                for c in claim_ids(gold)
            ),
            rationale=GOLD_RATIONALE,
        ),
    )
    policy_update(
        project=a,
        actor=manager,
        description={**policy_description_data(a.policies.get()), "gold_rate": 1.0},
    )
    project_labelling_configure(project=a, actor=manager, overlap=2)
    project_labelling_start(project=a, actor=manager)
    items = {
        "disagreement": _item(a, "q1", "c0"),
        "consensus": _item(a, "q1", "c1"),
        "resolved": _item(a, "q2", "c0"),
        "prior": _item(a, "q2", "c1"),
        "leased": _item(a, "q3", "c0"),
        "open": _item(a, "q4", "c0"),
        "gold": gold,
    }
    mine: dict[str, Assignment] = {}

    def submit(user: Any, assignment: Assignment, data: AnnotationInput) -> None:
        annotation_submit(project=a, assignment_id=assignment.pk, actor=user, data=data)

    # the gold item first (gold rate 1 while one is left), then regular work as before
    mine["gold"] = _claim(a, me, gold)
    submit(me, mine["gold"], own_labels(gold))
    submit(other, _claim(a, other, gold), other_labels(gold))

    for state in ("disagreement", "consensus", "resolved"):
        item = items[state]
        mine[state] = _claim(a, me, item)
        submit(me, mine[state], own_labels(item))
        theirs = _claim(a, other, item)
        if state == "consensus":
            submit(other, theirs, own_labels(item, comment=OTHER_COMMENT))
        else:
            submit(other, theirs, other_labels(item))
    resolved = items["resolved"]
    resolved.refresh_from_db()
    adjudication_resolve(
        project=a,
        item_id=resolved.pk,
        actor=adjudicator,
        expected_version=resolved.version,
        answer_label="inadmissible",
        claims=tuple(ClaimInput(claim_id=c, label="not_supported") for c in claim_ids(resolved)),
        rationale=RATIONALE,
    )
    mine["prior"] = _claim(a, me, items["prior"])
    submit(me, mine["prior"], own_labels(items["prior"]))
    skipped = _claim(a, other, items["leased"])
    assignment_skip(
        project=a, assignment_id=skipped.pk, actor=other, reason="other", note=OTHER_SKIP_NOTE
    )
    mine["leased"] = _claim(a, me, items["leased"])

    b = project_create(slug="other", name="Other", manager=_user("mgr-b"))
    membership_set(project=b, user=b_member, role=Role.ANNOTATOR)
    membership_set(project=b, user=b_other, role=Role.ANNOTATOR)
    _import(b, [_record("b1")])
    project_labelling_start(project=b, actor=b.memberships.get(role=Role.MANAGER).user)
    b_item = _item(b, "b1", "c0")
    b_assignment = item_claim_next(project=b, actor=b_member)
    annotation_submit(
        project=b, assignment_id=b_assignment.pk, actor=b_member, data=own_labels(b_item)
    )
    theirs = item_claim_next(project=b, actor=b_other)
    annotation_submit(project=b, assignment_id=theirs.pk, actor=b_other, data=other_labels(b_item))

    specs: dict[str, Any] = {}
    runs: dict[str, Any] = {}
    evaluators: dict[str, Any] = {}
    releases: dict[str, Any] = {}
    jobs: dict[str, Any] = {}
    for key, project, owner in (
        ("a", a, manager),
        ("b", b, b.memberships.get(role=Role.MANAGER).user),
    ):
        specs[key] = calibration_spec_create(
            project=project,
            actor=owner,
            name="world",
            method="conformal_set",
            selector="mode",
            alpha="0.1",
            delta="0.05",
        )
        requested = calibration_run_request(spec=specs[key], trigger="manual")
        runs[key] = calibration_run_execute(run_id=requested.pk)
        evaluators[key] = Evaluator.objects.get(project=project)
        audit_report_configure(project=project, evaluator=evaluators[key], actor=owner)
        releases[key] = release_freeze(project=project, actor=owner, version="1")
        # the build task runs on commit, which a test's transaction never reaches: build now
        build = ReleaseBuild.objects.get(release=releases[key], is_rebuild=False)
        release_build_execute(build_id=build.pk)
        jobs[key] = Job.objects.create(
            project=project,
            kind=JobKind.WORKLOAD_IMPORT,
            actor=owner,
            payload={"format": "native", "filename": "world.jsonl"},
        )
        Job.objects.filter(pk=jobs[key].pk).update(
            status=JobStatus.DONE,
            result={"batch": None, "already_imported": False, "records": 0, "created": {}},
            finished_at=timezone.now(),
        )

    # a pending invitation of a new person to A: only A's managers may see who is invited
    invitation_create(
        project=a, actor=manager, invitee=INVITEE, role=Role.ANNOTATOR, site="http://testserver"
    )
    invitations = {
        "a": invitation_create(
            project=a, actor=manager, invitee="ann-b", role=Role.ANNOTATOR, site="http://testserver"
        ).invitation,
        "b": invitation_create(
            project=b,
            actor=b.memberships.get(role=Role.MANAGER).user,
            invitee=_user("invited-b").get_username(),
            role=Role.ANNOTATOR,
            site="http://testserver",
        ).invitation,
    }

    world = World(
        a=a,
        b=b,
        users={
            "annotator": me,
            "adjudicator": adjudicator,
            "manager": manager,
            "other_member": b_member,
            "other_annotator": other,
        },
        items=items,
        assignments=mine,
        b_item=b_item,
        b_assignment=b_assignment,
        b_user=b_other,
        specs=specs,
        runs=runs,
        evaluators=evaluators,
        releases=releases,
        jobs=jobs,
        invitations=invitations,
    )
    world.refresh()
    for item_state, expected in {
        "disagreement": "disagreement",
        "consensus": "resolved",
        "resolved": "resolved",
        "prior": "disagreement",
        "leased": "open",
        "open": "open",
        "gold": "gold",
    }.items():
        assert world.items[item_state].status == expected, (item_state, world.items[item_state])
    assert world.b_item.status == "disagreement"
    return world


# ---------------------------------------------------------------------------------------------
# The URL configuration, walked
# ---------------------------------------------------------------------------------------------

# Trees that are not the application's own, each with why it is left out.
SKIPPED_PREFIXES: dict[str, str] = {
    "admin/": "Django admin: staff-only by Django's own permission system, not project roles",
    "accounts/": "django.contrib.auth pages (login, logout, password reset): public by design",
    "static/": "static files: no project data",
    "media/": "uploaded media: none are served",
}
SKIPPED_NAMES: dict[str, str] = {
    "api-schema": "the OpenAPI document: public, describes the API, holds no project data",
    "api-docs": "Swagger UI over the OpenAPI document: public, holds no project data",
    "api-redoc": "Redoc over the OpenAPI document: public, holds no project data",
}


@dataclass(frozen=True)
class Route:
    """One URL pattern of the application: its full route and name."""

    route: str
    name: str
    api: bool

    @property
    def params(self) -> list[str]:
        """The names of the path parameters, in order."""
        return re.findall(r"<(?:\w+:)?(\w+)>", self.route)


def walk_urlconf(
    patterns: list[Any], prefix: str = "", namespace: str = ""
) -> Iterator[Route | str]:
    """Yield every named pattern under ``patterns`` as a Route (a string for an unnamed one)."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if any(route.startswith(p) for p in SKIPPED_PREFIXES):
            continue
        if isinstance(pattern, URLResolver):
            ns = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from walk_urlconf(pattern.url_patterns, route, ns)
        elif isinstance(pattern, URLPattern):
            if pattern.name is None:
                yield f"unnamed pattern {route!r}"  # reported by test_every_url_has_a_name
                continue
            name = namespace + pattern.name
            if name in SKIPPED_NAMES:
                continue
            yield Route(route=route, name=name, api=route.startswith("api/"))


def app_routes() -> list[Route]:
    """Every named URL pattern of the application, skipped trees aside."""
    return [r for r in walk_urlconf(get_resolver().url_patterns) if isinstance(r, Route)]


def url_for(route: Route, values: dict[str, Any]) -> str:
    """Return the path of ``route`` with its parameters filled from ``values``."""
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values[m.group(1)]), route.route)


def token_for(user: Any) -> str:
    """Return the secret of a new API token of ``user`` (30 days)."""
    return api_token_create(user=user, name="test").secret
