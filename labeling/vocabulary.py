"""Label and status names the labelling code compares against, each written once.

The label vocabulary itself is a project's :class:`labeling.models.LabelPolicy`; these are the
values with a meaning of their own in any policy, the default policy's labels, and the names of
a resolution's status. This module imports nothing and needs no Django: the models' choices,
the services, ``certification.certificates`` and ``certification.stats`` all import it (the
``labeling`` package itself loads nothing; tests/test_architecture.py checks both, and that no
app module spells a label's name out instead).
"""

# -- labels -----------------------------------------------------------------------------------

# The label (answer or claim) that says the evidence could not be judged; it alone carries a
# reason, one of the policy's ``unavailable_reasons``, which is part of the vote.
EVIDENCE_UNAVAILABLE = "evidence_unavailable"
# A vote that is not a label: the annotator cannot decide. It counts as a vote, never reaches
# consensus and always sends the item to the disagreement queue.
CANNOT_DECIDE = "cannot_decide"

# The default policy's answer labels.
ADMISSIBLE = "admissible"
INADMISSIBLE = "inadmissible"
ABSTAINED = "abstained"
# The default policy's claim labels. A supporting or contradicting label cites evidence.
SUPPORTED = "supported"
CONTRADICTED = "contradicted"
NOT_SUPPORTED = "not_supported"

DEFAULT_ANSWER_LABELS = (ADMISSIBLE, INADMISSIBLE, ABSTAINED, EVIDENCE_UNAVAILABLE)
DEFAULT_CLAIM_LABELS = (SUPPORTED, CONTRADICTED, NOT_SUPPORTED, EVIDENCE_UNAVAILABLE)
EVIDENCE_REQUIRED = frozenset({SUPPORTED, CONTRADICTED})

# -- resolution statuses ----------------------------------------------------------------------

CONSENSUS = "consensus"
ADJUDICATED = "adjudicated"
UNRESOLVED = "unresolved"
# A candidate with no resolution yet (still open or in the queue): an outcome, not a status.
PENDING = "pending"
