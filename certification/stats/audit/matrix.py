"""The confusion matrix of evaluator labels against resolved human labels, and its binary counts.

Rows are evaluator labels plus the :data:`~certification.stats.audit.labels.UNAVAILABLE` row,
columns are human labels plus the :data:`~certification.stats.audit.labels.UNRESOLVED` column. The
binary core is the 2 × 2 table of items where the evaluator is available and the human label is
resolved; the counts outside it stay in the 3 × 3 :class:`BinaryCounts`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from certification.stats.audit.labels import (
    UNAVAILABLE,
    UNRESOLVED,
    Polarity,
    check_aligned,
    evaluator_label_of,
    human_label_of,
)
from certification.stats.errors import StatsError


@dataclass(frozen=True)
class BinaryCounts:
    """The 3 × 3 binary table derived by a :class:`Polarity`; nothing is dropped.

    Rows are evaluator {positive, negative, unavailable}, columns human {positive, negative,
    unresolved}. The 2 × 2 core is TP, FP, FN, TN; ``unavailable_*`` are the evaluator's
    unavailable row, ``unresolved_flagged``/``unresolved_unflagged`` the evaluator positive and
    negative cells of the unresolved column.
    """

    tp: int
    fp: int
    fn: int
    tn: int
    unavailable_positive: int
    unavailable_negative: int
    unavailable_unresolved: int
    unresolved_flagged: int
    unresolved_unflagged: int

    @property
    def n_compared(self) -> int:
        """Items in the core: evaluator available and human label resolved."""
        return self.tp + self.fp + self.fn + self.tn

    @property
    def n_unavailable(self) -> int:
        """Items the evaluator did not label (any human column)."""
        return self.unavailable_positive + self.unavailable_negative + self.unavailable_unresolved

    @property
    def n_unresolved(self) -> int:
        """Items without a resolved human label (any evaluator row)."""
        return self.unresolved_flagged + self.unresolved_unflagged + self.unavailable_unresolved

    @property
    def n_total(self) -> int:
        """Every item in the table."""
        return (
            self.n_compared
            + self.n_unavailable
            + self.unresolved_flagged
            + self.unresolved_unflagged
        )

    def as_table(self) -> tuple[tuple[int, int, int], ...]:
        """Return the 3 × 3 table as nested tuples, rows evaluator and columns human."""
        return (
            (self.tp, self.fp, self.unresolved_flagged),
            (self.fn, self.tn, self.unresolved_unflagged),
            (self.unavailable_positive, self.unavailable_negative, self.unavailable_unresolved),
        )

    def core(self) -> NDArray[np.int64]:
        """Return the 2 × 2 core ``[[TP, FP], [FN, TN]]`` (rows evaluator, columns human)."""
        return np.array([[self.tp, self.fp], [self.fn, self.tn]], dtype=np.int64)


@dataclass(frozen=True)
class ConfusionMatrix:
    """Evaluator labels (rows) against resolved human labels (columns), every label kept.

    Rows are the declared order, then labels seen but not declared (sorted), then
    :data:`UNAVAILABLE` (always present, possibly all zero); columns likewise, ending with
    :data:`UNRESOLVED`. ``counts[i][j]`` counts items the evaluator labelled
    ``evaluator_labels[i]`` and people ``human_labels[j]``; ``binary`` is derived by
    ``polarity``.
    """

    evaluator_labels: tuple[str, ...]
    human_labels: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]
    polarity: Polarity
    binary: BinaryCounts

    @property
    def n_total(self) -> int:
        """Every item in the table."""
        return sum(sum(row) for row in self.counts)

    def as_array(self) -> NDArray[np.int64]:
        """Return ``counts`` as a fresh ``int64`` array (rows evaluator, columns human)."""
        return np.array(self.counts, dtype=np.int64).reshape(
            len(self.evaluator_labels), len(self.human_labels)
        )


def label_order(declared: Sequence[str] | None, seen: Iterable[str], sentinel: str) -> list[str]:
    """The declared labels, then the other seen ones sorted, then ``sentinel`` last."""
    order = [label for label in (declared or ()) if label != sentinel]
    if len(set(order)) != len(order):
        raise StatsError("a declared label order may not repeat a label")
    known = set(order)
    order += sorted({label for label in seen if label not in known and label != sentinel})
    return [*order, sentinel]


def confusion_matrix(
    evaluator_labels: Sequence[str | None],
    human_labels: Sequence[str | None],
    polarity: Polarity,
    *,
    evaluator_order: Sequence[str] | None = None,
    human_order: Sequence[str] | None = None,
) -> ConfusionMatrix:
    """Cross-tabulate evaluator labels against resolved human labels.

    ``None`` or :data:`UNAVAILABLE` means no evaluator label, ``None`` or :data:`UNRESOLVED` no
    resolved human label. Declared labels (``evaluator_order``, ``human_order``, display order)
    get a row or column even when no item has them; n_items = 0 gives an all-zero table with
    only those and the two sentinels.

    Raises:
        StatsError: if the sequences have different lengths or a declared order repeats a label.
    """
    check_aligned(evaluator_labels, human_labels)
    pairs = Counter(
        (evaluator_label_of(e), human_label_of(h))
        for e, h in zip(evaluator_labels, human_labels, strict=True)
    )
    rows = label_order(evaluator_order, (e for e, _ in pairs), UNAVAILABLE)
    cols = label_order(human_order, (h for _, h in pairs), UNRESOLVED)
    counts = tuple(tuple(pairs.get((r, c), 0) for c in cols) for r in rows)
    return ConfusionMatrix(
        evaluator_labels=tuple(rows),
        human_labels=tuple(cols),
        counts=counts,
        polarity=polarity,
        binary=_binary(pairs, polarity),
    )


def _binary(pairs: Mapping[tuple[str, str], int], polarity: Polarity) -> BinaryCounts:
    cells: Counter[tuple[str, str]] = Counter()
    for (e, h), count in pairs.items():
        row = "u" if e == UNAVAILABLE else ("p" if e in polarity.evaluator_positive else "n")
        col = "u" if h == UNRESOLVED else ("p" if h in polarity.human_positive else "n")
        cells[row, col] += count
    return BinaryCounts(
        tp=cells["p", "p"],
        fp=cells["p", "n"],
        fn=cells["n", "p"],
        tn=cells["n", "n"],
        unavailable_positive=cells["u", "p"],
        unavailable_negative=cells["u", "n"],
        unavailable_unresolved=cells["u", "u"],
        unresolved_flagged=cells["p", "u"],
        unresolved_unflagged=cells["n", "u"],
    )
