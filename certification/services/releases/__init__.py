"""Releases: certified label sets.

``freeze`` pins a release and requests builds; ``records`` streams the labels of a release's
pinned state; ``build`` writes the files (labels JSONL/CSV/Parquet, sources, ledger, report,
provenance, dataset card, manifest, zip) into the release storage.
"""

from certification.services.releases.build import (
    release_build_execute,
    release_build_fail,
    release_export,
)
from certification.services.releases.freeze import (
    release_freeze,
    release_rebuild,
    release_tag_move,
)

__all__ = [
    "release_build_execute",
    "release_build_fail",
    "release_export",
    "release_freeze",
    "release_rebuild",
    "release_tag_move",
]
