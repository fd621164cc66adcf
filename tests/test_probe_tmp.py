import pytest
from labeling.models import Annotation
from tests.test_blindness import get_every_url, body_of, leaks
from tests.worlds import build_world

@pytest.mark.django_db
def test_probe(monkeypatch):
    monkeypatch.setattr("labeling.api.work.own_annotation_list", lambda project, actor: Annotation.objects.filter(item__project=project).select_related("current", "assignment", "item__candidate__question"))
    w = build_world()
    for url, r in get_every_url(w):
        f = leaks(*body_of(r))
        if f: print(url, f)
