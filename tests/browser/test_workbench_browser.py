"""The labelling workbench in a real browser, keyboard only: items with 1, 4 and 6 claims are
labelled and cited without the mouse within N + 2k + 2 keystrokes (N claims, k citations),
every problem is listed at once, a skip is undone, and the back button opens the previous item.

The source has emoji (one with a skin-tone modifier, a flag, each two astral code points),
a combining accent and CRLF line endings; the stored offsets are checked against
``text.index(quote)`` in the stored text, computed here independently of the application.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from labeling.models import Annotation, Assignment, AssignmentStatus, Role, SourceVersion
from labeling.services import membership_set
from tests.factories import UserFactory, start_labelling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-secret"  # UserFactory's
SLUG = "study"

S1 = "The bridge opened in 1932 \U0001f44d\U0001f3fd."
S2 = "It spans the harbour of Sydney; cafe\u0301s line its south end \U0001f1e6\U0001f1fa."
S3 = "About 160,000 vehicles cross it each day."
S4 = "Its arch is 503 metres long."
S5 = "Painting the whole bridge takes ten years \U0001f3a8."
S6 = "The pylons are faced with granite."
SOURCE = "\r\n".join([S1, S2, S3, S4, S5, S6])


def record(external_id: str, question: str, claims: list[str]) -> dict[str, Any]:
    """One question with one candidate whose claims are ``claims`` (the answer is their text)."""
    return {
        "external_id": external_id,
        "text": question,
        "sources": [{"id": f"doc-{external_id}", "text": SOURCE, "rank": 1}],
        "candidates": [
            {
                "id": "c0",
                "text": " ".join(claims),
                "generator": "model-a",
                "claims": [{"text": c} for c in claims],
            }
        ],
    }


# Per question: the claims, then the keys pressed (each a keystroke) and the expected labels and
# quotes per claim. ``c`` cites the selection (the sentence closest to the claim is selected when
# the claim becomes active), ``]`` moves to the next sentence, Shift+ArrowRight extends by a word;
# digits are the default policy's label keys (``0`` is "can't decide").
PLANS: dict[str, dict[str, Any]] = {
    "When did the bridge open?": {
        "claims": ["The bridge opened in 1932."],
        "keys": ["c", "1", "Shift+Digit1", "s"],
        "labels": [("supported", [S1])],
        "answer": "admissible",
    },
    "What does the bridge span and carry?": {
        "claims": [
            "It spans the harbour of Sydney.",
            "About 160,000 vehicles cross it each day.",
            "Its arch is 600 metres long.",
            "Painting takes twenty years.",
        ],
        "keys": [
            "c",
            "1",
            "Shift+ArrowRight",
            "Shift+ArrowRight",
            "c",
            "1",
            "c",
            "2",
            "3",
            "Shift+Digit1",
            "s",
        ],  # fmt: skip
        "labels": [
            ("supported", [S2]),
            ("supported", [S3 + "\r\nIts arch"]),
            ("contradicted", [S4]),
            ("not_supported", []),
        ],
        "answer": "admissible",
    },
    "Tell me about the bridge.": {
        "claims": [
            "The bridge opened in 1932.",
            "Cafe\u0301s line its south end.",
            "Painting takes ten years.",
            "The pylons are steel.",
            "Many vehicles cross it.",
            "It is 503 metres long.",
        ],
        "keys": [
            "c",
            "]",
            "c",
            "1",
            "c",
            "1",
            "c",
            "1",
            "c",
            "2",
            "0",
            "3",
            "Shift+Digit2",
            "s",
        ],  # fmt: skip
        "labels": [
            ("supported", [S1, S2]),
            ("supported", [S2]),
            ("supported", [S5]),
            ("contradicted", [S6]),
            ("cannot_decide", []),
            ("not_supported", []),
        ],
        "answer": "inadmissible",
    },
}


def log_in(page: Any, base: str, username: str, next_path: str) -> None:
    page.goto(f"{base}/accounts/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")


def ready(page: Any) -> str:
    """Wait until the workbench script has mounted an item; return its assignment id."""
    page.wait_for_selector("#workbench[data-ready]")
    page.wait_for_function(
        "() => document.querySelector('#workbench').dataset.ready === "
        "document.querySelector('#item-meta').dataset.assignmentId"
    )
    return page.locator("#item-meta").get_attribute("data-assignment-id")


def unfocus(page: Any) -> None:
    """Leave any field: keys go to the page (as after Esc or a click on the text)."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def setup_people(project: Any) -> Any:
    user = UserFactory(username="annotator-amber")
    membership_set(project=project, user=user, role=Role.ANNOTATOR)
    return user


def expected(quotes: list[str]) -> list[tuple[int, int, str]]:
    return sorted((SOURCE.index(q), SOURCE.index(q) + len(q), q) for q in quotes)


def test_keyboard_only_labelling_of_1_4_and_6_claims_within_the_keystroke_budget(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    # given three items (1, 4 and 6 claims) over a source with emoji, an accent and CRLF
    import_records(
        [record(f"q{i}", q, plan["claims"]) for i, (q, plan) in enumerate(PLANS.items())]
    )
    start_labelling(project, overlap=1)
    user = setup_people(project)
    stored = SourceVersion.objects.filter(text=SOURCE)
    assert stored.count() == 3 and "\r\n" in SOURCE
    page = new_page()
    base = live_server.url
    log_in(page, base, user.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")

    seen: dict[str, tuple[str, int, int]] = {}
    for n in range(3):
        assignment_id = ready(page)
        question = page.locator("#question-text").inner_text()
        plan = PLANS[question]
        claims, keys = len(plan["claims"]), plan["keys"]
        citations = sum(len(quotes) for _, quotes in plan["labels"])
        screenshot(page, f"item-{claims}-claims")
        # when the annotator labels the item with the keyboard only (focus on the page body)
        unfocus(page)
        for key in keys[:-1]:
            page.keyboard.press(key)
        screenshot(page, f"item-{claims}-claims-labelled")
        page.keyboard.press(keys[-1])
        if n < 2:
            page.wait_for_function(
                f"() => document.querySelector('#workbench').dataset.ready !== '{assignment_id}'"
            )
        else:
            page.wait_for_url(f"{base}/p/{SLUG}/annotate/")
        # then the item took at most N + 2k + 2 keystrokes
        assert len(keys) <= claims + 2 * citations + 2, (question, len(keys))
        seen[question] = (assignment_id, len(keys), claims + 2 * citations + 2)

    screenshot(page, "queue-done")
    assert "No items are waiting" in page.content()
    assert page.js_errors == [] and page.csp_violations == []

    # and every label and span is stored, with the code-point offsets of its quote
    for question, (assignment_id, _, _) in seen.items():
        plan = PLANS[question]
        annotation = Annotation.objects.get(assignment_id=int(assignment_id))
        revision = annotation.current
        assert revision.answer_label == plan["answer"]
        labels = {cl.claim.index: cl for cl in revision.claim_labels.select_related("claim")}
        for index, (label, quotes) in enumerate(plan["labels"]):
            stored_spans = sorted((e.start, e.end, e.quote) for e in labels[index].evidence.all())
            assert (labels[index].label, stored_spans) == (label, expected(quotes)), (
                question,
                index,
            )
    # the keystrokes per item against their budgets: 4/5, 11/12, 14/18
    assert sorted((k, b) for _, k, b in seen.values()) == [(4, 5), (11, 12), (14, 18)]


def test_every_problem_is_listed_at_once_and_fixed_by_keyboard(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    question = "What does the bridge span and carry?"
    import_records([record("q1", question, PLANS[question]["claims"])])
    start_labelling(project, overlap=1)
    user = setup_people(project)
    page = new_page()
    log_in(page, live_server.url, user.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")
    ready(page)
    unfocus(page)
    # when claim 1 gets "supported" with no evidence, claim 3 "evidence unavailable" with no
    # reason, and nothing else, then submit
    page.keyboard.press("1")  # claim 1: supported, stays active (it needs evidence)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("4")  # claim 3: evidence unavailable; the reason select gets the focus
    unfocus(page)
    page.keyboard.press("s")
    # then every problem is listed at once, in the page's words, and next to each claim
    summary = page.locator("#problem-summary")
    summary.wait_for()
    screenshot(page, "all-problems")
    items = [t.strip() for t in summary.locator("li").all_inner_texts()]
    assert items == [
        "Claim 1 — 'supported' needs evidence: select text in a source and press c",
        "Claim 2 — choose a label",
        "Claim 3 — 'evidence unavailable' needs a reason: choose why the evidence is unavailable",
        "Claim 4 — choose a label",
        "The answer — choose a label",
    ]
    assert page.locator("#claim-row-0 .problem-inline").inner_text() == (
        "'supported' needs evidence: select text in a source and press c"
    )
    assert Annotation.objects.count() == 0
    # when the annotator finds the evidence by typing, cites it, and fixes the rest
    page.keyboard.press("k")
    page.keyboard.press("k")
    page.keyboard.press("/")
    page.keyboard.type("harbour of Sydney")
    page.keyboard.press("Enter")
    page.keyboard.press("c")  # claim 1 is complete: claim 2 becomes active
    page.keyboard.press("3")  # claim 2; the next unlabelled claim is claim 4
    page.keyboard.press("3")  # claim 4; claim 3 (no reason yet) becomes active
    page.keyboard.press("r")  # claim 3's reason
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.keyboard.press("Shift+Digit1")
    page.keyboard.press("s")
    page.wait_for_url(f"{live_server.url}/p/{SLUG}/annotate/")
    annotation = Annotation.objects.get()
    first = annotation.current.claim_labels.get(claim__index=0)
    assert [(e.start, e.end, e.quote) for e in first.evidence.all()] == expected(
        ["harbour of Sydney"]
    )
    third = annotation.current.claim_labels.get(claim__index=2)
    assert (third.label, third.reason) == ("evidence_unavailable", "not_found")
    assert page.js_errors == []


def test_skip_needs_a_reason_and_can_be_undone_and_back_opens_the_previous_item(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    import_records(
        [record(f"q{i}", q, plan["claims"]) for i, (q, plan) in enumerate(PLANS.items())]
    )
    start_labelling(project, overlap=1)
    user = setup_people(project)
    page = new_page()
    base = live_server.url
    log_in(page, base, user.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")
    first = ready(page)
    first_url = page.url
    unfocus(page)
    # when the annotator asks to skip: no reason is chosen, so nothing happens but a prompt
    page.keyboard.press("Shift+S")
    assert page.evaluate("() => document.activeElement.name") == "reason"
    assert page.locator("#id_skip_reason").input_value() == ""
    page.keyboard.press("Enter")
    assert page.locator("#skip-problem").inner_text() == "Choose why you skip this item."
    assert Assignment.objects.get(pk=int(first)).status == AssignmentStatus.LEASED
    # with a reason, the item is skipped and the next one swapped in
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => document.querySelector('#workbench').dataset.ready !== '{first}'"
    )
    second = ready(page)
    screenshot(page, "skipped-with-undo")
    assert Assignment.objects.get(pk=int(first)).status == AssignmentStatus.SKIPPED
    assert page.locator("#undo-skip").is_visible()
    assert page.locator("#progress-skipped").inner_text() == "1"
    # when the skip is undone (key u), the skipped item is the annotator's again
    unfocus(page)
    page.keyboard.press("u")
    page.wait_for_function(
        f"() => document.querySelector('#workbench').dataset.ready === '{first}'"
    )
    assert page.url == first_url
    assert Assignment.objects.get(pk=int(first)).status == AssignmentStatus.LEASED
    # it is labelled; the next item is the one held since the skip
    plan = PLANS[page.locator("#question-text").inner_text()]
    unfocus(page)
    for key in plan["keys"]:
        page.keyboard.press(key)
    page.wait_for_function(
        f"() => document.querySelector('#workbench').dataset.ready === '{second}'"
    )
    # the save running behind the next item is answered ("Revise previous" is offered only while
    # that vote leaves its item open, which the comparison after it decides)
    page.wait_for_function("() => !document.querySelector('#workbench').dataset.saving")
    # then the back button opens the previous item (submitted: its revision form)
    with page.expect_navigation():
        page.go_back()
    assert page.url == first_url
    assert ready(page) == first
    assert page.locator("h1").inner_text() == "Revise your annotation"
    screenshot(page, "back-to-previous")
    # and a reload keeps the item
    page.reload()
    assert ready(page) == first and page.url == first_url
    assert page.js_errors == [] and page.csp_violations == []


def test_help_overlay_traps_focus_and_closes_with_escape_and_the_guideline_toggles(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    question = "When did the bridge open?"
    import_records([record("q1", question, PLANS[question]["claims"])])
    start_labelling(project, overlap=1)
    user = setup_people(project)
    page = new_page()
    log_in(page, live_server.url, user.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")
    ready(page)
    unfocus(page)
    page.keyboard.press("?")
    dialog = page.locator("#help-dialog")
    assert dialog.is_visible()
    screenshot(page, "help")
    for _ in range(4):
        page.keyboard.press("Tab")
        assert page.evaluate(
            "() => document.getElementById('help-dialog').contains(document.activeElement)"
        )
    page.keyboard.press("Escape")
    assert not dialog.is_visible()
    # the guideline is open beside the task until closed (g)
    assert page.locator("#guideline-panel").evaluate("d => d.open")
    assert page.locator("#guideline-version").inner_text().startswith("Guideline v")
    screenshot(page, "guideline")
    page.keyboard.press("g")
    assert not page.locator("#guideline-panel").evaluate("d => d.open")
    # the cited span is highlighted in the claim's colour (CSS Custom Highlight API)
    page.keyboard.press("c")
    assert page.evaluate("() => CSS.highlights.has('ev-active')")
    assert page.evaluate("() => [...CSS.highlights.get('ev-active')][0].toString()") == S1
    page.keyboard.press("x")
    assert page.locator("#claim-row-0 .chip").count() == 0
    assert page.js_errors == []
