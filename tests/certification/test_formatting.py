"""p-values are printed so that a tiny one never reads as zero (page filter and command)."""

import pytest
from django.template import Context, Template

from certification.formatting import p_value_text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "—"),
        (0.5, "0.5000"),
        (0.0312, "0.0312"),
        (0.0001, "0.0001"),
        (9.99e-5, "9.99e-05"),
        (3.2e-7, "3.20e-07"),
        ("3.2e-07", "3.20e-07"),
        (0.0, "< 1e-300"),
        (float("nan"), "—"),
    ],
)
def test_p_value_text(value, text):
    assert p_value_text(value) == text


def test_template_filter():
    out = Template("{% load calibration %}p = {{ p|pvalue }}").render(Context({"p": 1.5e-9}))
    assert out == "p = 1.50e-09"
