"""End to end in a real browser: a new manager starts a study without a terminal.

A user allowed to create projects (the ``labeling.add_project`` permission) creates a project
with the FaithBench preset and overlap 3 (each sample has two imported prior votes), edits its
label policy (a label's display text) and guideline (Markdown, previewed), uploads FaithBench
batch 1 on the import page, starts labelling and invites two annotators by e-mail. The e-mails
are read from the file backend's folder (as on the demo); each annotator opens their one-time
link, chooses a username and password, reads the policy and labels one item.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from labeling.models import (
    Annotation,
    ImportBatch,
    Invitation,
    InvitationStatus,
    LabelPolicy,
    Membership,
    Project,
    Role,
)
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.shared_data, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-secret"  # UserFactory's
SLUG = "faithbench-pilot"
GUIDELINE = "## Pilot rules\n\nJudge **each sentence** against the passage only."
NOT_SUPPORTED_TEXT = "Not in the passage"
ANNOTATORS = {"amber@example.org": "annotator-amber", "basil@example.org": "annotator-basil"}


def log_in(page: Any, base: str, username: str, next_path: str) -> None:
    page.goto(f"{base}/accounts/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")


def messages_text(page: Any) -> str:
    return page.locator("ul.messages").inner_text()


def join_links(mail_dir: Path) -> dict[str, str]:
    """The join link of each e-mail the file backend wrote, by recipient."""
    links = {}
    for path in sorted(mail_dir.iterdir()):
        text = path.read_text("utf-8")
        recipient = re.search(r"^To: (.+)$", text, re.M).group(1).strip()
        link = re.search(r"(http://\S+/accounts/join/[^\s/]+/)", text)
        if link:
            links[recipient] = link.group(1)
    return links


def label_next_item(page: Any, base: str, shot: Callable, who: str) -> None:
    """Ask for the next item and label it: every claim not supported, the answer inadmissible."""
    page.goto(f"{base}/p/{SLUG}/annotate/")
    with page.expect_navigation():
        page.click("#next-item")
    shot(page, f"next-{who}")
    page.wait_for_selector("form.labels-form .claim-row.active")
    rows = page.locator(".claim-row[data-claim-id]")
    assert rows.count() >= 1
    for n in range(rows.count()):
        claim_id = rows.nth(n).get_attribute("data-claim-id")
        page.check(f'input[name="claim-{claim_id}-label"][value="not_supported"]')
    page.check('input[name="answer_label"][value="inadmissible"]')
    shot(page, f"form-{who}")
    page.click("#submit")
    # the workbench saves in place and swaps in the next item (its status line says so); without
    # its script the page reloads with the message
    page.wait_for_function(
        """() => ["#workbench-status", "ul.messages"]
            .map((selector) => document.querySelector(selector))
            .some((el) => el && el.textContent.trim().startsWith("Saved"))"""
    )
    shot(page, f"submitted-{who}")


def test_a_new_manager_sets_up_faithbench_and_two_invited_annotators_label(
    live_server: Any,
    new_page: Callable,
    screenshot: Callable,
    shared_data: Path,
    settings: Any,
    tmp_path: Path,
):
    # given the e-mail backend of the demo (files in a folder) and a user allowed to create
    # projects, who is a member of nothing
    mail_dir = tmp_path / "mail"
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(mail_dir)
    batch = shared_data / "faithbench" / "data_for_release" / "batch_1.json"
    manager = UserFactory(username="new-manager")
    manager.user_permissions.add(Permission.objects.get(codename="add_project"))
    base = live_server.url
    page = new_page()

    # when they create a project with the FaithBench preset from the project list
    log_in(page, base, "new-manager", "/")
    page.click("#new-project")
    page.fill("#id_name", "FaithBench pilot")
    page.fill("#id_slug", SLUG)
    page.check('input[name="preset"][value="faithbench"]')
    # every FaithBench sample comes with two prior votes (the batch's annotators): a third
    # person per item
    page.fill("#id_overlap", "3")
    screenshot(page, "new-project")
    page.click("#create-project")
    page.wait_for_url(f"{base}/p/{SLUG}/policy/")
    screenshot(page, "policy")

    # and edit the policy: a label's display text and the guideline, previewed, then saved
    page.fill("#id_claim-not_supported-text", NOT_SUPPORTED_TEXT)
    page.fill("#id_guideline", GUIDELINE)
    page.click("#preview-policy")
    page.wait_for_selector("#policy-preview")
    assert page.locator("#preview-guideline strong").inner_text() == "each sentence"
    screenshot(page, "policy-preview")
    page.click("#save-policy")
    page.wait_for_url(f"{base}/p/{SLUG}/policy/")
    assert page.locator("#policy-form").count() == 1

    # and upload FaithBench batch 1 on the import page
    page.goto(f"{base}/p/{SLUG}/import/")
    page.set_input_files('input[name="file"]', str(batch))
    page.select_option('select[name="format"]', "faithbench")
    screenshot(page, "import")
    with page.expect_navigation():
        page.click('form button[type="submit"]:has-text("Import")')
    screenshot(page, "imported")
    assert "batch_1.json: batch #" in messages_text(page), page.content()[:3000]
    assert "items 50" in messages_text(page)

    # and start labelling on the settings page
    page.goto(f"{base}/p/{SLUG}/settings/")
    with page.expect_navigation():
        page.click("#start-labelling")
    assert "Labelling started" in messages_text(page), page.content()[:3000]

    # and invite two annotators by e-mail on the members page
    page.goto(f"{base}/p/{SLUG}/members/")
    for email in ANNOTATORS:
        page.fill("#id_invitee", email)
        page.select_option("#id_role", "annotator")
        with page.expect_navigation():
            page.click("#invite")
        assert "Invitation recorded" in messages_text(page)
    screenshot(page, "members")

    # then the project is the new manager's, with the policy they saved and the batch
    project = Project.objects.get(slug=SLUG)
    assert Membership.objects.get(project=project, user=manager).role == Role.MANAGER
    policy = LabelPolicy.objects.get(project=project)
    assert policy.guideline == GUIDELINE
    assert policy.label_details["claim"]["not_supported"]["text"] == NOT_SUPPORTED_TEXT
    assert policy.frozen_at is not None  # labelling started
    assert ImportBatch.objects.get(project=project).filename == "batch_1.json"
    assert project.overlap == 3
    # and nobody joined yet: two pending invitations, one e-mail with a join link each
    assert set(Invitation.objects.values_list("invitee", "status")) == {
        (email, InvitationStatus.PENDING) for email in ANNOTATORS
    }
    assert not Membership.objects.filter(project=project, role=Role.ANNOTATOR).exists()
    links = join_links(mail_dir)
    assert set(links) == set(ANNOTATORS)

    # when each annotator opens their link, sets a username and password, and labels one item
    for email, username in ANNOTATORS.items():
        person = new_page()
        person.goto(links[email])
        assert "FaithBench pilot" in person.locator("main, body").first.inner_text()
        person.fill("#id_username", username)
        person.fill("#id_password1", "Long-pass-phrase-1")
        person.fill("#id_password2", "Long-pass-phrase-1")
        screenshot(person, f"join-{username}")
        person.click("#join")
        person.wait_for_url(f"{base}/p/{SLUG}/")
        # the policy page shows them the manager's guideline and label text
        person.goto(f"{base}/p/{SLUG}/policy/")
        assert person.locator("#guideline strong").inner_text() == "each sentence"
        assert NOT_SUPPORTED_TEXT in person.locator("main").inner_text()
        label_next_item(person, base, screenshot, username)
        assert person.js_errors == [] and person.csp_violations == []

    # then both are annotators of the project, each with one submitted annotation
    for username in ANNOTATORS.values():
        membership = Membership.objects.get(project=project, user__username=username)
        assert membership.role == Role.ANNOTATOR
        assert (
            Annotation.objects.filter(item__project=project, annotator=membership.user).count() == 1
        )
    assert set(Invitation.objects.values_list("status", flat=True)) == {InvitationStatus.ACCEPTED}
    assert page.js_errors == [] and page.csp_violations == []
