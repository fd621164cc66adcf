"""factory_boy factories for tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils import timezone


class UserFactory(factory.django.DjangoModelFactory):
    """A user with password ``pw-<username>``."""

    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "pw-secret")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):  # noqa: N805
        if create:
            obj.save()


# -- labelling work ---------------------------------------------------------------------------


class AssignmentFactory(factory.django.DjangoModelFactory):
    """A leased assignment of ``item`` (required) to a new annotator, in its smallest free slot.

    Kept consistent with what ``item_claim_next`` writes: a live (leased or submitted) assignment
    adds one to ``item.assigned_count``, and the annotator is made an annotator of the item's
    project if they are not a member yet. Pass ``slot`` to force one.
    """

    class Meta:
        model = "labeling.Assignment"

    annotator = factory.SubFactory(UserFactory)
    status = "leased"
    leased_at = factory.LazyFunction(timezone.now)
    lease_expires_at = factory.LazyAttribute(lambda a: a.leased_at + timedelta(minutes=30))

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        from labeling.models import LIVE_ASSIGNMENT_STATUSES, Item, Membership, Role

        item = kwargs["item"]
        annotator = kwargs["annotator"]
        if "slot" not in kwargs:
            held = set(
                model_class.objects.filter(
                    item=item, status__in=LIVE_ASSIGNMENT_STATUSES
                ).values_list("slot", flat=True)
            )
            kwargs["slot"] = next(s for s in range(1, 1000) if s not in held)
        if kwargs["status"] == "submitted" and kwargs.get("submitted_at") is None:
            kwargs["submitted_at"] = timezone.now()
        Membership.objects.get_or_create(
            project_id=item.project_id, user=annotator, defaults={"role": Role.ANNOTATOR}
        )
        assignment = super()._create(model_class, *args, **kwargs)
        if assignment.status in LIVE_ASSIGNMENT_STATUSES:
            Item.objects.filter(pk=item.pk).update(assigned_count=F("assigned_count") + 1)
            item.refresh_from_db()
        return assignment


def start_labelling(project: Any, **settings: Any) -> Any:
    """Configure (``overlap=`` etc.) and start labelling through the real services.

    A new manager does it. Returns the refreshed project.
    """
    from labeling.models import Role
    from labeling.services import (
        membership_set,
        project_labelling_configure,
        project_labelling_start,
    )

    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    if settings:
        project_labelling_configure(project=project, actor=manager, **settings)
    return project_labelling_start(project=project, actor=manager)


# A pinned source with the characters browsers count differently from Python: an emoji with a
# skin-tone modifier (two code points, four UTF-16 units), a combining accent, a flag (two
# regional indicators) and CRLF line endings.
WORK_SOURCE = (
    "The bridge opened in 1932 \U0001f44d\U0001f3fd.\r\n"
    "It spans the harbour of Sydney; cafe\u0301s line its south end \U0001f1e6\U0001f1fa.\r\n"
    "About 160,000 vehicles cross it each day."
)


def work_record(external_id: str = "q1", **overrides: Any) -> dict[str, Any]:
    """A native record for labelling: one :data:`WORK_SOURCE`, two candidates with claims.

    ``c0`` has two claims (both true), ``c1`` one (false).
    """
    record: dict[str, Any] = {
        "external_id": external_id,
        "text": "When did the bridge open, and what does it span?",
        "metadata": {"reference": "opened 1932; spans Sydney harbour"},
        "sources": [{"id": f"doc-{external_id}", "text": WORK_SOURCE, "rank": 1}],
        "candidates": [
            {
                "id": "c0",
                "text": "It opened in 1932. It spans the harbour.",
                "generator": "model-a",
                "claims": [{"text": "It opened in 1932."}, {"text": "It spans the harbour."}],
            },
            {
                "id": "c1",
                "text": "It opened in 1931.",
                "generator": "model-b",
                "claims": [{"text": "It opened in 1931."}],
            },
        ],
    }
    record.update(overrides)
    return record


def utf16_span(text: str, quote: str, occurrence: int = 0) -> tuple[int, int]:
    """Return the UTF-16 offsets a browser reports for the ``occurrence``-th ``quote`` in text."""
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(quote, start + 1)
    units = len(text[:start].encode("utf-16-le")) // 2
    return units, units + len(quote.encode("utf-16-le")) // 2
