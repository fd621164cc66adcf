"""Services of certification (STYLE.md C3): each recomputes from resolved labels, idempotently."""

from certification.services.agreement import agreement_recompute, level_to_json, votes_sha256

__all__ = ["agreement_recompute", "level_to_json", "votes_sha256"]
