"""The schema behind the query-parameter check is built safely by concurrent first requests.

A gthread worker's first requests arrive on several threads at once, each needing the table
``labeling.api.params`` builds from the OpenAPI schema. Built concurrently, drf-spectacular's
extension loading raced (an AttributeError, so a 500). The test runs in a fresh interpreter,
where nothing has built the schema yet, eight threads released together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import json, os, threading
import django
django.setup()
from labeling.api.params import parameter_table
errors, tables = [], []
barrier = threading.Barrier(8)
def build():
    barrier.wait()
    try:
        tables.append(len(parameter_table()))
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=build) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"errors": errors, "sizes": sorted(set(tables))}))
"""


def test_eight_threads_building_the_table_at_once_all_get_it():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "labeling.settings"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    # every thread got the same, non-empty table
    assert len(result["sizes"]) == 1 and result["sizes"][0] > 50
