"""Label and status names the labelling code compares against, each written once.

The label vocabulary itself is a project's :class:`labeling.models.LabelPolicy`; these are the
values with a meaning of their own in any policy.
"""

# The label (answer or claim) that says the evidence could not be judged; it alone carries a
# reason, one of the policy's ``unavailable_reasons``, which is part of the vote.
EVIDENCE_UNAVAILABLE = "evidence_unavailable"
