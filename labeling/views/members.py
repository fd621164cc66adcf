"""People pages: members and invitations, accepting, joining, and the password reset.

A project's members and invitations are for its managers; an account accepts or declines its
own invitations; an e-mailed link opens the join page; the password reset says when its e-mail
could not be sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordResetForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template import loader
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.exceptions import LabelingError, NotFound
from labeling.forms import JoinForm, MembershipChangeForm, MembershipInviteForm
from labeling.mail import mail_send
from labeling.models import Project, Role
from labeling.selectors.members import invitation_list
from labeling.selectors.pages import member_list
from labeling.services.members import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_for_token,
    invitation_join,
    invitation_revoke,
    membership_change,
    membership_deactivate,
    membership_reactivate,
    membership_remove,
)
from labeling.views.common import form_add_domain_error, page_context, project_for, signed_in_user

# Member actions of the members page: POST ``action`` -> (service, message after it).
_MEMBER_ACTIONS: dict[str, tuple[Callable[..., Any], str]] = {
    "deactivate": (membership_deactivate, "{user} is deactivated; their leases were given back."),
    "reactivate": (membership_reactivate, "{user} is active again."),
    "remove": (membership_remove, "{user} was removed; their labels stay."),
}


def _site(request: HttpRequest) -> str:
    """``scheme://host`` of the request, for links in e-mails."""
    return request.build_absolute_uri("/")


def _invite_sent_message(request: HttpRequest, invitee: str, email_failed: bool) -> None:
    if email_failed:
        messages.error(
            request,
            f"The invitation of {invitee} is recorded, but its e-mail could not be sent (the "
            "failure is logged). Check the e-mail settings, then revoke it and invite again.",
        )
    else:
        messages.success(
            request,
            f"Invitation recorded for {invitee}. An existing account sees it on its project "
            "list; a new person gets a link by e-mail. Nobody joins before accepting.",
        )


def _post_member_action(request: HttpRequest, project: Project, action: str) -> str | None:
    """Run one member or invitation action of the members page; return its error, if any."""
    user_id = request.POST.get("user_id", "")
    target = int(user_id) if user_id.isdigit() and len(user_id) < 12 else 0
    try:
        if action == "change":
            form = MembershipChangeForm(request.POST)
            if not form.is_valid():
                return "Choose a valid role."
            membership = membership_change(
                project=project,
                actor=request.user,
                user_id=form.cleaned_data["user_id"],
                role=form.cleaned_data["role"],
            )
            messages.success(request, f"{membership.user} is now {membership.role}.")
        elif action == "revoke":
            raw = request.POST.get("invitation_id", "")
            invitation = invitation_revoke(
                project=project,
                actor=request.user,
                invitation_id=int(raw) if raw.isdigit() and len(raw) < 12 else 0,
            )
            messages.success(request, f"The invitation of {invitation.invitee} is revoked.")
        else:
            service, done = _MEMBER_ACTIONS[action]
            name = next(
                (
                    m.user.get_username()
                    for m in member_list(project=project)
                    if m.user_id == target
                ),
                str(target),
            )
            service(project=project, actor=request.user, user_id=target)
            messages.success(request, done.format(user=name))
    except LabelingError as exc:
        return exc.message
    return None


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def project_members(request: HttpRequest, slug: str) -> HttpResponse:
    """Members and invitations (managers): invite, change role, deactivate, remove, revoke.

    POST ``action`` is one of ``invite``, ``change``, ``deactivate``, ``reactivate``,
    ``remove`` or ``revoke``. The invite answers the same whether the account exists or not.
    """
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    action = request.POST.get("action", "")
    invite_form = MembershipInviteForm(request.POST if action == "invite" else None)
    member_error = None
    if request.method == "POST" and action == "invite":
        if invite_form.is_valid():
            try:
                sent = invitation_create(
                    project=project,
                    actor=request.user,
                    site=_site(request),
                    **invite_form.cleaned_data,
                )
            except LabelingError as exc:
                form_add_domain_error(invite_form, exc)
            else:
                _invite_sent_message(request, sent.invitation.invitee, sent.email_failed)
                return redirect("project-members", slug=project.slug)
    elif request.method == "POST":
        if action in ("change", "revoke", *_MEMBER_ACTIONS):
            member_error = _post_member_action(request, project, action)
        else:
            member_error = "Unknown action."
        if member_error is None:
            return redirect("project-members", slug=project.slug)
    status = 400 if request.method == "POST" else 200
    context = page_context(
        project,
        role,
        members=member_list(project=project),
        invitations=invitation_list(project=project)[:100],
        invite_form=invite_form,
        change_error=member_error,
        roles=Role.choices,
    )
    return render(request, "labeling/members.html", context, status=status)


@login_required
@require_http_methods(["POST"])
def invitation_respond(request: HttpRequest, invitation_id: int, answer: str) -> HttpResponse:
    """Accept (``answer="accept"``) or decline an invitation addressed to the user's account.

    Accepting leads to the project; declining back to the project list. An invitation of
    another account is 404.
    """
    user = signed_in_user(request)
    try:
        if answer == "accept":
            membership = invitation_accept(invitation_id=invitation_id, actor=user)
        else:
            invitation = invitation_decline(invitation_id=invitation_id, actor=user)
    except NotFound:
        raise
    except LabelingError as exc:
        messages.error(request, exc.message)
        return redirect("project-list")
    if answer == "accept":
        messages.success(request, f"You joined {membership.project.name} as {membership.role}.")
        return redirect("project-detail", slug=membership.project.slug)
    messages.success(request, f"You declined the invitation to {invitation.project.name}.")
    return redirect("project-list")


@require_http_methods(["GET", "HEAD", "POST"])
def invitation_join_view(request: HttpRequest, token: str) -> HttpResponse:
    """The one-time join page of an e-mailed invitation: choose a username and a password.

    The new account is signed in and taken to the project. A used, revoked or expired link
    answers 404 with a page that says so.
    """
    try:
        invitation = invitation_for_token(token)
    except NotFound as exc:
        return render(request, "registration/join.html", {"invalid": exc.message}, status=404)
    form = JoinForm(request.POST or None)
    if request.method == "POST" and not settings.CERTLABEL_PASSWORD_LOGIN:
        # Local passwords are off: the invitation is accepted by a single sign-on of the
        # invited address (labeling.services.sso), which the page offers instead.
        form.add_error(None, "local passwords are switched off: sign in with single sign-on")
    elif request.method == "POST" and form.is_valid():
        try:
            membership = invitation_join(
                token=token,
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
            )
        except LabelingError as exc:
            form_add_domain_error(form, exc)
            if exc.field == "password":
                form.add_error("password1", exc.message)
        else:
            login(request, membership.user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome! You joined {invitation.project.name}.")
            return redirect("project-detail", slug=membership.project.slug)
    status = 400 if request.method == "POST" else 200
    return render(
        request, "registration/join.html", {"form": form, "invitation": invitation}, status=status
    )


class ReportingPasswordResetForm(PasswordResetForm):
    """Django's password reset form, sending through :func:`labeling.mail.mail_send`.

    ``failed`` is True after :meth:`save` when an e-mail could not be sent (logged).
    """

    failed = False

    def send_mail(
        self,
        subject_template_name: str,
        email_template_name: str,
        context: dict[str, Any],
        from_email: str | None,
        to_email: str,
        html_email_template_name: str | None = None,
    ) -> None:
        """Render and send one reset e-mail; remember a failure instead of raising."""
        subject = "".join(loader.render_to_string(subject_template_name, context).splitlines())
        body = loader.render_to_string(email_template_name, context)
        if not mail_send(subject=subject, body=body, to=to_email, purpose="password_reset"):
            self.failed = True


class PasswordResetView(auth_views.PasswordResetView):
    """The "Forgot password" page: sends the reset link; says so when the e-mail could not be sent.

    The page answers the same whether the address belongs to an account or not; only a
    failure to send (the mail server is down) is reported, as a 503 page.
    """

    form_class = ReportingPasswordResetForm

    def form_valid(self, form: Any) -> HttpResponse:
        """Send the e-mail; a failed send renders the form again with the error.

        With local passwords switched off nothing is sent: a password set now would wait,
        unseen, for the day passwords are switched back on.
        """
        if not settings.CERTLABEL_PASSWORD_LOGIN:
            form.add_error(None, "Local passwords are switched off: sign in with single sign-on.")
            return self.render_to_response(self.get_context_data(form=form), status=403)
        response = super().form_valid(form)
        if form.failed:
            form.add_error(
                None,
                "The e-mail could not be sent (the failure is logged). Try again later or ask "
                "an administrator.",
            )
            return self.render_to_response(self.get_context_data(form=form), status=503)
        return response
