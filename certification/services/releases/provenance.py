"""provenance.jsonld: W3C PROV-O (JSON-LD) of a release.

PROV-O represents derivation between an entity and its predecessor, so labels stay
reconstructible. The release is a ``prov:Entity`` derived from its parent
(``prov:wasRevisionOf``) and from the pinned source versions it cites; it was influenced by one
labelling activity per annotator, one adjudication activity per adjudicator, the consensus
comparison and one activity per evaluator version, each associated with its agent (a pseudonym,
never a name). Activity times are the
first and last label times: data, not the time of the build. The document's size grows with the
number of sources, annotators and evaluators, never with the number of labels.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

from labeling.release_format import canonical_json

if TYPE_CHECKING:
    from certification.models import Release
    from certification.services.releases.records import ReleaseReader

URN = "urn:certlabel"
PROV_CONTEXT = {
    "prov": "http://www.w3.org/ns/prov#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "certlabel": "urn:certlabel:vocab:",
}


def _time(value: str | None) -> dict[str, str] | None:
    return None if value is None else {"@value": value, "@type": "xsd:dateTime"}


@dataclass
class _Activity:
    """Label counts and first/last label time of one agent's activity."""

    kind: str
    labels: int = 0
    first: str | None = None
    last: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, when: str | None) -> None:
        self.labels += 1
        if when is not None:
            self.first = when if self.first is None else min(self.first, when)
            self.last = when if self.last is None else max(self.last, when)


class ProvenanceCollector:
    """Gathers, record by record, what the provenance document states."""

    def __init__(self, reader: ReleaseReader) -> None:
        self.reader = reader
        self.annotators: dict[tuple[str, str], _Activity] = {}
        self.adjudicators: dict[str, _Activity] = {}
        self.consensus = _Activity("consensus")
        self.evaluators: dict[tuple[str, str], _Activity] = {}

    def add(self, record: dict[str, Any]) -> None:
        """Count one labels.jsonl record."""
        for annotation in record["annotations"]:
            key = (annotation["annotator"], annotation["origin"])
            self.annotators.setdefault(key, _Activity("labelling")).add(annotation["labelled_at"])
        resolution = record["resolution"]
        if resolution is not None:
            if resolution["adjudicator"] is None:
                self.consensus.add(resolution["resolved_at"])
            else:
                self.adjudicators.setdefault(
                    resolution["adjudicator"], _Activity("adjudication")
                ).add(resolution["resolved_at"])
        for label in record["evaluator_labels"]:
            key = (label["evaluator"], label["version"])
            self.evaluators.setdefault(key, _Activity("evaluation")).add(None)

    def nodes(self, release: Release) -> Iterator[dict[str, Any]]:
        """Yield the nodes of the PROV-O graph of ``release``, one at a time."""
        slug = quote(release.project_slug, safe="")
        base = f"{URN}:{slug}"
        influences: list[dict[str, str]] = []

        def agent(name: str, kind: str) -> tuple[str, dict[str, Any]]:
            agent_id = f"{base}:agent:{quote(name, safe='')}"
            return agent_id, {"@id": agent_id, "@type": ["prov:Agent", kind], "rdfs:label": name}

        def activity(
            activity_id: str, label: str, data: _Activity, agent_id: str | None
        ) -> dict[str, Any]:
            node: dict[str, Any] = {
                "@id": activity_id,
                "@type": "prov:Activity",
                "rdfs:label": label,
                "certlabel:labelCount": data.labels,
            }
            if agent_id is not None:
                node["prov:wasAssociatedWith"] = {"@id": agent_id}
            if data.first is not None:
                node["prov:startedAtTime"] = _time(data.first)
                node["prov:endedAtTime"] = _time(data.last)
            influences.append({"@id": activity_id})
            return node

        for (name, origin), data in sorted(self.annotators.items()):
            kind = "prov:Person" if origin == "human" else "prov:SoftwareAgent"
            agent_id, node = agent(name, kind)
            yield node
            yield activity(
                f"{base}:labelling:{quote(name, safe='')}", f"labelling by {name}", data, agent_id
            )
        for name, data in sorted(self.adjudicators.items()):
            agent_id, node = agent(name, "prov:Person")
            yield node
            yield activity(
                f"{base}:adjudication:{quote(name, safe='')}",
                f"adjudication by {name}",
                data,
                agent_id,
            )
        if self.consensus.labels:
            yield activity(
                f"{base}:consensus", "consensus of independent annotations", self.consensus, None
            )
        for (name, version), data in sorted(self.evaluators.items()):
            label = f"{name}@{version}"
            agent_id, node = agent(f"evaluator:{label}", "prov:SoftwareAgent")
            yield node
            yield activity(
                f"{base}:evaluation:{quote(label, safe='')}",
                f"evaluation by {label}",
                data,
                agent_id,
            )

        derived: list[dict[str, str]] = []
        if release.parent is not None:
            parent_id = f"{base}:release:{release.parent.version}"
            derived.append({"@id": parent_id})
            yield {"@id": parent_id, "@type": "prov:Entity"}
        for ref in self.reader.sources.values():  # in (id, version) order
            key = quote(ref.key, safe="")
            node = {
                "@id": f"{base}:source:{key}:v{ref.version}",
                "@type": "prov:Entity",
                "rdfs:label": f"{ref.key} version {ref.version}",
                "certlabel:sha256": ref.sha256,
            }
            if ref.published_at is not None:
                node["prov:generatedAtTime"] = _time(ref.published_at)
            if ref.observed_at is not None:
                node["certlabel:observedAt"] = _time(ref.observed_at)
            if ref.version > 1:
                node["prov:wasRevisionOf"] = {"@id": f"{base}:source:{key}:v{ref.version - 1}"}
            derived.append({"@id": node["@id"]})
            yield node

        release_node: dict[str, Any] = {
            "@id": f"{base}:release:{release.version}",
            "@type": ["prov:Entity", "prov:Collection"],
            "rdfs:label": f"{release.project_slug} release {release.version}",
            "certlabel:labelPolicyVersion": release.policy.version,
            "prov:wasDerivedFrom": derived,
            "prov:wasInfluencedBy": influences,
        }
        if release.parent is not None:
            release_node["prov:wasRevisionOf"] = derived[0]
        yield release_node

    def write(self, release: Release, stream: IO[str]) -> None:
        """Write the PROV-O JSON-LD document of ``release`` to ``stream``, node by node.

        One node per line (canonical JSON), so memory stays flat however many sources there
        are; the whole is one JSON object: ``{"@context": ..., "@graph": [...]}``.
        """
        stream.write('{"@context":' + canonical_json(PROV_CONTEXT) + ',"@graph":[\n')
        for index, node in enumerate(self.nodes(release)):
            if index:
                stream.write(",\n")
            stream.write(canonical_json(node))
        stream.write("\n]}\n")
