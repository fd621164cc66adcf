"""Label policy presets: the policies a new project can start with, each with its guideline.

One module for every way a project is created (the "New project" page, ``POST
/api/projects/``, ``import_workload --create`` and the demo): a preset is a full policy
description (:class:`labeling.services.policies.PolicyDescription`) whose guideline is
self-contained Markdown explaining every label, when evidence is required and the reasons for
``evidence_unavailable``. The dataset presets add what their importer maps (the adapter's
``DATA_NOTES``).

Presets: ``source_relative`` (the default), ``external_truth``, ``faithbench``, ``expertqa``,
``gsm8k``, ``ragtruth`` and ``wice``. A preset only fills the project's first policy version;
the manager edits it freely while it is a draft.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from labeling import vocabulary as v
from labeling.exceptions import InvalidInput
from labeling.importers import expertqa, faithbench, gsm8k, ragtruth, wice
from labeling.importers.record_errors import echo
from labeling.selectors.policies import (
    CANNOT_DECIDE_KEY,
    DEFAULT_DESCRIPTIONS,
    DEFAULT_REASON_TEXTS,
    DEFAULT_TEXTS,
    REASONS,
    SCHEMA,
    default_key,
)
from labeling.services.policies import PolicyDescription, policy_description_check

DEFAULT_PRESET = "source_relative"

# Each reason for "evidence unavailable", explained (the guideline's text; the label shows the
# reason's display text).
REASON_EXPLANATIONS: Mapping[str, str] = {
    "not_found": "the source is missing: no text was pinned, the pinned text is empty, or it "
    "is not the document the item refers to.",
    "blocked": "the pinned text is a paywall, a login page, a robot check or an error page "
    "instead of the document.",
    "source_changed": "the pinned text is not the version the answer was made from (the "
    "document was edited since), so it cannot judge the answer.",
}

_SOURCE_RELATIVE = """\
Judge against the **pinned sources** shown with the item, and only against them: a claim is
supported when a pinned source states it or directly implies it, whatever you know from
elsewhere. Do not use outside knowledge; a true statement the sources do not make is *not
supported*, and a false statement the sources make is *supported*."""

_EXTERNAL_TRUTH = """\
Judge against **what is true**: your own knowledge, the reference shown with the item, or a
reliable source you consult. Pinned sources, when an item has any, may be cited, but a
statement can be true without one."""

_EXTERNAL_CLAIMS: Mapping[str, tuple[str, str]] = {
    v.SUPPORTED: ("true", "The claim is true."),
    v.CONTRADICTED: ("false", "The claim is false."),
    v.NOT_SUPPORTED: (
        "cannot be verified",
        "Whether the claim is true cannot be established (nothing reliable says either way).",
    ),
    v.EVIDENCE_UNAVAILABLE: (
        DEFAULT_TEXTS[v.EVIDENCE_UNAVAILABLE],
        "The claim cannot be judged because the reference cannot be read; choose the reason.",
    ),
}
_EXTERNAL_ANSWERS: Mapping[str, str] = {
    v.ADMISSIBLE: "The answer may be accepted: it answers the question and what it states is true.",
    v.INADMISSIBLE: "The answer must not be accepted: it states something false that matters, "
    "or it does not answer the question.",
    v.ABSTAINED: DEFAULT_DESCRIPTIONS["answer"][v.ABSTAINED],
    v.EVIDENCE_UNAVAILABLE: "The answer cannot be judged because the reference cannot be "
    "read; choose the reason.",
}
_GSM8K_ANSWERS: Mapping[str, str] = {
    **_EXTERNAL_ANSWERS,
    v.ADMISSIBLE: "The solution's final answer is the true answer to the question.",
    v.INADMISSIBLE: "The solution's final answer is wrong, or the solution gives no final "
    "answer (it stops before one).",
}


@dataclass(frozen=True)
class PolicyPreset:
    """A preset: its name, title, one-line summary and full policy description."""

    name: str
    title: str
    summary: str
    description: PolicyDescription

    def description_data(self) -> dict[str, Any]:
        """Return the preset's policy description as JSON-ready data (a fresh copy)."""
        return self.description.data()


def _labels(
    level: str,
    texts: Mapping[str, str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    evidence: Sequence[str] = (),
) -> list[dict[str, Any]]:
    rows = []
    for position, value in enumerate(SCHEMA["answer" if level == "answer" else "claim"]):
        row: dict[str, Any] = {
            "value": value,
            "text": (texts or {}).get(value, DEFAULT_TEXTS[value]),
            "description": (descriptions or {}).get(
                value, DEFAULT_DESCRIPTIONS["answer" if level == "answer" else "claim"][value]
            ),
            "key": default_key(position),
        }
        if level == "claim":
            row["requires_evidence"] = value in evidence
        rows.append(row)
    return rows


def guideline_markdown(
    *, title: str, judge_against: str, data: Mapping[str, Any], notes: str = ""
) -> str:
    """Return a self-contained guideline (Markdown) explaining every label of ``data``.

    Args:
        title: The guideline's heading.
        judge_against: A paragraph saying what labels are judged against.
        data: A policy description without its guideline (see
            :func:`labeling.services.policies.policy_description_check`).
        notes: Markdown about the data set (how its imported labels were mapped), or "".
    """

    def entry(row: Mapping[str, Any]) -> str:
        cite = " **Cite at least one evidence span.**" if row.get("requires_evidence") else ""
        return f"- **{row['text']}** (key `{row['key']}`): {row['description']}{cite}"

    claim_rows = data["claim_labels"]
    rows = (*data["answer_labels"], *claim_rows)
    offered = {row["value"]: row["text"] for row in rows}
    cited = [row["text"] for row in claim_rows if row.get("requires_evidence")]
    parts = [
        f"# {title}",
        judge_against,
        "## The answer",
        "Give the answer as a whole one label:",
        "\n".join(entry(row) for row in data["answer_labels"]),
        "## Each claim",
        "The answer is split into claims (statements). Give every claim exactly one label:",
        "\n".join(entry(row) for row in claim_rows),
        "## Evidence",
    ]
    if cited:
        parts.append(
            f"A claim labelled {' or '.join(f'**{t}**' for t in cited)} must cite at least one "
            "evidence span: select the words of a pinned source that decide the claim and add "
            "them to the claim (key `c`). Cite the shortest passage that decides it, and several "
            "passages when the claim needs several. The other labels may cite evidence but need "
            "not."
        )
    else:
        parts.append(
            "No label requires evidence. Where a pinned source decides a claim, cite it "
            "(select the words and press `c`): a cited span makes the label easy to check."
        )
    if v.EVIDENCE_UNAVAILABLE in offered:
        reasons = "\n".join(
            f"- **{row['text']}**: {REASON_EXPLANATIONS[row['value']]}"
            for row in data["unavailable_reasons"]
        )
        parts += [
            "## When the evidence cannot be read",
            f"Choose **{offered[v.EVIDENCE_UNAVAILABLE]}** only when the evidence cannot be "
            "read, never when it can be read but says nothing either way"
            + (f" (that is **{offered[v.NOT_SUPPORTED]}**)" if v.NOT_SUPPORTED in offered else "")
            + ". Give the reason:",
            reasons,
        ]
    parts += [
        "## Can't decide, boundaries, comments",
        f"If two labels seem equally right and this guideline does not settle it, choose "
        f"**can't decide** (key `{CANNOT_DECIDE_KEY}`) instead of guessing: the item goes to an "
        "adjudicator. Say in the comment what is unclear.",
        "If a claim's boundaries are wrong (cut mid-sentence, or two statements in one), label "
        "it as well as you can and tick **boundary error** (key `b`).",
    ]
    if notes:
        parts += ["## About this data", notes.strip()]
    return "\n\n".join(parts) + "\n"


def _reasons() -> list[dict[str, str]]:
    return [{"value": r, "text": DEFAULT_REASON_TEXTS[r]} for r in REASONS]


def _preset(
    name: str,
    title: str,
    summary: str,
    relation: str,
    data: dict[str, Any],
    notes: str = "",
) -> PolicyPreset:
    judge = _SOURCE_RELATIVE if relation == "source_relative" else _EXTERNAL_TRUTH
    guideline = guideline_markdown(title=title, judge_against=judge, data=data, notes=notes)
    described = policy_description_check(
        {**data, "evidence_relation": relation, "guideline": guideline}
    )
    return PolicyPreset(name, title, summary, described)


def _source_relative(evidence: Sequence[str] = (v.SUPPORTED, v.CONTRADICTED)) -> dict[str, Any]:
    return {
        "answer_labels": _labels("answer"),
        "claim_labels": _labels("claim", evidence=evidence),
        "unavailable_reasons": _reasons(),
    }


def _external_truth(answers: Mapping[str, str] = _EXTERNAL_ANSWERS) -> dict[str, Any]:
    return {
        "answer_labels": _labels("answer", descriptions=answers),
        "claim_labels": _labels(
            "claim",
            texts={k: t for k, (t, _) in _EXTERNAL_CLAIMS.items()},
            descriptions={k: d for k, (_, d) in _EXTERNAL_CLAIMS.items()},
        ),
        "unavailable_reasons": _reasons(),
    }


@cache
def presets() -> dict[str, PolicyPreset]:
    """Return every preset by name, the default first (built and validated once)."""
    made = [
        _preset(
            "source_relative",
            "Source-relative faithfulness",
            "Are the answer and its claims supported by the pinned sources? (default)",
            "source_relative",
            _source_relative(),
        ),
        _preset(
            "external_truth",
            "External truth",
            "Are the answer and its claims true? Sources may be cited but are not required.",
            "external_truth",
            _external_truth(),
        ),
        _preset(
            "faithbench",
            "FaithBench summaries (source-relative faithfulness)",
            "FaithBench: is each summary sentence supported by the passage it summarises?",
            "source_relative",
            _source_relative(),
            faithbench.DATA_NOTES,
        ),
        _preset(
            "expertqa",
            "ExpertQA attributed answers (source-relative faithfulness: attribution)",
            "ExpertQA: is each claim supported by the evidence passages it cites?",
            "source_relative",
            _source_relative(),
            expertqa.DATA_NOTES,
        ),
        _preset(
            "gsm8k",
            "GSM8K grade-school maths (external truth)",
            "GSM8K: is the solution's final answer the true answer?",
            "external_truth",
            _external_truth(_GSM8K_ANSWERS),
            gsm8k.DATA_NOTES,
        ),
        _preset(
            "ragtruth",
            "RAGTruth responses (source-relative faithfulness)",
            "RAGTruth: is each sentence of the response supported by the prompt's sources?",
            "source_relative",
            _source_relative(),
            ragtruth.DATA_NOTES,
        ),
        _preset(
            "wice",
            "WiCE Wikipedia citations (source-relative faithfulness)",
            "WiCE: is each Wikipedia sentence supported by the web page it cites?",
            "source_relative",
            _source_relative(),
            wice.DATA_NOTES,
        ),
    ]
    return {preset.name: preset for preset in made}


def preset_get(name: str) -> PolicyPreset:
    """Return the preset ``name``.

    Raises:
        InvalidInput: no such preset (field ``preset``).
    """
    found = presets().get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidInput(f"unknown preset {echo(name)}; one of {list(presets())}", field="preset")
    return found


def preset_choices() -> list[tuple[str, str]]:
    """Return ``(name, "title: summary")`` for every preset, the default first (form choices)."""
    return [(p.name, f"{p.title}: {p.summary}") for p in presets().values()]
