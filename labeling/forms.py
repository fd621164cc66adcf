"""Forms of the labelling pages: input parsing only; rules live in the services (STYLE.md C5)."""

from __future__ import annotations

import secrets
from typing import Any

from django import forms

from labeling.importers import formats
from labeling.models import Partition
from labeling.selectors import UNASSIGNED

DEFAULT_PROPORTIONS: dict[str, float] = {
    Partition.DEV: 0.2,
    Partition.CALIBRATION: 0.4,
    Partition.TEST: 0.4,
}


def format_choices() -> list[tuple[str, str]]:
    """Return the importable formats as form choices, native first."""
    known = formats()
    names = sorted(known, key=lambda name: (name != "native", name))
    return [(name, f"{name} — {known[name].description}") for name in names]


class ImportForm(forms.Form):
    """A workload file and its format."""

    file = forms.FileField(help_text="A workload file; native is JSONL, one question per line.")
    format = forms.ChoiceField(initial="native")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Formats are read at request time: adapters register in labeling.importers.formats().
        self.fields["format"].choices = format_choices()


class PartitionForm(forms.Form):
    """The seed and declared proportions of the grouped split (checked by ``partition_freeze``)."""

    seed = forms.IntegerField(
        min_value=0,
        max_value=2**63 - 1,
        help_text="Recorded with the split; the same seed and data give the same split.",
    )
    dev = forms.FloatField(min_value=0, max_value=1, initial=DEFAULT_PROPORTIONS[Partition.DEV])
    calibration = forms.FloatField(
        min_value=0, max_value=1, initial=DEFAULT_PROPORTIONS[Partition.CALIBRATION]
    )
    test = forms.FloatField(min_value=0, max_value=1, initial=DEFAULT_PROPORTIONS[Partition.TEST])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A fresh suggestion each time; the manager may replace it. Not a secret, just unbiased.
        self.fields["seed"].initial = secrets.randbelow(2**31)

    def proportions(self) -> dict[str, float]:
        """Return the cleaned proportions keyed by partition."""
        return {p: self.cleaned_data[p] for p in Partition.values}


class ItemFilterForm(forms.Form):
    """Filters of the item browser; invalid values are reported and ignored."""

    partition = forms.ChoiceField(required=False)
    generator = forms.ChoiceField(required=False)
    q = forms.CharField(required=False, max_length=200, label="Search")

    def __init__(self, *args: Any, generators: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["partition"].choices = [
            ("", "any"),
            *Partition.choices,
            (UNASSIGNED, UNASSIGNED),
        ]
        self.fields["generator"].choices = [("", "any"), *((g, g) for g in generators)]

    def filters(self) -> dict[str, str]:
        """Return the filters that are valid and set; invalid ones are left out (and reported)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if v}
