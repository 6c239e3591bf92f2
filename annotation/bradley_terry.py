"""Bradley-Terry strengths from pairwise comparisons, by Hunter's MM algorithm, with numpy only.

P(i beats j) = p_i / (p_i + p_j). The maximum-likelihood strengths satisfy, for every item, wins_i =
sum_j n_ij p_i / (p_i + p_j) (n_ij: comparisons of i and j); the MM update p_i <- W_i / sum_j n_ij /
(p_i + p_j) raises the likelihood at every step and converges to it (D. R. Hunter, "MM algorithms
for generalized Bradley-Terry models", Ann. Statist. 32(1), 2004).

Why not crowd-kit's ``BradleyTerry`` (1.4.x), which the platform used before: importing crowd-kit
brings scipy, scikit-learn and nltk (about 100 MiB), and the best-caption page ranks in the web
process, which must stay small; evalica, the maintained alternative, brings pandas and scipy.
This needs numpy alone. It is also the maximum-likelihood estimate, which crowd-kit's is not: its
loop keeps the previous estimate as a reference to the array it then updates in place, so the
change it measures is 0 from the second iteration on and it stops after two MM steps whatever
``n_iter`` says. On small sets that matters little (400 sets of 40 comparisons among 5 planted
strengths: the planted best found 77.8% of the time here, 77.5% by crowd-kit; Kendall tau 0.729
against 0.725), and tests/annotation/test_bradley_terry.py checks the optimality conditions.

An item that won every comparison (or lost every one) has no finite maximum-likelihood strength.
``prior`` adds that many virtual comparisons to each compared pair, split evenly between its two
items (a ridge towards equal strength on the observed edges only: items never compared stay
unlinked). The default, 0.1, is small enough to leave well-observed strengths where they are.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np


def fit(comparisons: Iterable[tuple[Hashable, Hashable, Hashable]], *, prior: float = 0.1,
        max_iter: int = 10_000, tol: float = 1e-10) -> dict:
    """``comparisons``: (left, right, winner) with the winner one of the two. Returns {item:
    strength}, the strengths positive and summing to 1 over each connected group of items
    (so that a group's strengths are the probabilities of each of its items being chosen)."""
    rows = [(a, b, w) for a, b, w in comparisons if a != b]
    for a, b, w in rows:
        if w != a and w != b:
            raise ValueError(f"the winner {w!r} of a comparison is neither {a!r} nor {b!r}")
    items = sorted({x for a, b, _w in rows for x in (a, b)}, key=repr)
    if not items:
        return {}
    index = {item: i for i, item in enumerate(items)}
    n = len(items)
    # One row per compared pair (i < j): wins of i over j and of j over i, plus the prior.
    pair_wins: dict[tuple[int, int], list[float]] = {}
    for a, b, w in rows:
        i, j = index[a], index[b]
        key, first = ((i, j), w == a) if i < j else ((j, i), w == b)
        counts = pair_wins.setdefault(key, [prior / 2.0, prior / 2.0])
        counts[0 if first else 1] += 1
    edges = np.array(list(pair_wins), dtype=np.int64).reshape(-1, 2)
    counts = np.array(list(pair_wins.values()), dtype=float).reshape(-1, 2)
    left, right = edges[:, 0], edges[:, 1]
    games = counts.sum(axis=1)  # n_ij
    won = np.bincount(left, counts[:, 0], n) + np.bincount(right, counts[:, 1], n)
    group = _components(n, left, right)
    p = np.ones(n)
    for _ in range(max_iter):
        share = games / (p[left] + p[right])
        denominator = np.bincount(left, share, n) + np.bincount(right, share, n)
        new = won / denominator
        new /= np.bincount(group, new)[group]  # each connected group sums to 1
        change = np.abs(new - p).sum()
        p = new
        if change < tol:
            break
    return {item: float(p[index[item]]) for item in items}


def _components(n: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The connected group of each item (union-find over the compared pairs), as group numbers."""
    parent = list(range(n))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(left.tolist(), right.tolist()):
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    roots = [root(x) for x in range(n)]
    _, group = np.unique(roots, return_inverse=True)
    return group


def log_likelihood(comparisons: Iterable[tuple[Hashable, Hashable, Hashable]], strengths: dict) -> float:
    """Log-likelihood of the comparisons under ``strengths`` (for checks and tests)."""
    total = 0.0
    for a, b, w in comparisons:
        total += np.log(strengths[w] / (strengths[a] + strengths[b]))
    return float(total)
