"""Labelling workbench benchmark: chromium labels demo-like items with the keyboard only.

Usage (from the repository root; Debian chromium and the playwright package installed)::

    python tests/benchmarks/bench_workbench.py [--items 50] [--keep]

On the embedded defaults (SQLite, Celery eager), in a scratch folder: a database is migrated
and loaded with ``--items`` demo-like items (one question each, a pinned source of six
sentences with an emoji, a combining accent and CRLF line endings, an answer of two to four
claims) through the real import service, and labelling starts with overlap ``--overlap`` for
one annotator (default 2: each submit is an item's first annotation; with 1 every submit also
compares and resolves its item). Each submit still schedules the agreement recompute, run
eagerly inside the request as the embedded defaults do.
The Django development server then serves it (``manage.py runserver --noreload --insecure``,
``DJANGO_DEBUG=false`` as deployed: cached templates, no query log; static files included) on a
free port, and a headless chromium (Playwright) logs in and labels every item with
the keyboard only: per claim ``c`` (cite the sentence the page selected for it) then ``1``
(supported), or ``3`` (not supported) for claims with no evidence in the source; ``⇧1`` for the
answer; ``s`` submits. The page swaps the next item in from the submit's JSON answer.

Reported: keystrokes per item (mean, max) against the N + 2k + 2 budget, and the time from
pressing ``s`` to the next item being interactive (the page script's own measure: from the key
handler to the first frame after the next item is mounted), p50/p95/max over all submits but
the last (which leaves the workbench), and the wall-clock time of the run. Every stored span is
checked against ``text.index(quote)``. Target: p95 under 150 ms. Not collected by pytest
(``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SLUG = "bench"
PASSWORD = "bench-password-1"
TARGET_P95_MS = 150
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

PLACES = "harbour library ferry museum market garden bridge archive tower station".split()
THINGS = "opens closes carries holds keeps lends serves shows".split()


def sentences(n: int) -> list[str]:
    """Six sentences about place ``n``: distinct words, so each claim matches one sentence."""
    place = PLACES[n % len(PLACES)]
    return [
        f"The {place} number {n} opened in {1900 + n} \U0001f44d\U0001f3fd.",
        f"Its cafe\u0301s {THINGS[n % len(THINGS)]} {n + 7} visitors each morning.",
        f"About {n * 13 + 100} ferries stop beside it every week.",
        f"The roof was rebuilt with copper during {1950 + n}.",
        f"Volunteers paint the railings green every {n % 5 + 2} years \U0001f3a8.",
        f"Tickets cost {n % 9 + 1} euros for adults.",
    ]


def records(items: int) -> list[dict]:
    """``items`` demo-like native records; claims 0 and 2 are in the source, claim 1 is not."""
    out = []
    for n in range(items):
        said = sentences(n)
        claims = [
            said[0].replace(" \U0001f44d\U0001f3fd", ""),
            f"It closes on public holidays {n}.",
            said[2],
            said[3],
        ][: 2 + n % 3]
        out.append(
            {
                "external_id": f"bench-{n:04d}",
                "text": f"What do we know about the {PLACES[n % len(PLACES)]} number {n}?",
                "sources": [
                    {
                        "id": f"bench-doc-{n}",
                        "text": "\r\n".join(said),
                        "uri": f"https://archive.example/{n}",
                        "rank": 0,
                    }
                ],
                "candidates": [
                    {
                        "id": "a",
                        "text": " ".join(claims),
                        "generator": "bench",
                        "claims": [{"text": c} for c in claims],
                    }
                ],
            }
        )
    return out


def plan(claims: list[str]) -> list[str]:
    """The keys for one item: cite and label claims found in the source, label the others."""
    keys: list[str] = []
    for claim in claims:
        keys += ["3"] if "public holidays" in claim else ["c", "1"]
    return [*keys, "Shift+Digit1", "s"]


def setup_child(items: int, overlap: int) -> None:
    """Migrate, import, create the annotator, start labelling (run in a child process)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from labeling.importers.native import file_sha256, read_jsonl
    from labeling.models import Role
    from labeling.services import (
        membership_set,
        project_create,
        project_labelling_configure,
        project_labelling_start,
        workload_import,
    )

    call_command("migrate", verbosity=0)
    users = get_user_model()
    manager = users.objects.create_user(username="bench-manager", password=PASSWORD)
    project = project_create(slug=SLUG, name="Workbench benchmark", manager=manager)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records(items)), encoding="utf-8")
        with path.open("rb") as stream:
            digest = file_sha256(stream)
            workload_import(
                project=project,
                records=read_jsonl(stream),
                format="native",
                filename=path.name,
                file_sha256=digest,
            )
    project_labelling_configure(project=project, actor=manager, overlap=overlap)
    project_labelling_start(project=project, actor=manager)
    annotator = users.objects.create_user(username="bench-annotator", password=PASSWORD)
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)


def check_child() -> None:
    """Print JSON: the annotations stored and whether every span's offsets fit its quote."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from labeling.models import Annotation, EvidenceSpan

    spans = list(EvidenceSpan.objects.select_related("source_version"))
    exact = all(
        s.source_version.text.index(s.quote) == s.start and s.start + len(s.quote) == s.end
        for s in spans
    )
    print(
        json.dumps({"annotations": Annotation.objects.count(), "spans": len(spans), "exact": exact})
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, process: subprocess.Popen) -> None:
    for _ in range(1200):
        if process.poll() is not None:
            raise SystemExit(f"the server exited with code {process.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/accounts/login/")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server did not answer")


def label_all(base: str, items: int) -> dict:
    """Drive chromium through every item; return keystrokes and timings."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise SystemExit("chromium is not on PATH")
    keystrokes: list[int] = []
    budgets: list[int] = []
    timings: list[float] = []
    requests: list[float] = []
    started = time.perf_counter()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base}/accounts/login/?next=/p/{SLUG}/annotate/")
        page.fill("#id_username", "bench-annotator")
        page.fill("#id_password", PASSWORD)
        page.click("form.stacked button[type=submit]")
        page.wait_for_url(f"{base}/p/{SLUG}/annotate/")
        page.click("#next-item")
        for n in range(items):
            page.wait_for_function(
                "() => document.querySelector('#workbench') && "
                "document.querySelector('#workbench').dataset.ready === "
                "document.querySelector('#item-meta').dataset.assignmentId"
            )
            current = page.locator("#item-meta").get_attribute("data-assignment-id")
            claims = page.locator(".claim-row .claim-text").all_inner_texts()
            keys = plan(claims)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            for key in keys:
                page.keyboard.press(key)
            keystrokes.append(len(keys))
            cited = sum(1 for c in claims if "public holidays" not in c)
            budgets.append(len(claims) + 2 * cited + 2)
            if n < items - 1:
                page.wait_for_function(
                    f"() => document.querySelector('#workbench').dataset.ready !== '{current}'"
                )
                timings.append(page.evaluate("() => window.workbenchTimings.slice(-1)[0]"))
                # The submit's own request (the save may end after the next item shows; the
                # reserve's and other fetches are not it).
                submit = (
                    "() => performance.getEntriesByType('resource').filter((e) => "
                    f"e.initiatorType === 'fetch' && e.name.endsWith('/annotate/{current}/'))"
                )
                page.wait_for_function(f"() => ({submit})().length > 0", timeout=30_000)
                requests.append(page.evaluate(f"() => ({submit})().slice(-1)[0].duration"))
            else:
                # The last submit leaves the workbench (no item left): a full page load.
                page.wait_for_url(f"{base}/p/{SLUG}/annotate/")
        browser.close()
    if errors:
        raise SystemExit(f"script errors in the page: {errors}")
    return {
        "keystrokes": keystrokes,
        "budgets": budgets,
        "timings": timings,
        "requests": requests,
        "wall_s": time.perf_counter() - started,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument(
        "--overlap",
        type=int,
        default=2,
        help="annotations per item (with 1, every submit also compares and resolves the item)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--child", choices=["setup", "check"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "setup":
        return setup_child(args.items, args.overlap)
    if args.child == "check":
        return check_child()

    scratch = Path(tempfile.mkdtemp(prefix="certlabel-bench-workbench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.pop("DATABASE_URL", None)
    env.update(
        DATABASE_URL=f"sqlite:///{scratch / 'bench.sqlite3'}",
        DJANGO_SETTINGS_MODULE="labeling.settings",
        DJANGO_LOG_LEVEL="WARNING",
        # As deployed: templates cached, no query log (--insecure serves the static files).
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    me = [sys.executable, str(Path(__file__).resolve())]
    server = None
    try:
        subprocess.run(
            [*me, "--child", "setup", "--items", str(args.items), "--overlap", str(args.overlap)],
            env=env,
            check=True,
        )
        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "runserver",
                f"127.0.0.1:{port}",
                "--noreload",
                "--insecure",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(port, server)
        result = label_all(f"http://127.0.0.1:{port}", args.items)
        checked = json.loads(
            subprocess.run(
                [*me, "--child", "check"], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)

    keys, budgets, timings = result["keystrokes"], result["budgets"], result["timings"]
    over = sum(1 for k, b in zip(keys, budgets, strict=True) if k > b)
    print(f"items labelled: {len(keys)} (stored annotations: {checked['annotations']})")
    print(
        f"keystrokes per item: mean {statistics.mean(keys):.2f}, max {max(keys)}; "
        f"budget N+2k+2: mean {statistics.mean(budgets):.2f}; items over budget: {over}"
    )
    print(
        f"submit -> next item interactive (ms, {len(timings)} swaps): "
        f"p50 {percentile(timings, 0.5):.1f}, p95 {percentile(timings, 0.95):.1f}, "
        f"max {max(timings):.1f} (target p95 < {TARGET_P95_MS})"
    )
    requests = result["requests"]
    print(
        f"  of which the submit request (server, as the browser's resource timing sees it): "
        f"p50 {percentile(requests, 0.5):.1f}, p95 {percentile(requests, 0.95):.1f}"
    )
    print(f"evidence spans stored: {checked['spans']}, offsets exact: {checked['exact']}")
    print(f"wall clock: {result['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
