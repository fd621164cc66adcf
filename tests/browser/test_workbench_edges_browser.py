"""The workbench's rough edges, keyboard only in a real browser: the suggested sentence is never
a title, a claim with nothing suggested says so beside it, the global keys n and q, the
guideline beside the task (below it on a narrow screen, the choice remembered per user), and
every text of the labelling and adjudication pages at WCAG contrast (>= 4.5:1) in each state,
in both colour schemes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from labeling.models import Role
from labeling.services import membership_set
from tests.browser.test_workbench_browser import PASSWORD, log_in, ready, unfocus
from tests.factories import UserFactory, start_labelling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLUG = "study"
TITLE = "Poseidon (film) ."
S1 = "Poseidon is a 2006 American disaster film directed by Wolfgang Petersen."
S2 = "It is the third adaptation of the novel by Paul Gallico."
SOURCE = "\n".join([TITLE, S1, S2])
# Shares "poseidon" and "film" with the title and with S1 alike: the first of equals was the title.
CLAIM_1 = "Poseidon (film) is a remake."
CLAIM_2 = "Zebras hum quietly at dawn."  # no word in common with the source


def record(external_id: str, claims: list[str], priors: list[dict] | None = None) -> dict:
    return {
        "external_id": external_id,
        "text": "What is Poseidon?",
        "sources": [{"id": f"doc-{external_id}", "text": SOURCE, "rank": 1}],
        "candidates": [
            {
                "id": "c0",
                "text": " ".join(claims),
                "generator": "model-a",
                "claims": [{"text": c} for c in claims],
                "prior_annotations": priors or [],
            }
        ],
    }


def prior(annotator: str, answer: str, *labels: str) -> dict:
    return {
        "annotator": annotator,
        "answer_label": answer,
        "claim_labels": [{"claim": n, "label": label} for n, label in enumerate(labels)],
    }


def person(project: Any, username: str, role: str = Role.ANNOTATOR) -> Any:
    user = UserFactory(username=username)
    membership_set(project=project, user=user, role=role)
    return user


def caret_text(page: Any) -> str:
    return page.evaluate(
        "() => CSS.highlights.has('ev-caret') ? [...CSS.highlights.get('ev-caret')][0].toString()"
        " : ''"
    )


def test_no_title_is_suggested_and_a_claim_without_suggestion_says_so_beside_it(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    import_records([record("q1", [CLAIM_1, CLAIM_2])])
    start_labelling(project, overlap=1)
    user = person(project, "annotator-amber")
    page = new_page()
    log_in(page, live_server.url, user.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")
    ready(page)
    unfocus(page)
    # the sentence suggested for claim 1 is the sentence, never the title line
    assert caret_text(page) == S1
    assert page.locator("#claim-row-0 .claim-note").count() == 0
    page.keyboard.press("c")
    page.keyboard.press("1")
    # claim 2 is active with nothing suggested: the row says so, and c leaves it active
    note = page.locator("#claim-row-1 .claim-note")
    assert note.is_visible() and "c cites nothing" in note.inner_text()
    assert caret_text(page) == ""
    page.keyboard.press("c")
    page.keyboard.press("1")  # supported needs evidence: claim 2 stays active, the note stays
    screenshot(page, "nothing-suggested")
    assert page.locator("#claim-row-1").get_attribute("class").split().count("active") == 1
    assert note.is_visible() and page.locator("#claim-row-1 .chip").count() == 0
    assert page.js_errors == []


def test_n_and_q_open_the_next_item_and_the_queue_from_any_project_page_but_not_while_typing(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable
):
    import_records([record("q1", [CLAIM_1]), record("q2", [CLAIM_2])])
    start_labelling(project, overlap=1)
    annotator = person(project, "annotator-amber")
    judge = person(project, "adjudicator-cyan", Role.ADJUDICATOR)
    base = live_server.url
    page = new_page()
    log_in(page, base, annotator.username, f"/p/{SLUG}/")
    # from the dashboard, n opens the labelling form in one key
    page.keyboard.press("n")
    page.wait_for_url(f"{base}/p/{SLUG}/annotate/*/")
    held = ready(page)
    # typed into a field, n and q are text
    page.focus("#id_comment")
    page.keyboard.type("nq")
    assert page.locator("#id_comment").input_value() == "nq"
    assert page.url.endswith(f"/annotate/{held}/")
    # q opens the annotator's queue page; n from there reopens the item held
    unfocus(page)
    page.keyboard.press("q")
    page.wait_for_url(f"{base}/p/{SLUG}/annotate/")
    page.keyboard.press("n")
    page.wait_for_url(f"{base}/p/{SLUG}/annotate/{held}/")
    # the keys are in the keyboard help and in the navigation
    assert "from any page of the project" in page.locator("#help-dialog").inner_text()
    assert page.locator("#nav-next kbd").inner_text() == "n"
    # an adjudicator's q opens the disagreement queue
    other = new_page()
    log_in(other, base, judge.username, f"/p/{SLUG}/")
    other.keyboard.press("q")
    other.wait_for_url(f"{base}/p/{SLUG}/adjudicate/")
    assert page.js_errors == [] and other.js_errors == []


def test_the_guideline_is_beside_the_task_below_it_when_narrow_and_remembered_per_user(
    live_server: Any, import_records: Callable, project: Any, browser: Any, screenshot
):
    import_records([record("q1", [CLAIM_1]), record("q2", [CLAIM_2])])
    start_labelling(project, overlap=2)
    amber = person(project, "annotator-amber")
    base = live_server.url

    def open_page(username: str, width: int) -> Any:
        context = browser.new_context(viewport={"width": width, "height": 900}, locale="en-GB")
        context.set_default_timeout(15_000)
        page = context.new_page()
        log_in(page, base, username, f"/p/{SLUG}/annotate/")
        page.keyboard.press("n")  # the item held, else the next one
        ready(page)
        return page

    def box(page: Any, selector: str) -> dict:
        return page.locator(selector).bounding_box()

    # wide: the guideline is open beside the task, in view
    wide = open_page(amber.username, 1440)
    screenshot(wide, "wide")
    panel, task = box(wide, "#guideline-panel"), box(wide, "#workbench")
    assert wide.locator("#guideline-panel").evaluate("d => d.open")
    assert panel["x"] >= task["x"] + task["width"] and panel["y"] < 900
    # g closes it, and the choice outlives a reload (the browser's localStorage, per user)
    unfocus(wide)
    wide.keyboard.press("g")
    assert not wide.locator("#guideline-panel").evaluate("d => d.open")
    wide.reload()
    ready(wide)
    assert not wide.locator("#guideline-panel").evaluate("d => d.open")
    # another user in the same browser still gets it open
    wide.click("header .user form button")  # log out
    cyan = person(project, "annotator-cyan")
    wide.goto(f"{base}/accounts/login/?next=/p/{SLUG}/annotate/")
    wide.fill("#id_username", cyan.username)
    wide.fill("#id_password", PASSWORD)
    wide.click("form.stacked button[type=submit]")
    wide.click("#next-item")
    ready(wide)
    assert wide.locator("#guideline-panel").evaluate("d => d.open")
    # narrow (390 px): below the task, never over the answer
    narrow = open_page(amber.username, 390)
    screenshot(narrow, "narrow")
    panel, answer = box(narrow, "#guideline-panel"), box(narrow, "#answer-labels")
    assert panel["y"] >= answer["y"] + answer["height"]
    assert panel["width"] <= 390


# The WCAG 2.1 contrast of every visible text of the page (each element's own text nodes, and
# each CSS highlight's first range) against the background it is drawn on, from the computed
# styles: the background is composited from the element up to the page; a highlight's colours
# are its ::highlight() rule's, resolved through a probe element where its text is.
CONTRAST = """() => {
  function rgba(value) {
    const m = /^rgba?\\(([^)]*)\\)$/.exec(value) || /^color\\(srgb ([^)]*)\\)$/.exec(value);
    if (!m) throw new Error("unparsed colour " + value);
    const parts = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    const scale = value.startsWith("color(") ? 255 : 1;
    return [parts[0] * scale, parts[1] * scale, parts[2] * scale, parts.length > 3 ? parts[3] : 1];
  }
  function over(top, bottom) {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  }
  function background(element) {
    const layers = [];
    for (let node = element; node && node.nodeType === 1; node = node.parentElement) {
      layers.push(rgba(getComputedStyle(node).backgroundColor));
    }
    const dark = matchMedia("(prefers-color-scheme: dark)").matches;
    let colour = dark ? [0, 0, 0, 1] : [255, 255, 255, 1];
    for (const layer of layers.reverse()) colour = over(layer, colour);
    return colour;
  }
  function luminance(c) {
    const f = (v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  }
  function ratio(fg, bg) {
    const a = luminance(fg), b = luminance(bg);
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  }
  function visible(element) {
    if (!element.getClientRects().length) return false;
    if (element.closest("[hidden], .chart-table, option")) return false;
    const style = getComputedStyle(element);
    return style.visibility === "visible" && Number(style.opacity) > 0;
  }
  const found = [];
  for (const element of document.querySelectorAll("body *")) {
    const own = Array.from(element.childNodes).some((n) => n.nodeType === 3 && n.data.trim());
    if (!own || !visible(element)) continue;
    const bg = background(element);
    const fg = over(rgba(getComputedStyle(element).color), bg);
    const classes = typeof element.className === "string" ? element.className.trim() : "";
    const what = element.tagName.toLowerCase() + (element.id ? "#" + element.id : "") +
      (classes ? "." + classes.split(/\\s+/).join(".") : "");
    found.push({ what: what, text: element.textContent.trim().slice(0, 40), ratio: ratio(fg, bg) });
  }
  const rules = {};
  for (const sheet of document.styleSheets) {
    for (const rule of sheet.cssRules) {
      const m = /^::highlight\\(([\\w-]+)\\)$/.exec(rule.selectorText || "");
      if (m) rules[m[1]] = rule.style;
    }
  }
  for (const [name, highlight] of CSS.highlights) {
    const range = [...highlight][0];
    if (!range || !rules[name]) continue;
    let host = range.commonAncestorContainer;
    if (host.nodeType !== 1) host = host.parentElement;
    const probe = document.createElement("span");
    probe.style.backgroundColor = rules[name].backgroundColor;
    if (rules[name].color) probe.style.color = rules[name].color;
    host.appendChild(probe);
    const bg = over(rgba(getComputedStyle(probe).backgroundColor), background(host));
    const fg = over(rgba(getComputedStyle(probe).color), bg);
    probe.remove();
    const text = range.toString().slice(0, 40);
    found.push({ what: "::highlight(" + name + ")", text: text, ratio: ratio(fg, bg) });
  }
  return found;
}"""


def low_contrast(page: Any, state: str, seen: set[str]) -> list[str]:
    """Every text of the page below 4.5:1 in both colour schemes, named with ``state``."""
    failures = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_timeout(50)  # one frame: the scheme's colours are computed
        for found in page.evaluate(CONTRAST):
            seen.add(found["what"])
            if found["ratio"] < 4.5:
                failures.append(
                    f"{scheme} {state}: {found['what']} {found['text']!r} {found['ratio']:.2f}"
                )
    page.emulate_media(color_scheme="light")
    return failures


def test_every_text_of_the_labelling_and_adjudication_pages_meets_wcag_contrast_in_each_state(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    # given an item to label, and one the imported votes disagree on (to adjudicate)
    import_records(
        [
            record("q1", [CLAIM_1, CLAIM_2]),
            record(
                "q2",
                [CLAIM_1, CLAIM_2],
                [
                    prior("ds-a", "admissible", "supported", "supported"),
                    prior("ds-b", "inadmissible", "supported", "contradicted"),
                ],
            ),
        ]
    )
    start_labelling(project, overlap=1)
    annotator = person(project, "annotator-amber")
    judge = person(project, "adjudicator-cyan", Role.ADJUDICATOR)
    base = live_server.url
    page = new_page()
    log_in(page, base, annotator.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")
    held = ready(page)
    unfocus(page)
    failures: list[str] = []
    seen: set[str] = set()
    # the active claim with its pre-selected sentence
    assert caret_text(page) == S1
    failures += low_contrast(page, "pre-selected", seen)
    # cited (the active claim's highlight, a chip), a label selected, the next claim active
    # with nothing suggested (its note)
    page.keyboard.press("c")
    page.keyboard.press("1")
    failures += low_contrast(page, "cited and selected", seen)
    # the cited span of a claim not active (its claim colour), problems listed
    page.keyboard.press("s")
    page.locator("#problem-summary").wait_for()
    failures += low_contrast(page, "problems", seen)
    page.keyboard.press("?")
    failures += low_contrast(page, "help", seen)
    page.keyboard.press("Escape")
    # the item closed (overlap 1) after the submit: its page is disabled
    page.keyboard.press("3")
    page.keyboard.press("Shift+Digit1")
    page.keyboard.press("s")
    page.wait_for_url(f"{base}/p/{SLUG}/annotate/")
    page.goto(f"{base}/p/{SLUG}/annotate/{held}/")
    page.locator("#not-editable").wait_for()
    failures += low_contrast(page, "disabled", seen)
    screenshot(page, "disabled")
    # the adjudication page: differing rows, badges, the decision form, a sentence selected
    judge_page = new_page()
    log_in(judge_page, base, judge.username, f"/p/{SLUG}/adjudicate/")
    judge_page.click("#queue a[href*='/adjudicate/']")
    judge_page.wait_for_selector("form.labels-form .claim-row.active")
    failures += low_contrast(judge_page, "adjudication", seen)
    judge_page.keyboard.press("]")
    failures += low_contrast(judge_page, "adjudication pre-selected", seen)
    screenshot(judge_page, "adjudication")

    # then no text is below 4.5:1, and the check saw the states it names
    assert failures == []
    for what in (
        "::highlight(ev-caret)",
        "::highlight(ev-active)",
        "::highlight(ev-0)",
        "span.chip-text",
        "p.claim-note.notice",
        "p.prefill-badge",
        "p#not-editable.notice",
    ):
        assert any(w.startswith(what) for w in seen), what


def test_a_running_jobs_page_updates_its_progress_in_place_and_loads_its_result_once(
    live_server: Any, project: Any, new_page: Callable
):
    from labeling.models import Job, JobStatus

    manager = person(project, "manager-mauve", Role.MANAGER)
    job = Job.objects.create(
        project=project, kind="labelling_start", actor=manager, progress_total=400
    )
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, progress_done=100)
    base = live_server.url
    page = new_page()
    log_in(page, base, manager.username, f"/p/{SLUG}/jobs/{job.pk}/")
    assert page.locator("#job-percent").inner_text() == "25%"
    page.evaluate("window.__notReloaded = true")  # survives only while the page is not loaded
    # when the job advances, the page shows it without a reload
    Job.objects.filter(pk=job.pk).update(progress_done=300, message="queueing items")
    page.wait_for_function("() => document.getElementById('job-percent').textContent === '75%'")
    assert page.evaluate("window.__notReloaded === true")
    assert page.locator("#job-count").inner_text() == " (300 of 400 items)"
    assert page.locator("#job-message").inner_text() == " · queueing items"
    assert page.locator("#job-progress").evaluate("bar => bar.value") == 75
    # when it ends, the page is loaded once and shows the result
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.DONE,
        finished_at=timezone.now(),
        progress_done=400,
        result={"labelling_started_at": "2026-01-02 03:04", "items": 400},
    )
    page.locator("#job-result").wait_for()
    assert page.evaluate("window.__notReloaded === undefined")
    assert page.locator("#job-state").inner_text() == "done"
    assert page.js_errors == [] and page.csp_violations == []


def test_p_is_not_offered_when_the_vote_closed_the_item_and_n_goes_back_to_the_item_held(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable
):
    # given overlap 1: each vote closes its item
    import_records([record(f"q{n}", [CLAIM_1]) for n in range(3)])
    start_labelling(project, overlap=1)
    user = person(project, "annotator-amber")
    base = live_server.url
    page = new_page()
    log_in(page, base, user.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")
    first = ready(page)
    unfocus(page)
    # when the item is labelled and submitted while the next one is reserved ahead
    page.wait_for_selector("#workbench[data-reserve]")
    for key in ("c", "1", "Shift+Digit1", "s"):
        page.keyboard.press(key)
    page.wait_for_function(
        f"() => document.querySelector('#item-meta').dataset.assignmentId !== '{first}'"
    )
    page.wait_for_function("() => !document.querySelector('#workbench').dataset.saving")
    held = page.locator("#item-meta").get_attribute("data-assignment-id")
    # then "Revise previous" is gone (the vote closed the item), and p does nothing
    assert page.locator("#revise-previous").count() == 0
    page.keyboard.press("p")
    page.wait_for_timeout(300)
    assert page.url.endswith(f"/annotate/{held}/")
    # and the closed item's page goes back to the item held with one key
    page.goto(f"{base}/p/{SLUG}/annotate/{first}/")
    assert page.locator("#not-editable").is_visible()
    page.keyboard.press("n")
    page.wait_for_url(f"{base}/p/{SLUG}/annotate/{held}/")
    assert page.js_errors == []
