"""Layout rules that a reviewer would otherwise check by hand (tools check every rule)."""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The project's fixed top level, plus `.env.example`, which lists every environment variable and
# only works at the top.
TOP_LEVEL_ALLOWED = {
    "manage.py",
    "pyproject.toml",
    "README.md",
    "labeling",
    "certification",
    "templates",
    "tests",
    "docs",
    "Makefile",
    ".ci",
    ".gitignore",
    ".gitattributes",
    ".editorconfig",
    ".pre-commit-config.yaml",
    "uv.lock",
    "requirements.lock",
    "LICENSE",
    ".env.example",
}
TOP_LEVEL_REQUIRED = {
    "manage.py",
    "pyproject.toml",
    "README.md",
    "labeling",
    "certification",
    "tests",
    "Makefile",
    ".ci",
}
# Project wiring (settings, root urls, Celery app, wsgi/asgi) may name certification; the
# labelling domain may not.
WIRING = {"settings.py", "urls.py", "celery.py", "wsgi.py", "asgi.py"}


#: Packages that must import without Django (pure computation), every module of each.
PURE_PACKAGES = ("certification.stats", "certification.certificates")
#: Top-level packages of the web side: none may be loaded by a pure package...
WEB_SIDE = ("django", "rest_framework", "labeling", "celery")
#: ...but the label vocabulary, which imports nothing (nor does the labeling package itself).
PURE_MAY_LOAD = ("labeling", "labeling.vocabulary")
# Runs in a fresh interpreter: walks each pure package (so a new module is covered without
# editing this list), imports every module, prints what it imported and what of the web side
# (and of certification outside the pure packages) got loaded.
_PURE_IMPORT_CODE = """
import importlib, json, pkgutil, sys
pure = {pure!r}
imported = []
for name in pure:
    package = importlib.import_module(name)
    imported.append(name)
    for info in pkgutil.walk_packages(package.__path__, prefix=name + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
web = sorted(
    m for m in sys.modules if m.split(".")[0] in {web!r} and m not in {may_load!r}
)
project = sorted(
    m for m in sys.modules
    if m.startswith("certification.") and not any(m == p or m.startswith(p + ".") for p in pure)
)
print(json.dumps({{"imported": imported, "web": web, "project": project}}))
"""


def _pure_import_report() -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = _PURE_IMPORT_CODE.format(pure=PURE_PACKAGES, web=WEB_SIDE, may_load=PURE_MAY_LOAD)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _modules_on_disk(package: str) -> set[str]:
    root = REPO.joinpath(*package.split("."))
    found = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_stats_import_loads_no_django():
    # given a fresh interpreter (pytest itself has loaded Django)
    # when it imports every module of certification.stats and certification.certificates
    report = _pure_import_report()
    # then every module was imported (the walk missed none on disk)
    for package in PURE_PACKAGES:
        assert _modules_on_disk(package) <= set(report["imported"]), package
    # and no Django, nor anything of the project's web side, was loaded
    assert report["web"] == []
    assert report["project"] == []


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def test_labeling_never_imports_certification():
    offenders = []
    for path in sorted((REPO / "labeling").rglob("*.py")):
        if path.parent == REPO / "labeling" and path.name in WIRING:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module in _imported_modules(tree):
            if module == "certification" or module.startswith("certification."):
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert offenders == []


def test_scan_finds_every_import_form():
    # guards the scan above: a rule checked by a blind scanner would pass vacuously
    tree = ast.parse(
        "import certification.stats\n"
        "from certification import services\n"
        "importlib.import_module('certification.tasks')\n"
    )
    assert [m for _, m in _imported_modules(tree)] == [
        "certification.stats",
        "certification",
        "certification.tasks",
    ]


def test_top_level_is_the_design_cards_list():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked top level cannot be listed")
    # tracked files and untracked ones not ignored (what a commit could add); .venv, db.sqlite3
    # and other ignored local files do not count
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    top = {path.split("/", 1)[0] for path in listed.split("\0") if path}
    assert top - TOP_LEVEL_ALLOWED == set(), "top-level entries outside the design card's list"
    assert {name for name in TOP_LEVEL_REQUIRED if not (REPO / name).exists()} == set()


def test_the_readmes_downloads_in_the_clone_root_are_ignored():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to ignore")
    # the README's demo downloads release.zip and names demo-1.zip, both in the clone root
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    names = sorted(set(re.findall(r"\b([\w-]+\.zip)\b", readme)))
    assert "demo-1.zip" in names
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *names], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    assert ignored == names


# Both apps have one shape: the same packages and modules, each named for what it holds.
APP_PACKAGES = ("views", "selectors", "models", "services", "api")
APP_MODULES = ("locks.py", "forms.py", "exceptions.py")
# The only modules that may take row, table or advisory locks (select_for_update, LOCK TABLE,
# pg_advisory_*).
LOCK_MODULES = {"labeling/locks.py", "certification/locks.py"}
HTML_VIEW_PACKAGES = ("labeling.views", "certification.views")


@pytest.mark.parametrize("app", ["labeling", "certification"])
def test_both_apps_have_the_same_shape(app):
    root = REPO / app
    missing = [f"{name}/" for name in APP_PACKAGES if not (root / name / "__init__.py").is_file()]
    missing += [name for name in APP_MODULES if not (root / name).is_file()]
    assert missing == []
    # a module beside a package of the same kind (views_audit.py beside views/) splits the shape
    strays = sorted(
        path.name
        for path in root.glob("*.py")
        if any(path.stem.startswith(f"{name}_") for name in ("views", "selectors", "models"))
    )
    assert strays == []


def _app_modules() -> list[Path]:
    return sorted(
        path
        for app in ("labeling", "certification")
        for path in (REPO / app).rglob("*.py")
        if "migrations" not in path.relative_to(REPO).parts
    )


def _locks_taken(tree: ast.AST) -> list[int]:
    """Lines of ``select_for_update`` calls and of SQL text that locks a table or a key."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "select_for_update"
        ):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and ("lock table" in node.value.lower() or "pg_advisory" in node.value.lower())
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_locks_modules_take_locks():
    offenders = []
    for path in _app_modules():
        name = path.relative_to(REPO).as_posix()
        if name in LOCK_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [f"{name}:{line}" for line in _locks_taken(tree)]
    assert offenders == []


def test_lock_scan_finds_row_and_table_locks():
    # guards the scan above: a docstring that only mentions select_for_update is not a lock
    tree = ast.parse(
        '"""Mentions select_for_update in prose."""\n'
        "Item.objects.select_for_update(of=('self',)).get(pk=1)\n"
        "qs.filter(pk=1).select_for_update()\n"
        'cursor.execute(f"LOCK TABLE {tables} IN SHARE MODE")\n'
    )
    assert _locks_taken(tree) == [2, 3, 4]


def test_lock_scan_finds_advisory_locks():
    # guards the scan: an advisory lock taken outside the locks modules is found too
    tree = ast.parse(
        'cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [1, 2])\n'
        'cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [1, 2])\n'
    )
    assert _locks_taken(tree) == [1, 2]


def test_lock_modules_document_the_order_across_both_apps():
    for name in LOCK_MODULES:
        doc = ast.get_docstring(ast.parse((REPO / name).read_text(encoding="utf-8"))) or ""
        assert "Lock order" in doc, name
        other = ({"labeling/locks.py", "certification/locks.py"} - {name}).pop()
        assert other in doc, f"{name} does not point at {other}"


def test_api_modules_import_no_html_views_and_no_private_names():
    offenders = []
    for path in _app_modules():
        if "api" not in path.relative_to(REPO).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module in _imported_modules(tree):
            if any(module == pkg or module.startswith(f"{pkg}.") for pkg in HTML_VIEW_PACKAGES):
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {module}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] in ("labeling", "certification")
            ):
                offenders += [
                    f"{path.relative_to(REPO)}:{node.lineno} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                ]
    assert offenders == []


# Attributes of a domain error that hold text; adapters place an error by its ``field``.
_ERROR_TEXT = {"message", "reason", "detail"}
_SPLITTERS = {"split", "rsplit", "partition", "rpartition"}


def _is_error_text(node: ast.AST) -> bool:
    """``x.message`` / ``x.reason`` / ``x.detail``, or ``str(x)``."""
    if isinstance(node, ast.Attribute):
        return node.attr in _ERROR_TEXT
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "str"


def _message_parsing(tree: ast.AST) -> list[int]:
    """Lines that split an error's text, match a pattern on it, or read ``data["field"]``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _SPLITTERS and _is_error_text(node.func.value):
                lines.append(node.lineno)
            elif (
                getattr(node.func.value, "id", None) == "re"
                or node.func.attr in ("match", "search", "fullmatch", "findall")
            ) and any(_is_error_text(arg) and not isinstance(arg, ast.Call) for arg in node.args):
                lines.append(node.lineno)
            elif (
                node.func.attr == "get"
                and getattr(node.func.value, "attr", None) == "data"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "field"
            ):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Subscript)
            and getattr(node.value, "attr", None) == "data"
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "field"
        ):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_adapters_never_parse_an_error_message():
    offenders = []
    for path in _app_modules():
        parts = path.relative_to(REPO).parts
        if "views" not in parts and "api" not in parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [f"{path.relative_to(REPO)}:{line}" for line in _message_parsing(tree)]
    assert offenders == []


def test_message_scan_finds_every_parsing_form():
    # guards the scan above: each line parses an error's text or payload for its field
    tree = ast.parse(
        'field = exc.message.split(":", 1)[0]\n'
        'head, _, rest = str(exc).partition(": ")\n'
        "match = CLAIM_FIELD.match(exc.message)\n"
        'field = exc.data.get("field")\n'
        'field = exc.data["field"]\n'
        "field = exc.field\n"
        "match = CLAIM_FIELD.match(field)\n"
        'name = path.split("/")\n'
    )
    assert _message_parsing(tree) == [1, 2, 3, 4, 5]


# The role names, for the role-set scan below.
_ROLE_ATTRS = {"ANNOTATOR", "ADJUDICATOR", "MANAGER"}
_ROLE_VALUES = {"annotator", "adjudicator", "manager"}
# The one module that defines role sets (labeling.permissions: ANNOTATORS, REVIEWERS, ...).
ROLE_SET_MODULE = "labeling/permissions.py"


def _role_sets(tree: ast.AST) -> list[int]:
    """Lines of a set, tuple or list literal made of roles only (``Role.X`` or role names).

    The ``Role`` choices themselves (``MANAGER = "manager", "manager"``) are no role set.
    """
    choices = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "Role"
        for inner in ast.walk(node)
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Set | ast.Tuple | ast.List) or not node.elts:
            continue
        if id(node) in choices:
            continue
        attrs = [
            isinstance(e, ast.Attribute)
            and e.attr in _ROLE_ATTRS
            and isinstance(e.value, ast.Name)
            and e.value.id == "Role"
            for e in node.elts
        ]
        names = [isinstance(e, ast.Constant) and e.value in _ROLE_VALUES for e in node.elts]
        if all(attrs) or (len(names) > 1 and all(names)):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_permissions_module_defines_role_sets():
    # given every module of both apps but labeling/permissions.py
    offenders = []
    for path in _app_modules():
        name = path.relative_to(REPO).as_posix()
        if name == ROLE_SET_MODULE:
            continue
        # when a set, tuple or list of roles is written in it
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [f"{name}:{line}" for line in _role_sets(tree)]
    # then there is none: a check names MANAGERS, REVIEWERS or ANNOTATORS instead
    assert offenders == []


def test_role_set_scan_finds_every_form():
    # guards the scan above: a blind scanner would pass vacuously
    tree = ast.parse(
        "A = frozenset({Role.ADJUDICATOR, Role.MANAGER})\n"
        "ok = role in (Role.ADJUDICATOR, Role.MANAGER)\n"
        "B = [Role.MANAGER]\n"
        'C = {"adjudicator", "manager"}\n'
        'MEMBERS = [("manager", Role.MANAGER)]\n'
        'ORDER = ("manager", "other")\n'
        "class Role(TextChoices):\n"
        '    MANAGER = "manager", "manager"\n'
    )
    assert _role_sets(tree) == [1, 2, 3, 4]
    # and the permissions module does define them
    permissions = ast.parse((REPO / ROLE_SET_MODULE).read_text(encoding="utf-8"))
    assert len(_role_sets(permissions)) >= 3


# -- import graph: no cycle, no private name imported from another module -----------------------
APPS = ("labeling", "certification")


def _import_cycles(graph) -> list[str]:
    """One cycle of each strongly connected set of modules, with the importing lines.

    The graph is grimp's: module-level and function-local imports alike (an import moved into a
    function hides a cycle from Python's loader, not from this test).
    """
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & graph.modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    # Tarjan's algorithm, iterative (a recursion over a thousand modules would be deep)
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            for j in range(i, len(edges[node])):
                nxt = edges[node][j]
                if nxt not in index:
                    work.append((node, j + 1))
                    work.append((nxt, 0))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in edges[node]:
                        components.append(sorted(component))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
    cycles = []
    for component in sorted(components):
        start = component[0]
        if start in edges[start]:
            chain: tuple[str, ...] = (start, start)
        else:
            inside = [m for m in edges[start] if m in component]
            chains = [graph.find_shortest_chain(importer=m, imported=start) for m in inside]
            chain = (start, *min((c for c in chains if c), key=len))
        steps = []
        for importer, imported in itertools.pairwise(chain):
            lines = graph.get_import_details(importer=importer, imported=imported)
            where = ", ".join(str(d["line_number"]) for d in lines) or "?"
            steps.append(f"{importer} (line {where})")
        cycles.append(" -> ".join([*steps, chain[-1]]))
    return cycles


def test_no_import_cycle_between_modules():
    import grimp

    # given the import graph of both apps, function-local imports included (cache_dir=None: no
    # cache folder written into the clone)
    graph = grimp.build_graph(*APPS, cache_dir=None)
    # then no module reaches itself through its imports: a service sends a task through
    # labeling.dispatch, an adapter builds on labeling.importers.base, and so on
    assert _import_cycles(graph) == []


def test_cycle_finder_reports_each_cycle():
    # guards the finder above: a blind one would pass vacuously
    import grimp

    graph = grimp.ImportGraph()
    for importer, imported in [("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.z", "a.w")]:
        graph.add_import(importer=importer, imported=imported, line_number=3, line_contents="")
    graph.add_import(importer="a.s", imported="a.s", line_number=1, line_contents="")
    assert _import_cycles(graph) == [
        "a.s (line 1) -> a.s",
        "a.x (line 3) -> a.y (line 3) -> a.z (line 3) -> a.x",
    ]


def _private_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``from x import _y`` (a private name of another module); dunders and __future__ are not."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        module = "." * node.level + (node.module or "")
        found += [
            (node.lineno, f"{module}.{alias.name}")
            for alias in node.names
            if alias.name.startswith("_")
            and not (alias.name.startswith("__") and alias.name.endswith("__"))
        ]
    return found


def test_no_private_name_is_imported_from_another_module():
    offenders = []
    for path in _app_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [
            f"{path.relative_to(REPO)}:{line} imports {name}"
            for line, name in _private_imports(tree)
        ]
    assert offenders == []


def test_private_import_scan_finds_every_form():
    # guards the scan above
    tree = ast.parse(
        "from __future__ import annotations\n"
        "from certification.stats.audit.labels import _human_label, check_aligned\n"
        "from .results import _MISSING\n"
        "from labeling import __version__\n"
        "def f():\n"
        "    from labeling.services.assignments import _check_int\n"
    )
    assert _private_imports(tree) == [
        (2, "certification.stats.audit.labels._human_label"),
        (3, ".results._MISSING"),
        (6, "labeling.services.assignments._check_int"),
    ]


# -- one label vocabulary ------------------------------------------------------------------------
VOCABULARY_MODULE = "labeling/vocabulary.py"
# A literal that equals a label's name but is not one of ours: path -> values and why.
LABEL_LITERALS_ALLOWED = {
    # WiCE's own raw labels (the dataset's vocabulary), which the adapter maps to ours.
    "labeling/importers/wice.py": {"supported", "not_supported"},
    # Names of a template variable and of a page-script rule; their value is the vocabulary's.
    "labeling/views/labels.py": {"evidence_unavailable"},
}


def _vocabulary_labels() -> set[str]:
    """The label names of labeling/vocabulary.py (not the statuses, which share words with other
    vocabularies: a job, an invitation and a build are "pending" too)."""
    from labeling import vocabulary

    return {
        *vocabulary.DEFAULT_ANSWER_LABELS,
        *vocabulary.DEFAULT_CLAIM_LABELS,
        vocabulary.CANNOT_DECIDE,
    }


def _label_literals(tree: ast.AST, labels: set[str]) -> list[tuple[int, str]]:
    """Lines of string literals equal to a label name; docstrings are prose, not literals."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in labels
        and id(node) not in docstrings
    )


def test_the_vocabulary_and_the_labeling_package_import_nothing():
    # what lets the statistics import the vocabulary without Django or the Celery app
    for name in (VOCABULARY_MODULE, "labeling/__init__.py"):
        tree = ast.parse((REPO / name).read_text(encoding="utf-8"))
        top = [
            node
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
            and not (isinstance(node, ast.ImportFrom) and node.module in ("__future__", "typing"))
        ]
        assert top == [], name


def test_no_label_name_is_spelt_out_in_app_code():
    labels = _vocabulary_labels()
    assert {"supported", "evidence_unavailable", "cannot_decide", "admissible"} <= labels
    offenders = []
    for path in _app_modules():
        name = path.relative_to(REPO).as_posix()
        if name == VOCABULARY_MODULE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        allowed = LABEL_LITERALS_ALLOWED.get(name, set())
        offenders += [
            f"{name}:{line} spells out {value!r} (import it from labeling.vocabulary)"
            for line, value in _label_literals(tree, labels)
            if value not in allowed
        ]
    assert offenders == []


def test_label_literal_scan_finds_literals_not_docstrings():
    # guards the scan above: prose and comments may name a label, code may not
    tree = ast.parse(
        '"""Counts the "supported" claims."""\n'
        "SUPPORTED = 'supported'  # a copy\n"
        "def f(label):\n"
        '    """Whether label is "admissible"."""\n'
        "    return label in ('admissible', 'cannot_decide', 'supported_by')\n"
        "x = {'evidence_unavailable': 1}\n"
    )
    labels = {"supported", "admissible", "cannot_decide", "evidence_unavailable"}
    assert _label_literals(tree, labels) == [
        (2, "supported"),
        (5, "admissible"),
        (5, "cannot_decide"),
        (6, "evidence_unavailable"),
    ]


def test_no_app_module_is_over_600_lines():
    """A module past 600 lines is split by concern (migrations excepted: Django writes them)."""
    long = {
        str(path.relative_to(REPO)): n
        for app in APPS
        for path in (REPO / app).rglob("*.py")
        if "migrations" not in path.parts
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert long == {}
