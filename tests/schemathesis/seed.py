"""Seed a fresh database for the schemathesis run and print the API tokens it made.

Run by ``tests/schemathesis/run.sh`` with ``DATABASE_URL`` pointing at a new database (a SQLite
file in a temporary directory, or a scratch PostgreSQL database): migrates it, creates the demo
project through ``manage.py demo_setup`` (members, frozen partition, labelling started, two
consensus items and two disagreements), and gives a token to its manager (who may also create
projects) and to an annotator. The two tokens are moved to large random ids: the run fuzzes
``DELETE /api/account/tokens/<id>/`` with small ids, and revoking its own token would leave the
rest of the run unauthenticated.
Prints ``{"slug": ..., "manager": <token>, "annotator": <token>}``.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
# demo_setup refuses to run without DEBUG (its password is public); the server runs without.
os.environ["DJANGO_DEBUG"] = "true"


def main() -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command

    from labeling.models import ApiToken
    from labeling.services.tokens import api_token_create

    call_command("migrate", verbosity=0, interactive=False)
    with open(os.devnull, "w") as quiet:
        call_command("demo_setup", password=secrets.token_urlsafe(16), stdout=quiet)
    users = get_user_model().objects
    # The manager may create projects too, so that POST /api/projects/ is fuzzed past its 403.
    users.get(username="manager").user_permissions.add(
        Permission.objects.get(content_type__app_label="labeling", codename="add_project")
    )
    tokens = {}
    for role, username in (("manager", "manager"), ("annotator", "annotator1")):
        created = api_token_create(user=users.get(username=username), name="schemathesis")
        ApiToken.objects.filter(pk=created.token.pk).update(pk=10**9 + secrets.randbelow(10**9))
        tokens[role] = created.secret
    print(json.dumps({"slug": "demo", **tokens}))  # noqa: T201


if __name__ == "__main__":
    main()
