"""The vectorised path: integer-coded samples and their rank scores for many questions at once.

It computes the same scores as :func:`~certification.stats.conformal.scores.nonconformity_score`
over an (n, K) array of class codes (-1 = no sample), handling 200,000 questions x K = 20 samples
well under a second.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.canonical import Canonicaliser
from certification.stats.conformal.scores import (
    INF,
    TieRule,
    canonical_order_key,
    check_tie_rule,
    resolve_canonicaliser,
)
from certification.stats.errors import StatsError


@dataclass(frozen=True, eq=False)
class EncodedSamples:
    """Samples as integer codes of canonical classes.

    ``codes`` is ``int64`` (n, K) indexing ``vocabulary``, -1 = no sample (ragged K, or cut by
    sequential stopping), only after the real samples. ``vocabulary`` is ascending
    (:func:`~certification.stats.conformal.scores.canonical_order_key`: numbers numerically first,
    then strings), so ascending code = ascending class (the ``"canonical_ascending"`` tie rule).
    """

    codes: NDArray[np.int64]
    vocabulary: tuple[str, ...]


def encode_samples(
    samples: Sequence[Sequence[str]], *, canonicaliser: Canonicaliser | str = "exact"
) -> EncodedSamples:
    """Canonicalise every sample and code the classes in ascending canonical order.

    Shorter rows of ``samples`` are padded with -1.

    Raises:
        StatsError: on an unknown canonicaliser or a non-string sample.
    """
    canon = resolve_canonicaliser(canonicaliser)
    canonical = [[canon(answer) for answer in row] for row in samples]
    vocabulary = tuple(sorted({cls for row in canonical for cls in row}, key=canonical_order_key))
    index = {cls: i for i, cls in enumerate(vocabulary)}
    width = max((len(row) for row in canonical), default=0)
    codes = np.full((len(canonical), width), -1, dtype=np.int64)
    for i, row in enumerate(canonical):
        codes[i, : len(row)] = [index[cls] for cls in row]
    return EncodedSamples(codes=codes, vocabulary=vocabulary)


def encode_admissible(
    samples: Sequence[Sequence[str]],
    admissible: Sequence[Collection[str]],
    *,
    canonicaliser: Canonicaliser | str = "exact",
) -> NDArray[np.bool_]:
    """Mark each sample admissible iff its canonical class is among the question's admissible ones.

    ``admissible`` holds n collections of admissible answers (canonicalised with the same
    canonicaliser). Returns ``bool`` (n, K), aligned with :func:`encode_samples`'s codes (padding
    False).

    Raises:
        StatsError: if the lengths differ or the canonicaliser is unknown.
    """
    if len(samples) != len(admissible):
        raise StatsError(
            f"samples and admissible must list the same questions, got {len(samples)} and "
            f"{len(admissible)}"
        )
    canon = resolve_canonicaliser(canonicaliser)
    width = max((len(row) for row in samples), default=0)
    mask = np.zeros((len(samples), width), dtype=bool)
    for i, (row, good) in enumerate(zip(samples, admissible, strict=True)):
        good_classes = {canon(answer) for answer in good}
        mask[i, : len(row)] = [canon(answer) in good_classes for answer in row]
    return mask


@dataclass(frozen=True, eq=False)
class RankScores:
    """Vectorised scores of n questions.

    Each ``int64``/``float64`` of shape (n,): ``scores`` is the rank of the highest-ranked
    admissible class (``inf`` if none), ``n_classes`` the distinct classes sampled,
    ``mode_codes`` the code of the top-ranked class (-1 if no sample): a mode selector's answer.
    """

    scores: NDArray[np.float64]
    n_classes: NDArray[np.int64]
    mode_codes: NDArray[np.int64]


def check_codes(codes: ArrayLike) -> NDArray[np.int64]:
    """Return ``codes`` as a 2-D int64 array of class codes (-1 or more), or raise StatsError."""
    array = np.asarray(codes)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
        raise StatsError(
            f"codes must be a 2-D integer array (n, K), got {array.shape} {array.dtype}"
        )
    array = array.astype(np.int64, copy=False)
    if (array < -1).any():
        raise StatsError("codes must be >= 0, or -1 for no sample")
    valid = array >= 0
    if array.shape[1] > 1 and (valid[:, 1:] & ~valid[:, :-1]).any():
        raise StatsError("codes may hold -1 (no sample) only after a question's real samples")
    return array


def sorted_runs(
    code_arr: NDArray[np.int64], adm: NDArray[np.bool_] | None
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], int]:
    """Sort each row by (class, admissibility, sample position) packed into one int64 key.

    One value sort (no argsort + gather) keeps the vectorised path fast; padding (-1) becomes a
    class after every real one, so it sorts last. Returns the sorted class, admissibility bit and
    original position arrays, and the padding class.
    """
    n, width = code_arr.shape
    pos_bits = max(1, (width - 1).bit_length())
    pad = int(code_arr.max(initial=-1)) + 1
    if pad >= 1 << (62 - pos_bits - 1):
        raise StatsError("codes are too large to pack: recode the classes as 0..V-1")
    key = np.where(code_arr >= 0, code_arr, pad) << 1
    if adm is not None:
        key |= adm
    key = (key << pos_bits) | np.arange(width, dtype=np.int64)
    key.sort(axis=1)
    positions = key & ((1 << pos_bits) - 1)
    bits = (key >> pos_bits) & 1
    classes = key >> (pos_bits + 1)
    return classes, bits, positions, pad


def run_starts(classes: NDArray[np.int64], pad: int) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Which entries are valid classes (below ``pad``), and which start a run of one class."""
    valid = classes < pad
    start = valid.copy()
    start[:, 1:] &= classes[:, 1:] != classes[:, :-1]
    return valid, start


def rank_scores_from_codes(
    codes: ArrayLike, admissible: ArrayLike, *, tie_rule: TieRule = "canonical_ascending"
) -> RankScores:
    """Frequency ranks and nonconformity scores of n questions at once.

    For ``"canonical_ascending"`` the codes must be ordered like the canonical classes (as
    :func:`encode_samples` assigns them); ``"first_seen"`` uses the sample order. Cost: one
    row-wise value sort of an (n, K) array plus a few elementwise passes.

    ``codes`` is ``int`` (n, K), classes 0..V-1, -1 = no sample (trailing only); ``admissible``
    is ``bool`` (n, K), and every sample of a class must agree; ``tie_rule`` in
    :data:`TIE_RULES`.

    Raises:
        StatsError: on malformed arrays, mismatched shapes, an unknown tie rule, or a class whose
            samples disagree on admissibility (a canonicalisation or labelling error that must
            not be resolved silently).
    """
    check_tie_rule(tie_rule)
    code_arr = check_codes(codes)
    adm = np.asarray(admissible)
    if adm.shape != code_arr.shape or adm.dtype != np.bool_:
        raise StatsError(
            f"admissible must be a boolean array of shape {code_arr.shape}, got {adm.shape} "
            f"{adm.dtype}"
        )
    n, width = code_arr.shape
    if width == 0:
        return RankScores(
            scores=np.full(n, INF),
            n_classes=np.zeros(n, dtype=np.int64),
            mode_codes=np.full(n, -1, dtype=np.int64),
        )
    classes, bits, positions, pad = sorted_runs(code_arr, adm & (code_arr >= 0))
    valid, start = run_starts(classes, pad)
    # Within a class the key sorts inadmissible samples first; a change of the bit inside a run
    # means the class's samples disagree.
    mixed = valid[:, 1:] & ~start[:, 1:] & (bits[:, 1:] != bits[:, :-1])
    if mixed.any():
        question = int(np.flatnonzero(mixed.any(axis=1))[0])
        raise StatsError(
            f"admissible disagrees within a canonical class (question {question}): samples "
            "of one class must be all admissible or all inadmissible"
        )
    # Run length at each run start: the distance to the next start (or to the padding, or K).
    index = np.arange(width, dtype=np.int64)
    boundary = np.where(start | ~valid, index, width)
    following = np.full((n, width), width, dtype=np.int64)
    following[:, :-1] = np.minimum.accumulate(boundary[:, :0:-1], axis=1)[:, ::-1]
    counts = following - index
    # Rank key: more samples first, then the tie rule; smaller key = better rank. The run start
    # holds the class's first sample (positions sort last in the key).
    if tie_rule == "canonical_ascending":
        rank_key = (width - counts) * (pad + 1) + classes
    else:
        rank_key = (width - counts) * width + positions
    never = np.iinfo(np.int64).max
    rank_key = np.where(start, rank_key, never)
    best_admissible = np.where(start & (bits == 1), rank_key, never).min(axis=1)
    better = np.count_nonzero(rank_key < best_admissible[:, None], axis=1)
    scores = np.where(best_admissible < never, better + 1, INF).astype(np.float64)
    n_classes = np.count_nonzero(start, axis=1).astype(np.int64)
    mode_at = rank_key.argmin(axis=1)
    mode_codes = np.where(n_classes > 0, classes[np.arange(n), mode_at], -1)
    return RankScores(scores=scores, n_classes=n_classes, mode_codes=mode_codes)
