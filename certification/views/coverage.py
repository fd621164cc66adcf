"""The coverage calculator page: spreads of conformal coverage for sizes a user enters.

It reads no project data: every signed-in user may use it. The form is read from the query
string (GET), so a result has a link; invalid input answers 400 with the field's error.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from certification.certificates.calculator import coverage_calculator_report
from certification.forms import CoverageCalculatorForm

EXAMPLE = {"n": 12288, "alpha": "0.1", "n_test": 12288}


@login_required
@require_safe
def coverage_calculator_view(request: HttpRequest) -> HttpResponse:
    """Show the calculator form and, for valid input, its figures."""
    form = CoverageCalculatorForm(request.GET or None)
    report = None
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        report = coverage_calculator_report(
            n_calibration=data["n"],
            alpha=data["alpha"],
            n_test=data["n_test"],
            group_size=data["group_size"],
            icc=data["icc"],
        )
    status = 400 if form.is_bound and not form.is_valid() else 200
    # the API request giving the figures shown (the page's own query), or an example
    query = urlencode(
        {k: v for k, v in form.cleaned_data.items() if v is not None} if report else EXAMPLE
    )
    context = {"form": form, "report": report, "api_query": query}
    return render(request, "certification/coverage_calculator.html", context, status=status)
