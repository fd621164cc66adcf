"""README.md of a release: a Hugging Face dataset card (YAML header + description).

The header's ``configs`` make a release directory loadable with ``datasets.load_dataset(path)``:
the default config reads ``labels.parquet`` (one split, ``train``, with a ``partition`` column).
A second config for ``sources.jsonl`` is left out on purpose: ``datasets`` infers one file
format per directory and then reads the JSONL as Parquet.
"""

from __future__ import annotations

from typing import Any

from certification.models import Release
from labeling.release_format import LABELS_PARQUET, SCHEMA_VERSION, canonical_json


def _yaml_string(text: str) -> str:
    return canonical_json(text)  # a JSON string is a valid YAML double-quoted scalar


def _one_line(text: str) -> str:
    return " ".join(text.split())


def certifying_methods(entry: dict[str, Any]) -> list[str]:
    """The methods of a named run that certify on their own (``methods``, from schema 1.4)."""
    return [name for name, half in entry.get("methods", {}).items() if half["certified"]]


def verdict_text(entry: dict[str, Any]) -> str:
    """Whether a named run certifies, for the card (empty for releases before schema 1.3).

    From schema 1.4 a run of a ``both`` spec whose one method certifies says which.
    """
    if "certified" not in entry:
        return ""
    if entry["certified"]:
        return ": certifies"
    alone = certifying_methods(entry)
    if alone:  # a method of a both spec certifies on its own (schema 1.4)
        return f": certifies {alone[0]} only ({entry['reason']})"
    return f": certifies nothing ({entry['reason']})"


def dataset_card(release: Release, counts: dict[str, Any]) -> str:
    """Return the dataset card of ``release`` (Markdown with a YAML front matter)."""
    overall = counts["overall"]
    lines = [
        "---",
        f"pretty_name: {_yaml_string(f'{release.project_name} {release.version}')}",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        f"    path: {LABELS_PARQUET}",
        "tags:",
        "- certlabel",
        "- rag-evaluation",
        "---",
        "",
        f"# {_one_line(release.project_name)}: release {release.version}",
        "",
        "A certified label set exported by certlabel (release format "
        f"{SCHEMA_VERSION}): human labels of retrieval-augmented generation outputs against "
        "pinned source spans, with their adjudication status.",
        "",
        f"- Project: `{release.project_slug}`; label policy version {release.policy.version}.",
        f"- Parent release: {release.parent.version if release.parent else 'none'}.",
        f"- Candidates: {overall['items']['count']}; resolved {overall['resolved']['count']} "
        f"(consensus {overall['consensus']['count']}, adjudicated "
        f"{overall['adjudicated']['count']}, unresolved {overall['unresolved']['count']}); "
        f"pending {overall['pending']['count']}.",
        f"- Evidence unavailable: {overall['evidence_unavailable_answers']['count']} of "
        f"{overall['evidence_unavailable_answers']['denominator']} resolved answer labels, "
        f"{overall['evidence_unavailable_claims']['count']} of "
        f"{overall['evidence_unavailable_claims']['denominator']} resolved claim labels.",
        f"- Source versions: {counts['sources']}.",
        "- Per label policy version (counted apart, never pooled): "
        + (
            "; ".join(
                f"{'v' + version if version.isdigit() else 'version ' + version}: "
                f"{block['annotations']['count']} annotations, "
                f"{block['resolved']['count']} resolved items"
                for version, block in counts.get("per_policy_version", {}).items()
            )
            or "no labels"
        )
        + ".",
        "",
        "## Certified calibration runs",
        "",
    ]
    if release.certifies:
        for entry in release.certifies:
            spec, run = entry["spec"], entry["run"]
            lines.append(
                f"- {spec['name']} v{spec['version']} (spec sha256 `{spec['content_sha256']}`): "
                f"run input sha256 `{run['input_sha256']}`, outcome {run['outcome'] or 'n/a'}"
                + verdict_text(entry)
                + "."
            )
    else:
        lines.append("None: this release certifies no calibration run.")
    lines += [
        "",
        "## Files",
        "",
        "- `labels.jsonl`: one record per candidate answer (question, candidate, claims, "
        "annotations by pseudonym, resolution, evaluator labels kept apart).",
        "- `labels.parquet`, `labels.csv`: the same, one row per candidate; nested values are "
        "JSON in the `*_json` columns. In the CSV, a string that a spreadsheet would run as a "
        "formula (starting with =, +, -, @, a tab or a carriage return, after any ') has one "
        "more leading '. `datasets.load_dataset(<this directory>)` loads the "
        "Parquet file as one split, `train`; its `partition` column holds dev, calibration "
        "and test.",
        "- `sources.jsonl`: every pinned source version (text, sha256, publication and "
        "observation times).",
        "- `ledger.json`, `report.json`: guarantee ledgers, held-out report, agreement, "
        "evaluator audits.",
        "- `provenance.jsonld`: W3C PROV-O.",
        "- `manifest.json`: every file's sha256 and size and every count with its denominator. "
        "Check a copy with `manage.py verify_release PATH`.",
        "",
        "Offsets are Unicode code points of the stored text, 0-based and end-exclusive. "
        "Annotators appear under pseudonyms only.",
    ]
    if release.notes:
        lines += ["", "## Notes", "", release.notes]
    return "\n".join(lines) + "\n"
