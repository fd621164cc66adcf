"""Blindness: nothing an annotator can reach reveals other people's votes.

The world (``tests/worlds.py``) holds, beside the annotator's own work, another annotator's
labels, comment, evidence and skip note, evaluator labels, imported prior annotations, question
metadata with a reference solution, an adjudicator's rationale and a gold item's reference (its
rationale a token, its labels ones the annotator never gives), each carrying a unique token
(``SECRETS``); the annotator labelled that gold item, served as their first item. Every GET
URL of the application, generated from the URL configuration with every combination of the
world's objects as parameters, is requested as the annotator (API with a
token, pages with a session, redirects followed), and so are the annotator's own POSTs (claim,
submit, revise, skip) in the API and the pages. No response body may contain:

- a secret token;
- the other annotator's evidence quote outside the pinned source it comes from;
- a pseudonym of the side-by-side view ("Annotator 2") or of the agreement report ("Rater 1");
- the word "gold" (nothing may say that an item is gold, nor that gold items exist);
- (JSON) a key that carries votes or other people's data (``FORBIDDEN_KEYS``), or a label value
  no vote of the annotator's used outside the policy's vocabulary.

And the forms of the annotator's own submitted items, which hold the same own labels, render the
label vocabulary the same number of times whatever the other votes were (consensus,
disagreement, adjudicated, imported prior vote, gold item): a page that showed another vote, or
that an item is gold, would differ.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from rest_framework.test import APIClient

from certification.models import AuditReport, AuditSampleMember
from certification.services import (
    agreement_recompute,
    audit_report_recompute,
    audit_sample_draw,
    reliability_recompute,
)
from labeling.models import ApiToken, Assignment, GoldReference, Invitation, Item, Membership
from labeling.services import ClaimInput, adjudication_resolve
from labeling.services.tokens import api_token_create
from tests.worlds import (
    OTHER_QUOTE,
    QUOTE_SOURCE,
    SECRETS,
    World,
    app_routes,
    claim_ids,
    token_for,
    url_for,
)

pytestmark = pytest.mark.django_db

# JSON keys that would carry votes, counts of them or other people's data.
FORBIDDEN_KEYS = frozenset(
    {
        "metadata",
        "evaluator_labels",
        "prior_annotations",
        "annotators",
        "assigned_count",
        "prior_votes",
        "votes",
        "vote_count",
        "slot",
        "resolution",
        "history",
        "differences",
        # evaluator-derived: an audit sample member's stratum is the evaluator's verdict
        "stratum",
        "disagreements",
        "evaluator_label",
        # the per-person reliability report and its model estimate (managers; adjudicators see
        # an item's posterior on the adjudication page only, after the votes)
        "people",
        "dawid_skene",
        "posteriors",
        # gold items: the flag, the reference and the rule that serves them
        "gold",
        "is_gold",
        "reference",
        "gold_rate",
        "qualification",
        "qualification_required",
        "qualification_items",
        "qualification_threshold",
    }
)
# Labels of the world that only other people used (the annotator always says admissible /
# not_supported): outside the policy vocabulary they can only come from someone else's vote.
OTHERS_LABELS = frozenset({"abstained", "inadmissible", "contradicted"})
# Keys holding the policy's label vocabulary (the labelling form's "policy", the policy endpoint's
# label lists): they name every label, by design.
VOCABULARY_KEYS = frozenset({"policy", "answer_labels", "claim_labels", "unavailable_reasons"})
LABEL_WORDS = ("admissible", "inadmissible", "abstained", "contradicted", "not_supported")
PSEUDONYMS = re.compile(r"\b(?:Annotator|Rater)\s+\d")
# The Dawid–Skene estimate's heading, on the adjudication page and the reliability page.
MODEL_ESTIMATE = "Model estimate"
GOLD_WORD = re.compile(r"\bgold\b", re.I)
VOTE_COUNT = re.compile(r"\b\d+\s+(?:votes?|annotators?)\b|\bvotes?\s*[:=]\s*\d", re.I)


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def _walk_json(value: Any, path: str = "") -> Iterator[tuple[str, str | None, Any]]:
    """Yield (path, key, value) for every scalar of a JSON document; vocabulary lists skipped."""
    if isinstance(value, dict):
        for key, child in value.items():
            if key in VOCABULARY_KEYS:  # the label vocabulary: every label, by design
                continue
            yield path, key, None
            yield from _walk_json(child, f"{path}.{key}")
    elif isinstance(value, list):
        for n, child in enumerate(value):
            yield from _walk_json(child, f"{path}[{n}]")
    else:
        yield path, None, value


def leaks(body: str, content_type: str) -> list[str]:
    """Return what ``body`` reveals that the annotator must not see (empty: nothing)."""
    found = [f"{what} ({token})" for what, token in SECRETS.items() if token in body]
    if body.count(OTHER_QUOTE) > body.count(QUOTE_SOURCE):
        found.append(f"the other annotator's evidence quote outside its source ({OTHER_QUOTE})")
    found += [f"pseudonym {m!r}" for m in PSEUDONYMS.findall(body)]
    found += [f"the word {m!r}" for m in GOLD_WORD.findall(body)]
    found += [f"vote count {m!r}" for m in VOTE_COUNT.findall(body)]
    if MODEL_ESTIMATE in body:
        found.append("the model's estimate of a label")
    if content_type.startswith("application/json") and body:
        for path, key, value in _walk_json(json.loads(body)):
            if key in FORBIDDEN_KEYS:
                found.append(f"key {key!r} at {path or '/'}")
            if isinstance(value, str) and value in OTHERS_LABELS:
                found.append(f"label {value!r} at {path}")
    return found


def body_of(response: Any) -> tuple[str, str]:
    content_type = response.get("Content-Type", "")
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(), content_type
    return response.content.decode(), content_type


# ---------------------------------------------------------------------------------------------
# The annotator's reachable URLs
# ---------------------------------------------------------------------------------------------


def parameter_values(world: World) -> dict[str, list[Any]]:
    """Every object of both projects, in every state, per path parameter."""
    return {
        "slug": [world.a.slug, world.b.slug],
        "item_id": list(Item.objects.values_list("pk", flat=True)),
        "assignment_id": list(Assignment.objects.values_list("pk", flat=True)),
        "user_id": sorted(set(Membership.objects.values_list("user_id", flat=True))),
        "spec_id": sorted(spec.pk for spec in world.specs.values()),
        "run_id": sorted(run.pk for run in world.runs.values()),
        "evaluator_id": sorted(e.pk for e in world.evaluators.values()),
        "release_id": sorted(release.pk for release in world.releases.values()),
        "job_id": sorted(job.pk for job in world.jobs.values()),
        "invitation_id": sorted(Invitation.objects.values_list("pk", flat=True)),
        "name": ["labels.jsonl", "manifest.json", "release.zip"],
        "token_id": sorted(ApiToken.objects.values_list("pk", flat=True)),
    }


def annotator_clients(world: World) -> tuple[APIClient, Client]:
    user = world.users["annotator"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    page = Client()
    page.force_login(user)
    return api, page


def get_every_url(world: World) -> Iterator[tuple[str, Any]]:
    """GET every URL of the application with every combination of parameters, as the annotator."""
    api, page = annotator_clients(world)
    values = parameter_values(world)
    for route in app_routes():
        names = route.params
        for combination in itertools.product(*(values[name] for name in names)):
            url = url_for(route, dict(zip(names, combination, strict=True)))
            if route.api:
                yield url, api.get(url)
            else:
                yield url, page.get(url, follow=True)


def _labels_form(item: Item) -> dict[str, str]:
    data = {"answer_label": "admissible", "comment": "again"}
    for claim in claim_ids(item):
        data[f"claim-{claim}-label"] = "not_supported"
    return data


def _labels_json(item: Item, answer: str = "admissible") -> dict[str, Any]:
    return {
        "answer_label": answer,
        "claims": [{"claim_id": c, "label": "not_supported"} for c in claim_ids(item)],
    }


def post_own_work(world: World) -> Iterator[tuple[str, Any]]:
    """The annotator's own POSTs (API and pages), each in a savepoint rolled back afterwards."""
    api, page = annotator_clients(world)
    slug = world.a.slug
    mine, items = world.assignments, world.items
    leased = mine["leased"].pk
    api_base, page_base = f"/api/projects/{slug}", f"/p/{slug}"
    requests = [
        ("POST", f"{api_base}/assignments/next/", None),
        ("PUT", f"{api_base}/assignments/{leased}/annotation/", _labels_json(items["leased"])),
        ("POST", f"{api_base}/assignments/{leased}/skip/", {"reason": "other"}),
    ]
    # revisions of the annotator's submitted items, in every state (refused once resolved)
    requests += [
        (
            "PUT",
            f"{api_base}/assignments/{mine[state].pk}/annotation/",
            {**_labels_json(items[state], "evidence_unavailable"), "answer_reason": "blocked"},
        )
        for state in ("disagreement", "consensus", "resolved", "prior", "gold")
    ]
    pages = [
        (f"{page_base}/annotate/", {}),
        (f"{page_base}/annotate/{leased}/", _labels_form(items["leased"])),
        (f"{page_base}/annotate/{leased}/skip/", {"reason": "other", "note": "x"}),
    ] + [
        (f"{page_base}/annotate/{mine[state].pk}/", _labels_form(items[state]))
        for state in ("disagreement", "consensus", "resolved", "prior", "gold")
    ]
    for method, url, data in requests:
        with transaction.atomic():
            if method == "PUT":
                response = api.put(url, data, format="json")
            else:
                response = api.post(url, data, format="json")
            yield f"{method} {url}", response
            # and the submit's follow-up: the next item (204 or a form)
            if method == "PUT":
                yield f"POST next after {url}", api.post(f"{api_base}/assignments/next/")
            transaction.set_rollback(True)
    for url, data in pages:
        with transaction.atomic():
            yield f"POST {url}", page.post(url, data, follow=True)
            transaction.set_rollback(True)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def world(world: World) -> World:
    # the world of tests/conftest.py (built once per module, each test rolled back), plus:
    agreement_recompute(project_id=world.a.pk)  # the report names both annotators
    reliability_recompute(project_id=world.a.pk)  # names and judges them; a posterior per item
    # the other annotator's API token, named with a secret: never listed to the annotator
    api_token_create(user=world.users["other_annotator"], name=SECRETS["other annotator's comment"])
    # an audit sample of every evaluator-labelled item: each member carries its stratum
    audit_sample_draw(
        project=world.a,
        evaluator=world.evaluators["a"],
        actor=world.users["manager"],
        # every evaluator-labelled item but the gold one (never audited)
        size=Item.objects.filter(project=world.a).exclude(status="gold").count(),
        seed=7,
    )
    return world


def test_the_secrets_are_in_the_world(world):
    # guards the test: tokens missing from the database would make every check pass vacuously
    from labeling.models import (
        AnnotationRevision,
        Assignment,
        Evaluator,
        EvidenceSpan,
        PriorAnnotation,
        Question,
        Resolution,
    )

    assert AnnotationRevision.objects.filter(comment=SECRETS["other annotator's comment"]).exists()
    assert EvidenceSpan.objects.filter(quote=OTHER_QUOTE).exists()
    assert Assignment.objects.filter(skip_note=SECRETS["other annotator's skip note"]).exists()
    assert Evaluator.objects.filter(name=SECRETS["evaluator name"]).exists()
    assert PriorAnnotation.objects.filter(note=SECRETS["prior annotation note"]).exists()
    assert Question.objects.filter(metadata__reference_solution__isnull=False).count() == 6
    assert Resolution.objects.filter(rationale=SECRETS["adjudication rationale"]).exists()
    assert Invitation.objects.filter(invitee=SECRETS["another person's invitation"]).exists()
    assert GoldReference.objects.filter(rationale=SECRETS["gold reference rationale"]).exists()
    # the annotator's gold work is there, flagged, submitted
    gold_work = Assignment.objects.get(pk=world.assignments["gold"].pk)
    assert gold_work.gold and gold_work.status == "submitted"


def test_a_manager_sees_what_the_annotator_must_not(world):
    # guards the detector: the same checks do find the secrets where they are allowed
    manager = world.users["manager"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(manager)}")
    item = world.items["prior"]

    detail = body_of(api.get(f"/api/projects/study/items/{item.pk}/"))
    side_by_side = body_of(api.get(f"/api/projects/study/disagreements/{item.pk}/"))

    # the work report (and its CSV) names every annotator, the other one included
    report = body_of(api.get("/api/projects/study/reports/work/"))
    page = Client()
    page.force_login(manager)
    report_csv = body_of(page.get("/p/study/reports/work/items.csv"))
    assert any("other annotator's username" in f for f in leaks(*report))
    assert any("other annotator's username" in f for f in leaks(*report_csv))

    invitations = body_of(api.get("/api/projects/study/invitations/"))
    gold = world.items["gold"].pk
    reference = body_of(api.get(f"/api/projects/study/items/{gold}/gold/"))
    gold_page = body_of(page.get(f"/p/study/items/{gold}/gold/"))
    policy = body_of(api.get("/api/projects/study/policy/"))
    assert any("gold reference rationale" in f for f in leaks(*reference))
    assert any("the word" in f for f in leaks(*gold_page))
    assert any(f.startswith("key 'gold_rate'") for f in leaks(*policy))

    # the reliability report names and judges the other annotator; its page shows the model
    reliability = body_of(api.get("/api/projects/study/reliability/"))
    assert any("other annotator's username" in f for f in leaks(*reliability))
    assert any(f.startswith("key 'posteriors'") for f in leaks(*reliability))
    reliability_page = body_of(page.get("/p/study/certification/reliability/"))
    assert "the model's estimate of a label" in leaks(*reliability_page)

    found = leaks(*detail) + leaks(*side_by_side) + leaks(*invitations)
    assert any("another person's invitation" in f for f in found)
    assert any("evaluator name" in f for f in found)
    assert any("prior annotator id" in f for f in found)
    assert any("pseudonym" in f for f in found)
    assert any(f.startswith("key 'evaluator_labels'") for f in found)


def test_no_get_response_to_the_annotator_reveals_anything(world):
    seen: dict[str, list[str]] = {}
    statuses: dict[int, int] = {}
    for url, response in get_every_url(world):
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        found = leaks(*body_of(response))
        if found:
            seen[url] = found
    assert seen == {}
    assert statuses.get(200, 0) >= 20  # the walk did reach the annotator's pages


def test_no_response_to_the_annotators_own_posts_reveals_anything(world):
    seen: dict[str, list[str]] = {}
    for request, response in post_own_work(world):
        assert response.status_code < 500, request
        found = leaks(*body_of(response))
        if found:
            seen[request] = found
    assert seen == {}


def test_the_model_estimate_is_shown_to_the_adjudicator_only_after_the_votes(world):
    # the item in disagreement: every blind vote is in, so its adjudication page exists
    item = world.items["disagreement"]
    url = f"/p/study/adjudicate/{item.pk}/"
    adjudicator = Client()
    adjudicator.force_login(world.users["adjudicator"])
    body = adjudicator.get(url).content.decode()
    assert MODEL_ESTIMATE in body and 'id="model-posterior"' in body
    assert "other annotator's username" not in " ".join(leaks(body, "text/html"))
    # an annotator never reaches it (the walk over every URL checks every other page)
    annotator = Client()
    annotator.force_login(world.users["annotator"])
    assert annotator.get(url).status_code == 404
    assert annotator.get("/p/study/certification/reliability/").status_code == 404
    # nor does the adjudicator reach the per-person figures (managers only)
    assert adjudicator.get("/p/study/certification/reliability/").status_code == 403
    # an item whose votes are not all in has no adjudication page, so no estimate
    open_item = world.items["open"]
    assert adjudicator.get(f"/p/study/adjudicate/{open_item.pk}/").status_code == 404


@pytest.mark.parametrize("kind", ["api", "page"])
def test_own_forms_look_the_same_whatever_the_other_votes(world, kind):
    # given five items the annotator labelled identically, whose other votes differ: agreeing
    # (consensus), disagreeing, adjudicated, an imported prior vote, and a gold item
    api, page = annotator_clients(world)
    counts = {}
    for state in ("disagreement", "consensus", "resolved", "prior", "gold"):
        assignment = world.assignments[state].pk
        if kind == "api":
            response = api.get(f"/api/projects/study/assignments/{assignment}/")
        else:
            response = page.get(f"/p/study/annotate/{assignment}/")
        assert response.status_code == 200
        body = response.content.decode()
        counts[state] = {word: len(re.findall(rf"\b{word}\b", body)) for word in LABEL_WORDS}
        counts[state]["checked"] = body.count("checked")
    # then every form renders the labels alike
    assert len({json.dumps(c, sort_keys=True) for c in counts.values()}) == 1, counts


# ---------------------------------------------------------------------------------------------
# Adjudicators: no evaluator verdict of an item they (or anyone) may still decide
# ---------------------------------------------------------------------------------------------

# Evaluator-derived data no adjudicator ever receives (the raw output and the per-item score;
# the evaluator's name and version head the audit pages they read, by design).
EVALUATOR_SECRETS = {
    "evaluator raw output": SECRETS["evaluator raw output"],
    "evaluator score": SECRETS["evaluator score"],
}


def _item_name(item: Item) -> str:
    return f"{item.candidate.question.external_id}/{item.candidate.key}"


def decidable_names(world: World) -> set[str]:
    """Items of A a person may still label or adjudicate (all but the consensus one)."""
    return {_item_name(item) for state, item in world.items.items() if state != "consensus"}


def decidable_ids(world: World) -> set[int]:
    return {item.pk for state, item in world.items.items() if state != "consensus"}


def evaluator_leaks(world: World, body: str, content_type: str) -> list[str]:
    """Return the evaluator-derived facts of decidable items that ``body`` reveals."""
    found = [f"{what} ({token})" for what, token in EVALUATOR_SECRETS.items() if token in body]
    names, ids = decidable_names(world), decidable_ids(world)
    if content_type.startswith("application/json") and body:
        for path, key, value in _walk_json(json.loads(body)):
            if key is None and value in names and ".disagreements[" in path:
                found.append(f"disagreement row of {value} at {path}")
        for member in _members(json.loads(body)):
            if member.get("item") in ids and member.get("stratum") is not None:
                found.append(f"stratum of item {member['item']}: {member['stratum']!r}")
    elif content_type.startswith("text/csv"):
        for line in body.splitlines()[1:]:
            if line.split(",", 1)[0] in names:
                found.append(f"CSV row of {line.split(',', 1)[0]}")
    else:
        found += [f"disagreement row of {name}" for name in names if f"<tr><td>{name}</td>" in body]
    return found


def _members(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if "stratum" in value:
            yield value
        for child in value.values():
            yield from _members(child)
    elif isinstance(value, list):
        for child in value:
            yield from _members(child)


@pytest.fixture
def corrected_world(world: World) -> World:
    """The world with the adjudicated item corrected to disagree with the evaluator.

    The evaluator says ``inadmissible`` of every item; the consensus item (``admissible``) and
    the corrected one (now ``admissible``) are both audit disagreements, but only the consensus
    item can no longer be decided by anyone.
    """
    item = world.items["resolved"]
    item.refresh_from_db()
    adjudication_resolve(
        project=world.a,
        item_id=item.pk,
        actor=world.users["manager"],
        expected_version=item.version,
        answer_label="admissible",
        claims=tuple(ClaimInput(claim_id=c, label="not_supported") for c in claim_ids(item)),
        rationale="corrected",
    )
    audit_report_recompute(report_id=AuditReport.objects.get(evaluator=world.evaluators["a"]).pk)
    return world


def _audit_urls(world: World) -> list[tuple[str, bool]]:
    slug, evaluator = world.a.slug, world.evaluators["a"].pk
    return [
        (f"/api/projects/{slug}/audits/{evaluator}/", True),
        (f"/api/projects/{slug}/audits/{evaluator}/samples/", True),
        (f"/p/{slug}/certification/audits/{evaluator}/", False),
        (f"/p/{slug}/certification/audits/{evaluator}/disagreements.csv", False),
    ]


def _clients(world: World, who: str) -> tuple[APIClient, Client]:
    user = world.users[who]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    page = Client()
    page.force_login(user)
    return api, page


def test_the_audit_secrets_are_in_the_world(corrected_world):
    # guards the test: a sample with strata of decidable items, and a disagreement row of one
    world = corrected_world
    strata = AuditSampleMember.objects.filter(item_id__in=decidable_ids(world))
    assert strata.exclude(stratum="").count() >= 5
    rows = AuditReport.objects.get(evaluator=world.evaluators["a"]).result["disagreements"]
    assert {row[0] for row in rows} >= {"q1/c1", "q2/c0"}


def test_a_manager_sees_the_strata_and_rows_the_adjudicator_must_not(corrected_world):
    # guards the detector: the manager's responses do show them, on every audit URL
    world = corrected_world
    api, page = _clients(world, "manager")
    for url, is_api in _audit_urls(world):
        response = api.get(url) if is_api else page.get(url)
        assert response.status_code == 200, url
        assert evaluator_leaks(world, *body_of(response)), url


def test_the_adjudicator_sees_no_verdict_of_an_item_still_open_to_people(corrected_world):
    world = corrected_world
    api, page = _clients(world, "adjudicator")
    bodies = {}
    for url, is_api in _audit_urls(world):
        response = api.get(url) if is_api else page.get(url)
        assert response.status_code == 200, url
        bodies[url] = body_of(response)
        assert evaluator_leaks(world, *bodies[url]) == [], url
    slug, evaluator = world.a.slug, world.evaluators["a"].pk
    # what stays: the consensus item's row (nobody decides it again) and the aggregate figures
    report = json.loads(bodies[f"/api/projects/{slug}/audits/{evaluator}/"][0])
    assert [row[0] for row in report["result"]["disagreements"]] == ["q1/c1"]
    assert report["result"]["disagreements_withheld"] == 1
    assert report["result"]["n_resolved"] == 2
    csv_body = bodies[f"/p/{slug}/certification/audits/{evaluator}/disagreements.csv"][0]
    assert csv_body.splitlines()[1].startswith("q1/c1,")
    assert len(csv_body.splitlines()) == 2
    page_body = bodies[f"/p/{slug}/certification/audits/{evaluator}/"][0]
    assert "1 disagreement not listed" in page_body
    samples = json.loads(bodies[f"/api/projects/{slug}/audits/{evaluator}/samples/"][0])
    strata = {m["item"]: m["stratum"] for m in samples["results"][0]["members"]}
    consensus = world.items["consensus"].pk
    assert strata[consensus] is not None
    assert all(strata[i] is None for i in decidable_ids(world) if i in strata)


def derived_verdicts(sample: dict[str, Any]) -> dict[int, str]:
    """Return the stratum (the evaluator's verdict) of every member that a reader of ``sample``
    can derive: shown; the only stratum sampled; the only stratum with members left over once
    the shown ones are counted; or an inclusion probability that one stratum alone has."""
    members = sample["members"]
    known = {m["item"]: m["stratum"] for m in members if m["stratum"] is not None}
    unknown = [m for m in members if m["item"] not in known]
    design = sample.get("design") or {}
    left = {
        key: s["sampled"] - sum(1 for v in known.values() if v == key) for key, s in design.items()
    }
    left_over = [key for key, n in left.items() if n > 0]
    probability: dict[float, set[str]] = {}
    for key, s in design.items():
        probability.setdefault(s["inclusion_probability"], set()).add(key)
    for m in members:
        if m["stratum"] is not None and m["inclusion_probability"] is not None:
            probability.setdefault(m["inclusion_probability"], set()).add(m["stratum"])
    derived = dict(known)
    for m in unknown:
        by_probability = probability.get(m["inclusion_probability"], set())
        if len(left_over) == 1:
            derived[m["item"]] = left_over[0]
        elif m["inclusion_probability"] is not None and len(by_probability) == 1:
            derived[m["item"]] = next(iter(by_probability))
    return derived


def managed_strata(sample: dict[str, Any]) -> dict[int, str]:
    return {m["item"]: m["stratum"] for m in sample["members"]}


def page_strata(body: str) -> dict[str, int]:
    """The sampled count per stratum that the audit page's sample table shows."""
    return {key: int(n) for key, _, n in re.findall(r"([\w|:-]+): (\d+) → (\d+)", body)}


def test_no_field_the_adjudicator_reads_derives_a_pending_verdict(corrected_world):
    # given a sample whose members are all in one stratum (the evaluator says inadmissible of
    # every item), most of them still open to people
    world = corrected_world
    slug, evaluator = world.a.slug, world.evaluators["a"].pk
    url = f"/api/projects/{slug}/audits/{evaluator}/samples/"
    page_url = f"/p/{slug}/certification/audits/{evaluator}/"
    pending = decidable_ids(world)
    api, page = _clients(world, "manager")
    managed = api.get(url).json()["results"][0]
    assert {m["item"] for m in managed["members"]} & pending
    # (the detector works: the manager's sample with the pending strata blanked still tells
    # them, through the design and the inclusion probabilities)
    blanked = {
        **managed,
        "members": [
            {**m, "stratum": None} if m["item"] in pending else m for m in managed["members"]
        ],
    }
    assert set(derived_verdicts(blanked)) >= pending & {m["item"] for m in managed["members"]}
    assert len([n for n in page_strata(page.get(page_url).content.decode()).values() if n]) == 1
    # when the adjudicator reads the sample (API) and the audit page
    api, page = _clients(world, "adjudicator")
    sample = api.get(url).json()["results"][0]
    body = page.get(page_url).content.decode()
    # then no field derives the verdict of a pending member, and the page shows no strata
    assert set(derived_verdicts(sample)) & pending == set()
    assert sample["design"] is None
    assert page_strata(body) == {}
    # while a closed member's stratum stays shown
    consensus = world.items["consensus"].pk
    assert derived_verdicts(sample)[consensus] == managed_strata(managed)[consensus]


def test_no_get_response_to_the_adjudicator_reveals_an_evaluator_verdict(corrected_world):
    # every GET URL of the application with every parameter, as the adjudicator: release files,
    # item pages, the queue and the side-by-side view included
    world = corrected_world
    api, page = _clients(world, "adjudicator")
    values = parameter_values(world)
    seen: dict[str, list[str]] = {}
    ok = 0
    for route in app_routes():
        names = route.params
        for combination in itertools.product(*(values[name] for name in names)):
            url = url_for(route, dict(zip(names, combination, strict=True)))
            response = api.get(url) if route.api else page.get(url, follow=True)
            ok += response.status_code == 200
            found = evaluator_leaks(world, *body_of(response))
            if found:
                seen[url] = found
    assert seen == {}
    assert ok >= 20
