"""Property-based fuzzing of every importer: each field of a valid file takes every JSON type.

For each format read by ``POST /api/projects/<slug>/imports/`` (native, FaithBench, ExpertQA,
GSM8K, OTel traces, RAGAS rows, RAGTruth's two files, a release's labels and sources) and for
``/evaluator-labels/``, Hypothesis picks one field anywhere in a valid seed file (a key of a
record, an element of a list, a whole record) and replaces it with a value of one JSON type:
null, boolean, integer, float, string, list or object (long strings included). The upload must
be answered below 500; a refusal must be a 400 naming a location and a field, repeating at most
a short prefix of any value, and leave every labelling table's row count unchanged
(:func:`tests.labeling.test_import_fuzz.check_case`).

``CERTLABEL_TYPE_FUZZ_EXAMPLES`` sets the examples per format (default 60). A slow test replaces
fields one at a time (every field of a small seed; for a large one an evenly spaced selection of
``LONG_FIELDS``, ends included) with a long string and a list holding one: no reason may repeat it.
"""

from __future__ import annotations

import copy
import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labeling.models import Role
from tests.labeling.test_import_fuzz import (
    IMPORTS,
    LABELS,
    LONG,
    _paths,
    _set,
    check_case,
    expertqa_seed,
    faithbench_seed,
    gsm8k_seed,
    labels_seed,
    native_seed,
    otel_document_seed,
    otel_seed,
    ragas_seed,
    ragtruth_seed,
)

pytestmark = pytest.mark.django_db

#: The most fields the slow long-value test replaces per format (about a second per field).
LONG_FIELDS = 40
EXAMPLES = int(os.environ.get("CERTLABEL_TYPE_FUZZ_EXAMPLES", "60"))

_TEXT = st.text(max_size=8) | st.sampled_from(["", " ", LONG, "Evident Conflict", "test"])
_SCALAR = st.none() | st.booleans() | st.integers() | st.floats() | _TEXT
JSON_TYPES: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "bool": st.booleans(),
    "int": st.integers() | st.sampled_from([0, -1, 2**64, -(2**70)]),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "string": _TEXT,
    "list": st.lists(_SCALAR, max_size=3) | st.just([LONG]),
    "object": st.dictionaries(_TEXT, _SCALAR, max_size=3) | st.just({"k": LONG}),
}


def jsonl(records: list[Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def release_bytes(files: dict[str, Any], directory: Path) -> bytes:
    """A release zip whose manifest verifies the (changed) labels and sources' bytes.

    When the test helper cannot count the changed records, the manifest keeps the valid
    records' counts and takes the changed files' sha256 and sizes, so the records are read.
    """
    from labeling.release_format import MANIFEST, sha256_file
    from tests.labeling.test_release_import import write_release, zip_release

    try:
        write_release(directory, files["labels.jsonl"], sources=files["sources.jsonl"])
    except (KeyError, TypeError, AttributeError, ValueError):
        write_release(directory, **release_files_valid())
        for name, lines in files.items():
            (directory / name).write_bytes(jsonl(lines))
        manifest = json.loads((directory / MANIFEST).read_text("utf-8"))
        for entry in manifest["files"]:
            entry["sha256"], entry["size"] = sha256_file(directory / entry["name"])
        (directory / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return zip_release(directory)


def release_files_valid() -> dict[str, Any]:
    from tests.labeling.test_release_import import SOURCES, full_records

    return {"records": full_records(), "sources": copy.deepcopy(SOURCES)}


def release_files() -> dict[str, Any]:
    valid = release_files_valid()
    return {"labels.jsonl": valid["records"], "sources.jsonl": valid["sources"]}


# format -> (the seed's files, how they become one upload: (bytes, file name))
Seed = tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any], Path], tuple[bytes, str]]]
SEEDS: dict[str, Seed] = {
    "native": (lambda: {"f": native_seed()}, lambda f, d: (jsonl(f["f"]), "work.jsonl")),
    "faithbench": (
        lambda: {"f": faithbench_seed()},
        lambda f, d: (json.dumps(f["f"]).encode(), "batch_1.json"),
    ),
    "expertqa": (lambda: {"f": expertqa_seed()}, lambda f, d: (jsonl(f["f"]), "work.jsonl")),
    "gsm8k": (lambda: {"f": gsm8k_seed()}, lambda f, d: (jsonl(f["f"]), "work.jsonl")),
    "otel": (lambda: {"f": otel_seed()}, lambda f, d: (jsonl(f["f"]), "traces.jsonl")),
    "otel-document": (
        lambda: {"f": otel_document_seed()},
        lambda f, d: (json.dumps(f["f"]).encode(), "trace.json"),
    ),
    "ragas": (lambda: {"f": ragas_seed()}, lambda f, d: (jsonl(f["f"]), "eval.jsonl")),
    "ragtruth": (
        lambda: {name: ragtruth_seed(name) for name in ("response.jsonl", "source_info.jsonl")},
        lambda f, d: (zipped({name: jsonl(lines) for name, lines in f.items()}), "ragtruth.zip"),
    ),
    "release": (release_files, lambda f, d: (release_bytes(f, d), "release.zip")),
    "evaluator_labels": (
        lambda: {"f": labels_seed()},
        lambda f, d: (jsonl(f["f"]), "labels.jsonl"),
    ),
}


def _fields(files: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every path below a file: a record, and any key or list element inside it."""
    return [p for p in _paths(files) if len(p) >= 2]


@pytest.mark.parametrize("fmt", list(SEEDS))
def test_every_field_of_every_json_type_is_answered_below_500(
    api, import_records, tmp_path_factory, fmt
):
    # given a manager's client, a valid seed of the format and every field in it
    seed, encode = SEEDS[fmt]
    fields = _fields(seed())
    client = api(Role.MANAGER)
    url, upload_format = IMPORTS, fmt.removesuffix("-document")
    if fmt == "evaluator_labels":
        import_records(native_seed())
        url, upload_format = LABELS, None

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        path=st.sampled_from(fields),
        value=st.sampled_from(list(JSON_TYPES)).flatmap(JSON_TYPES.get),
    )
    def case(path: tuple[Any, ...], value: Any) -> None:
        # when one field is replaced by a value of one JSON type and the file uploaded
        files = _set(seed(), path, value)
        data, name = encode(files, tmp_path_factory.mktemp("release"))
        # then the answer is below 500, and a refusal names the field and writes nothing
        check_case(client, url, data, upload_format, name)

    case()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(SEEDS))
def test_no_refusal_repeats_a_long_value_of_any_field(api, import_records, tmp_path, fmt):
    # given a manager's client and a valid seed of the format
    seed, encode = SEEDS[fmt]
    client = api(Role.MANAGER)
    url, upload_format = IMPORTS, fmt.removesuffix("-document")
    if fmt == "evaluator_labels":
        import_records(native_seed())
        url, upload_format = LABELS, None
    failures = []
    fields = _fields(seed())
    step = max(1, -(-len(fields) // LONG_FIELDS))
    for n, path in enumerate(fields[::step] + fields[-1:]):
        for value in (LONG, [LONG]):
            # when that field alone holds a long value
            data, name = encode(_set(seed(), path, value), tmp_path / f"{n}-{type(value).__name__}")
            # then a refusal quotes at most a short prefix of it (check_case asserts it)
            try:
                check_case(client, url, data, upload_format, name)
            except AssertionError as exc:
                failures.append(f"{path} = {type(value).__name__}: {str(exc)[:300]}")
    assert failures == []
