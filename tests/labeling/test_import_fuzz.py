"""Import fuzz test: seeded mutations of valid files in every format, through the upload API.

For each format (native, FaithBench, ExpertQA, GSM8K, OTel traces (JSON lines and one
document), RAGAS tables (JSONL and CSV), RAGTruth zips, a release zip, an evaluator-label file)
a valid seed file is mutated by a seeded mutator: JSON values replaced by hostile ones (integers
beyond 64 bits, huge or NUL-holding strings, lone surrogates, deep nesting, wrong types), keys
dropped, added or repeated, and bytes truncated, flipped, inserted, lines doubled or swapped.
Every case is uploaded through ``POST /api/projects/<slug>/imports/`` (or
``/evaluator-labels/``) with a manager's token, and:

- no exception escapes (the test client re-raises any) and no response is a 5xx;
- a refusal is a 400 whose every error names a location (the line, sample or file) and a
  field, with a reason that repeats at most 40 code points of any value;
- after a refusal, every labelling table has the row count it had before.

``CERTLABEL_FUZZ_CASES`` sets the number of cases per format (default 50: 300 in all in CI);
``CERTLABEL_FUZZ_SEED`` the seed (default 20261201).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import random
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from labeling.models import Role
from tests.conftest import native_record, row_counts

pytestmark = pytest.mark.django_db

CASES = int(os.environ.get("CERTLABEL_FUZZ_CASES", "50"))
SEED = int(os.environ.get("CERTLABEL_FUZZ_SEED", "20261201"))
IMPORTS = "/api/projects/study/imports/"
LABELS = "/api/projects/study/evaluator-labels/"
LONG = "Z" * 3000  # a long value: no reason may repeat more than 40 code points of it


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


HOSTILE: list[Any] = [
    2**64,
    -(2**70),
    10**400,
    2**63 - 1,
    0,
    -1,
    1.5,
    -0.0,
    1e308,
    None,
    True,
    False,
    "",
    " ",
    LONG,
    "nul \u0000 inside",
    '=HYPERLINK("x")',
    "\u202egnp.exe",
    "line\r\nbreak",
    [],
    {},
    [LONG],
    {"k": LONG},
    _deep(70),
    _deep(400),
]
# Raw JSON fragments json.dumps cannot produce: non-standard constants, lone surrogates,
# escapes of NUL, numbers too large for a double, a value nested past the parser's recursion.
RAW_HOSTILE = [
    "NaN",
    "Infinity",
    "-Infinity",
    '"\\ud800"',
    '"\\udfff tail"',
    '"\\u0000"',
    "1e999",
    "123456789012345678901234567890",
    "[" * 5000 + "]" * 5000,
]


# -- seed files -------------------------------------------------------------------------------


def native_seed() -> list[dict[str, Any]]:
    first = native_record("q1")
    first["candidates"][0]["evaluator_labels"] = [
        {"evaluator": "judge", "version": "1", "label": "admissible", "score": 0.7}
    ]
    first["candidates"][1]["prior_annotations"] = [
        {"annotator": "p1", "answer_label": "admissible"}
    ]
    first["metadata"] = {"note": "seed", "weights": [1, 2.5]}
    first["candidates"][0]["generator_settings"] = {"temperature": 0.2}
    return [first, native_record("q2")]


SUMMARY = " First sentence here. Second one is this."


def faithbench_seed() -> dict[str, Any]:
    annotation = {
        "annot_id": 1,
        "annotator_id": "a1",
        "annotator_name": "Ada",
        "label": ["Unwanted"],
        "note": "why",
        "summary_span": SUMMARY[1:6],
        "summary_start": 1,
        "summary_end": 6,
        "source_span": None,
        "source_start": None,
        "source_end": None,
    }
    sample = {
        "sample_id": 0,
        "source": "The source passage. It says things.",
        "summary": SUMMARY,
        "annotations": [annotation],
        "metadata": {"summarizer": "org/model", "hhem-2.1": 0.25, "gpt_4o": 1, "raw_sample_id": 7},
    }
    return {"samples": [sample, {**copy.deepcopy(sample), "sample_id": 1, "annotations": []}]}


def expertqa_seed() -> list[dict[str, Any]]:
    claim = {
        "claim_string": "It is blue [1].",
        "evidence": ["[1] https://a.org\n\nPassage A."],
        "support": "Complete",
        "reason_missing_support": "",
        "informativeness": "Very relevant",
        "worthiness": "Yes",
        "correctness": "Definitely correct",
        "reliability": "Reliable",
        "revised_claim": "",
        "revised_evidence": "",
    }
    answer = {
        "answer_string": "It is blue [1]. It is round [2].",
        "attribution": ["[1] https://a.org"],
        "claims": [claim],
        "revised_answer_string": "It is blue.",
        "usefulness": "Useful",
        "annotation_time": 63953,
        "annotator_id": "expert-1",
    }
    return [
        {
            "question": "What colour is the sky?",
            "annotator_id": "expert-1",
            "answers": {"sys_a": answer},
            "metadata": {"question_type": "A|B", "field": "Science", "specific_field": "Physics"},
        }
    ]


def gsm8k_seed() -> list[dict[str, Any]]:
    def sample(solution: str, correct: bool) -> dict[str, Any]:
        return {"is_correct": correct, "solution": solution}

    return [
        {
            "question": "What is 1+1?",
            "ground_truth": "1+1=<<1+1=2>>2\nA: 2",
            "6b_finetuning": sample("A: 3", False),
            "6b_verification": sample("1+1=2\nA: 2", True),
            "175b_finetuning": sample("no answer line", False),
            "175b_verification": sample("A: 2.0", False),
        }
    ]


OTEL_FIXTURES = Path(__file__).parent / "importers" / "otel"


def otel_seed() -> list[dict[str, Any]]:
    text = (OTEL_FIXTURES / "genai_traces.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def otel_document_seed() -> dict[str, Any]:
    return json.loads((OTEL_FIXTURES / "phoenix_trace.json").read_text(encoding="utf-8"))


RAGAS_ROWS = Path(__file__).parent / "importers" / "fixtures" / "ragas_eval.jsonl"
RAGTRUTH = Path(__file__).parent / "importers" / "fixtures" / "ragtruth"


def ragas_seed() -> list[dict[str, Any]]:
    """The RAGAS fixture's rows without their score columns (no evaluator version needed)."""
    rows = [json.loads(line) for line in RAGAS_ROWS.read_text(encoding="utf-8").splitlines()]
    return [
        {k: v for k, v in row.items() if k not in ("faithfulness", "answer_relevancy")}
        for row in rows
    ]


def ragas_csv_seed() -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["question", "contexts", "answer", "ground_truth"])
    for row in ragas_seed():
        writer.writerow(
            [
                row["user_input"],
                json.dumps(row["retrieved_contexts"]),
                row["response"],
                row.get("reference", ""),
            ]
        )
    return out.getvalue().encode()


def ragtruth_seed(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (RAGTRUTH / name).read_text(encoding="utf-8").splitlines()]


def ragtruth_zip(rng: random.Random) -> bytes:
    """A RAGTruth zip with one of its two files mutated."""
    names = ["response.jsonl", "source_info.jsonl"]
    mutated_name = rng.choice(names)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            data = (RAGTRUTH / name).read_bytes()
            if name == mutated_name:
                data = mutated_jsonl(rng, ragtruth_seed(name))
            archive.writestr(name, data)
    return buffer.getvalue()


def labels_seed() -> list[dict[str, Any]]:
    return [
        {"question": "q1", "candidate": "c0", "evaluator": "hhem", "version": "2.1", "score": 0.31},
        {
            "question": "q1",
            "candidate": "c0",
            "claim": 0,
            "evaluator": "judge",
            "version": "v3",
            "label": "not_supported",
        },
        {
            "question": "q2",
            "candidate": "c1",
            "evaluator": "judge",
            "version": "v3",
            "unavailable": True,
        },
    ]


# -- the mutator ------------------------------------------------------------------------------


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*path, key))
    elif isinstance(value, list):
        for n, child in enumerate(value):
            out += _paths(child, (*path, n))
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = root
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return root


MARK = "\u2603FUZZ\u2603"  # placeholder replaced by a raw JSON fragment after dumping


def mutate_value(rng: random.Random, value: Any) -> tuple[Any, str | None]:
    """One structural mutation of a parsed JSON value; a raw fragment to splice in, if any."""
    value = copy.deepcopy(value)
    paths = _paths(value)
    path = rng.choice(paths[1:] or paths)
    kind = rng.randrange(5) if path else 0  # a scalar document: only replaced
    if kind == 0:
        return _set(value, path, copy.deepcopy(rng.choice(HOSTILE))), None
    if kind == 1:
        return _set(value, path, MARK), rng.choice(RAW_HOSTILE)
    parent_path = path[:-1]
    parent = value
    for part in parent_path:
        parent = parent[part]
    if kind == 2 and isinstance(parent, dict):
        del parent[path[-1]]
    elif kind == 2 and isinstance(parent, list):
        del parent[path[-1]]
    elif kind == 3 and isinstance(parent, dict):
        parent[rng.choice(["unknown", "x" * 300, "", "\u0000k"])] = rng.choice(HOSTILE[:12])
    else:
        _set(value, path, rng.choice(["0", 0, [], "text", {"k": 0}]))
    return value, None


def dump(value: Any, raws: list[str]) -> str:
    """Serialise ``value``, splicing the raw fragments in at the placeholders."""
    text = json.dumps(value, ensure_ascii=True)
    for raw in raws:
        text = text.replace(json.dumps(MARK), raw, 1)
    return text


def mutated(rng: random.Random, value: Any) -> str:
    """One to three structural mutations of ``value``, serialised."""
    raws: list[str] = []
    for _ in range(rng.randint(1, 3)):
        value, raw = mutate_value(rng, value)
        if raw is not None:
            raws.append(raw)
    return dump(value, raws)


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """One byte-level mutation: truncate, flip, insert, double or swap lines, a BOM, CRLF."""
    kind = rng.randrange(7)
    if not data:
        return b"\xff"
    at = rng.randrange(len(data))
    if kind == 0:
        return data[:at]
    if kind == 1:
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if kind == 2:
        return data[:at] + rng.choice([b'"', b"{", b"]", b",", b"\x00", b"\xc3", b"\n"]) + data[at:]
    lines = data.split(b"\n")
    if kind == 3:
        n = rng.randrange(len(lines))
        return b"\n".join([*lines[: n + 1], lines[n], *lines[n + 1 :]])
    if kind == 4 and len(lines) > 1:
        lines[0], lines[-2] = lines[-2], lines[0]
        return b"\n".join(lines)
    if kind == 5:
        return b"\xef\xbb\xbf" + data
    return data.replace(b"\n", b"\r\n")


def mutated_jsonl(rng: random.Random, records: list[dict[str, Any]]) -> bytes:
    lines = [json.dumps(r, ensure_ascii=True) for r in records]
    n = rng.randrange(len(lines))
    lines[n] = mutated(rng, records[n])
    data = ("\n".join(lines) + "\n").encode()
    return mutate_bytes(rng, data) if rng.random() < 0.25 else data


def mutated_json(rng: random.Random, document: Any) -> bytes:
    data = mutated(rng, document).encode()
    return mutate_bytes(rng, data) if rng.random() < 0.25 else data


# -- the check --------------------------------------------------------------------------------

LONG_RUN = re.compile(r"(.)\1{40,}")


def check_case(client: Any, url: str, data: bytes, fmt: str | None, name: str) -> int:
    """Upload ``data``; return the status after checking a refusal (and rolling back)."""
    with transaction.atomic():
        before = row_counts()
        body = {"file": SimpleUploadedFile(name, data, content_type="application/octet-stream")}
        if fmt is not None:
            body["format"] = fmt
        response = client.post(url, body, format="multipart")
        status = response.status_code
        assert status in (200, 201, 400), (status, response.content[:500])
        if status == 400:
            assert row_counts() == before
            payload = response.json()
            errors = payload.get("errors")
            assert errors, payload
            for error in errors:
                assert isinstance(error["location"], str) and error["location"].strip(), error
                assert isinstance(error["field"], str) and error["field"].strip(), error
                reason = error["reason"]
                assert isinstance(reason, str) and reason, error
                assert len(reason) <= 400, (len(reason), reason[:200])
                assert LONG_RUN.search(reason) is None, reason[:200]
        transaction.set_rollback(True)
    return status


def _release_seed(tmp_path: Path) -> tuple[Any, Any]:
    from tests.labeling.test_release_import import full_records, write_release, zip_release

    return full_records(), (write_release, zip_release)


FORMATS = [
    "native",
    "faithbench",
    "expertqa",
    "gsm8k",
    "otel",
    "ragas",
    "ragtruth",
    "release",
    "evaluator_labels",
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_fuzzed_imports_are_refused_cleanly(api, project, import_records, tmp_path, fmt):
    rng = random.Random(f"{SEED}-{fmt}")
    client = api(Role.MANAGER)
    url, name, upload_format = IMPORTS, "work.jsonl", fmt
    if fmt == "evaluator_labels":
        import_records(native_seed())
        url, name, upload_format = LABELS, "labels.jsonl", None
    statuses: dict[int, int] = {}
    release_records = release_tools = None
    if fmt == "release":
        release_records, release_tools = _release_seed(tmp_path)
        name = "release.zip"
    for case in range(CASES):
        if fmt == "native":
            data = mutated_jsonl(rng, native_seed())
        elif fmt == "faithbench":
            data, name = mutated_json(rng, faithbench_seed()), "batch_1.json"
        elif fmt == "expertqa":
            data = mutated_jsonl(rng, expertqa_seed())
        elif fmt == "gsm8k":
            data = mutated_jsonl(rng, gsm8k_seed())
        elif fmt == "otel" and case % 2:
            data = mutated_json(rng, otel_document_seed())
        elif fmt == "otel":
            data = mutated_jsonl(rng, otel_seed())
        elif fmt == "ragas" and case % 2:
            # an empty upload is the upload serializer's refusal (no record to name): not fuzzed
            data, name = mutate_bytes(rng, ragas_csv_seed()) or b"\xff", "eval.csv"
        elif fmt == "ragas":
            data, name = mutated_jsonl(rng, ragas_seed()), "eval.jsonl"
        elif fmt == "ragtruth":
            data, name = ragtruth_zip(rng), "ragtruth.zip"
        elif fmt == "evaluator_labels":
            data = mutated_jsonl(rng, labels_seed())
        else:
            data = _mutated_release(rng, tmp_path / f"case{case}", release_records, release_tools)
        status = check_case(client, url, data, upload_format, name)
        statuses[status] = statuses.get(status, 0) + 1
    # the mutator does reach the validation: most cases are refused, with errors
    assert statuses.get(400, 0) >= CASES // 2, statuses
    assert sum(statuses.values()) == CASES


def _mutated_release(rng: random.Random, directory: Path, records: Any, tools: Any) -> bytes:
    """A release zip whose labels.jsonl was mutated; the manifest is rewritten to verify when
    it can be (so the records reach validation), else the zip's bytes are mutated."""
    write_release, zip_release = tools
    lines = [json.dumps(r, ensure_ascii=True) for r in records]
    n = rng.randrange(len(lines))
    value, raw = mutate_value(rng, json.loads(lines[n]))
    mutated = copy.deepcopy(records)
    if raw is None:
        mutated[n] = value
        try:
            write_release(directory, mutated)
        except Exception:  # the helper cannot count malformed records: mutate its bytes instead
            write_release(directory, records)
            return mutate_bytes(rng, zip_release(directory))
        return zip_release(directory)
    write_release(directory, records)
    labels = directory / "labels.jsonl"
    text = labels.read_text("utf-8").splitlines()
    text[n] = dump(value, [raw])
    labels.write_text("\n".join(text) + "\n", "utf-8")
    archive = io.BytesIO(zip_release(directory))
    with zipfile.ZipFile(archive) as check:
        assert "labels.jsonl" in check.namelist()
    return archive.getvalue()
