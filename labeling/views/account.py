"""The "My account" page: API tokens (make, list, revoke), password, links to one's own work.

The work links lead to the user's figures in each project they label in (or manage).

A new token's secret is shown once, on the page that answers its creation (never stored, never
redirected through the session); the page is sent with ``Cache-Control: no-store``.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from labeling.exceptions import LabelingError
from labeling.forms import ApiTokenForm
from labeling.selectors.tokens import api_token_list, api_token_state
from labeling.selectors.work_reports import work_report_projects
from labeling.services.tokens import CreatedToken, api_token_create, api_token_revoke
from labeling.views.common import form_add_domain_error, signed_in_user


def _account_page(
    request: HttpRequest, form: ApiTokenForm, created: CreatedToken | None = None
) -> HttpResponse:
    now = timezone.now()
    tokens = [
        (token, api_token_state(token, now=now))
        for token in api_token_list(user=signed_in_user(request))
    ]
    return render(
        request,
        "labeling/account.html",
        {
            "form": form,
            "tokens": tokens,
            "created": created,
            "work": work_report_projects(user=signed_in_user(request)),
        },
    )


@never_cache
@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    """Show the user's tokens; a POST makes one and shows its secret once."""
    if request.method != "POST":
        return _account_page(request, ApiTokenForm())
    form = ApiTokenForm(request.POST)
    if not form.is_valid():
        return _account_page(request, form)
    try:
        created = api_token_create(user=signed_in_user(request), **form.cleaned_data)
    except LabelingError as exc:
        form_add_domain_error(form, exc)
        return _account_page(request, form)
    return _account_page(request, ApiTokenForm(), created)


@login_required
@require_http_methods(["POST"])
def account_token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of the user's tokens and go back to the account page.

    Raises:
        NotFound: not a token of the user (a 404 page).
    """
    token = api_token_revoke(actor=signed_in_user(request), token_id=token_id)
    messages.success(request, f"Token “{token.name}” revoked.")
    return redirect("account")
