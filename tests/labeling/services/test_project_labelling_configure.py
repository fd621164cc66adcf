"""project_labelling_configure: manager-only settings, fixed once labelling starts."""

from __future__ import annotations

import pytest

from labeling.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from labeling.models import Project, ServingOrder
from labeling.services import project_labelling_configure, project_labelling_start
from tests.conftest import native_record


def _settings(project):
    return Project.objects.filter(pk=project.pk).values(
        "overlap", "lease_minutes", "serving_order", "serving_seed", "allow_self_adjudication"
    )[0]


def test_a_manager_sets_every_setting_before_the_start(project, member):
    # when the manager sets all five settings
    returned = project_labelling_configure(
        project=project,
        actor=member("manager"),
        overlap=3,
        lease_minutes=45,
        serving_order=ServingOrder.SEEDED_RANDOM,
        serving_seed=42,
        allow_self_adjudication=True,
    )

    # then they are stored and the given object is refreshed
    assert _settings(project) == {
        "overlap": 3,
        "lease_minutes": 45,
        "serving_order": "seeded_random",
        "serving_seed": 42,
        "allow_self_adjudication": True,
    }
    assert returned.overlap == 3


def test_none_leaves_a_setting_unchanged(project, member):
    manager = member("manager")
    project_labelling_configure(project=project, actor=manager, overlap=4)
    project_labelling_configure(project=project, actor=manager, lease_minutes=10)
    assert _settings(project)["overlap"] == 4
    assert _settings(project)["lease_minutes"] == 10


@pytest.mark.parametrize(
    ("field", "value"),
    [("overlap", 3), ("serving_order", ServingOrder.SEEDED_RANDOM), ("serving_seed", 5)],
)
def test_overlap_and_serving_order_are_fixed_once_labelling_started(
    project, member, import_records, field, value
):
    # given a started project (seed set so that the random order alone is valid)
    import_records([native_record("q1")])
    manager = member("manager")
    project_labelling_configure(project=project, actor=manager, serving_seed=1)
    project_labelling_start(project=project, actor=manager)
    before = _settings(project)

    # when the manager changes a fixed setting, then it is refused, naming the field
    with pytest.raises(InvalidTransition, match=field) as caught:
        project_labelling_configure(project=project, actor=manager, **{field: value})
    assert caught.value.data == {"fields": [field]}
    assert _settings(project) == before


def test_lease_and_self_adjudication_may_change_after_the_start(project, member, import_records):
    import_records([native_record("q1")])
    manager = member("manager")
    project_labelling_start(project=project, actor=manager)

    project_labelling_configure(
        project=project, actor=manager, lease_minutes=5, allow_self_adjudication=True, overlap=2
    )

    settings = _settings(project)
    assert (settings["lease_minutes"], settings["allow_self_adjudication"]) == (5, True)
    assert settings["overlap"] == 2  # the unchanged value may be given again


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"overlap": 0}, "overlap"),
        ({"overlap": 101}, "overlap"),
        ({"overlap": True}, "overlap"),
        ({"overlap": "2"}, "overlap"),
        ({"lease_minutes": 0}, "lease_minutes"),
        ({"lease_minutes": 7 * 24 * 60 + 1}, "lease_minutes"),
        ({"serving_order": "alphabetical"}, "serving_order"),
        ({"serving_seed": -1}, "serving_seed"),
        ({"serving_seed": 2**63}, "serving_seed"),
        ({"serving_order": ServingOrder.SEEDED_RANDOM}, "serving_seed"),
        ({"allow_self_adjudication": "yes"}, "allow_self_adjudication"),
    ],
)
def test_invalid_values_are_refused_naming_the_field(project, member, kwargs, field):
    before = _settings(project)
    with pytest.raises(InvalidInput, match=rf"^{field}:"):
        project_labelling_configure(project=project, actor=member("manager"), **kwargs)
    assert _settings(project) == before


@pytest.mark.parametrize("role", ["annotator", "adjudicator"])
def test_only_a_manager_configures(project, member, role):
    with pytest.raises(PermissionDenied):
        project_labelling_configure(project=project, actor=member(role), overlap=3)
    assert _settings(project)["overlap"] == 2
