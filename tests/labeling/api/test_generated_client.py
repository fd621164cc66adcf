"""A client generated from the API's own schema by openapi-python-client works end to end.

The schema is read from ``/api/schema/`` of a live server; the generated package must import
(every module), and its typed calls obtain a token, lease the next item, submit labels with a
nested claim and its evidence (JSON), and read the progress.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from labeling.models import Annotation, Role
from labeling.services import membership_set
from tests.factories import UserFactory, utf16_span

PACKAGE = "certlabel_client"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture
def generated(live_server: Any, tmp_path: Path) -> Iterator[ModuleType]:
    """The client package generated from the live server's schema, importable as PACKAGE."""
    url = f"{live_server.url}/api/schema/?format=json"
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (the test server)
        schema = json.loads(response.read())
    (tmp_path / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    # PATH: the generator formats its output with ruff from the same environment.
    env = {**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"package_name_override": PACKAGE}), encoding="utf-8")
    run = subprocess.run(  # noqa: S603 (fixed arguments)
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(tmp_path / "schema.json"),
            "--output-path",
            str(tmp_path / PACKAGE),
            "--meta",
            "none",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Warning" not in run.stdout, run.stdout
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def module(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.{name}")


@pytest.mark.django_db(transaction=True)
def test_the_generated_client_labels_an_item(generated, live_server, started, manager):
    # given: every generated module imports (none refers to a name it does not define)
    failures = {}
    for info in pkgutil.walk_packages(generated.__path__, f"{PACKAGE}."):
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # noqa: BLE001 (collect every failure, then report them)
            failures[info.name] = repr(exc)
    assert failures == {}
    annotator = UserFactory()
    membership_set(project=started, user=annotator, role=Role.ANNOTATOR)
    models = module("models")
    client = generated.Client(base_url=live_server.url, raise_on_unexpected_status=True)
    obtain = module("api.auth.auth_token_obtain").sync

    def token_client(user: Any) -> Any:
        credentials = models.TokenObtainInputRequest(username=user.username, password="pw-secret")
        token = obtain(client=client, body=credentials)
        assert isinstance(token, models.ApiTokenCreated), token
        return generated.AuthenticatedClient(
            base_url=live_server.url, token=token.token, prefix="Token"
        )

    # when: the annotator obtains a token with their password
    authed = token_client(annotator)

    # and the next item is leased and submitted with a supported claim citing its source
    form = module("api.projects.assignments_next").sync(slug="study", client=authed)
    assert isinstance(form, models.LabellingForm), form
    [source] = form.sources
    quote = "The bridge opened in 1932"
    start, end = utf16_span(source.text, quote)
    first, *others = form.claims
    claims = [
        models.ClaimInputRequest(
            claim_id=first.id,
            label="supported",
            evidence=[
                models.EvidenceInputRequest(
                    source_version_id=source.source_version_id, start=start, end=end, quote=quote
                )
            ],
        ),
        *(models.ClaimInputRequest(claim_id=c.id, label="not_supported") for c in others),
    ]
    saved = module("api.projects.assignments_annotation_update").sync(
        slug="study",
        assignment_id=form.assignment_id,
        client=authed,
        body=models.AnnotationInputRequest(answer_label="inadmissible", claims=claims),
    )
    progress = module("api.projects.progress_retrieve").sync(
        slug="study", client=token_client(manager)
    )

    # then: the labels are stored as sent, and the progress counts the submission
    assert isinstance(saved, models.OwnAnnotation), saved
    annotation = Annotation.objects.get(assignment_id=form.assignment_id)
    current = annotation.current
    assert current.answer_label == "inadmissible"
    stored = {c.claim_id: c for c in current.claim_labels.all()}
    assert {k: v.label for k, v in stored.items()} == {
        first.id: "supported",
        **{c.id: "not_supported" for c in others},
    }
    assert [e.quote for e in stored[first.id].evidence.all()] == [quote]
    assert isinstance(progress, models.ProgressCounts), progress
    assert (progress.total, progress.in_progress) == (4, 1)
