"""Near-duplicate grouping of perceptual hashes over a whole run, in compact memory.

The rule (``near_duplicate``, seed 002's "near-duplicate images"): going through the images by id, an image
within ``max_distance`` bits of an image already kept is dropped as the near duplicate of the closest one
(the lowest id on ties); otherwise it is kept. ``HashIndex`` applies it one image at a time with Python
buckets, about 130 bytes per kept image and band. ``NearDuplicateGroups`` gives the same decisions from
packed arrays: 8 bytes of id and 8 bytes per 64 bits of hash per image while the run streams past, a few
such arrays while it solves, so a run of millions of images needs tens of megabytes, not gigabytes.

How it solves:

1. Identical hashes are collapsed first: only the lowest id of each hash (its representative) can be kept,
   since every later copy is within 0 bits of it or of whatever dropped it.
2. Candidate pairs of representatives come from bands (pigeonhole: two hashes at most d bits apart agree on
   at least one of d + 1 bands of bits). In each band the representatives are sorted by the band's bits;
   pairs sharing the bits are compared at offsets 1, 2, ... along the sorted order, vectorised, and only the
   pairs within ``max_distance`` bits are kept (few: near duplicates are rare in a collection).
3. The greedy rule runs over those pairs in id order; a copy of a dropped representative takes the closest
   kept image with a lower id among its representative's neighbours.
"""
from __future__ import annotations

from array import array

import numpy as np

WORD = 64
MASK = (1 << WORD) - 1


class HashIndex:
    """Finds a stored hash within ``max_distance`` bits of a query. By the pigeonhole principle two
    hashes that differ in at most d bits agree exactly on at least one of d + 1 bands, so only
    hashes sharing a band are compared: near-linear over tens of thousands of images."""

    def __init__(self, bits: int, max_distance: int):
        self.max_distance = max_distance
        if max_distance >= bits:  # everything is within reach: one bucket, compare all
            self.bands = [(0, 0)]
        else:
            self.bands = [(lo, (1 << (hi - lo)) - 1) for lo, hi in band_edges(bits, max_distance)]
        self.buckets: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def _keys(self, value: int):
        return [(b, (value >> lo) & mask) for b, (lo, mask) in enumerate(self.bands)]

    def add(self, key: int, value: int) -> None:
        for k in self._keys(value):
            self.buckets.setdefault(k, []).append((key, value))

    def nearest(self, value: int) -> tuple[int, int] | None:
        """(key, distance) of the closest stored hash within max_distance (lowest key on ties)."""
        best = None
        for k in self._keys(value):
            for key, other in self.buckets.get(k, ()):
                distance = (value ^ other).bit_count()
                if distance <= self.max_distance and (best is None or (distance, key) < (best[1], best[0])):
                    best = (key, distance)
        return best


def band_edges(bits: int, max_distance: int) -> list[tuple[int, int]]:
    """The d + 1 bands of bits, as (low, high) bit positions."""
    edges = [round(i * bits / (max_distance + 1)) for i in range(max_distance + 2)]
    return list(zip(edges, edges[1:]))


class NearDuplicateGroups:
    """Collects (image id, hash) pairs, then decides them all at once (``solve``); afterwards ``nearest(id)``
    is (kept image id, distance) for a dropped image and None for a kept one."""

    def __init__(self, bits: int, max_distance: int):
        self.bits, self.max_distance = bits, max_distance
        self.words = (bits + WORD - 1) // WORD
        self.digits = (bits + 3) // 4
        self._ids = array("q")
        self._hash = [array("Q") for _ in range(self.words)]
        self.dropped: dict[int, tuple[int, int]] = {}
        self._sorted_ids: np.ndarray | None = None
        self._sorted_hash: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, image_id: int, value: int) -> None:
        self._ids.append(image_id)
        for w in range(self.words):
            self._hash[w].append((value >> (WORD * w)) & MASK)

    # --- reading back --------------------------------------------------------------------------------

    def _position(self, image_id: int) -> int | None:
        ids = self._sorted_ids
        at = int(np.searchsorted(ids, image_id))
        return at if at < len(ids) and ids[at] == image_id else None

    def __contains__(self, image_id: int) -> bool:
        return self._position(image_id) is not None

    def hex_of(self, image_id: int) -> str:
        """The image's hash as imagehash writes it (zero-padded hex digits)."""
        row = self._sorted_hash[self._position(image_id)]
        value = sum(int(word) << (WORD * w) for w, word in enumerate(row))
        return format(value, f"0{self.digits}x")

    def nearest(self, image_id: int) -> tuple[int, int] | None:
        return self.dropped.get(image_id)

    # --- solving -------------------------------------------------------------------------------------

    def solve(self) -> None:
        ids, first = np.unique(np.frombuffer(self._ids, dtype=np.int64) if len(self._ids) else
                               np.zeros(0, np.int64), return_index=True)  # by id; an id given twice counts once
        self._ids = array("q")
        hashes = np.empty((len(ids), self.words), dtype=np.uint64)
        for w in range(self.words):
            hashes[:, w] = np.frombuffer(self._hash[w], dtype=np.uint64)[first] if len(first) else 0
            self._hash[w] = array("Q")  # each packed word goes once copied
        del first
        self._sorted_ids, self._sorted_hash = ids, hashes
        self.dropped = {}
        if len(ids) < 2:
            return
        if self.max_distance >= self.bits:  # every image is within reach of the first: only it is kept
            distance = _popcount(hashes ^ hashes[0])
            self.dropped = {int(i): (int(ids[0]), int(d)) for i, d in zip(ids[1:], distance[1:])}
            return
        # 1. Identical hashes: the representative of each is its lowest id (rows are in id order).
        if self.words == 1:
            _, rep_rows, copy_of = np.unique(hashes[:, 0], return_index=True, return_inverse=True)
        else:
            _, rep_rows, copy_of = np.unique(hashes, axis=0, return_index=True, return_inverse=True)
        by_id = np.argsort(rep_rows, kind="stable")  # representatives in id order: index order = id order
        reps = rep_rows[by_id]
        del rep_rows
        rep_index = np.empty(len(reps), dtype=np.int64)
        rep_index[by_id] = np.arange(len(reps))
        del by_id
        rep_of_row = rep_index[copy_of.reshape(-1)]  # each row's representative, as an index into ``reps``
        del rep_index, copy_of
        rep_hashes = hashes[reps]
        # 2. and 3.: pairs within reach among the representatives, then the greedy rule in id order.
        first_i, later_j, distance = self._pairs(rep_hashes) if self.max_distance else (
            np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        dropped_rep = _greedy(first_i, later_j, distance)
        rep_ids = ids[reps]
        for j, (i, d) in dropped_rep.items():
            self.dropped[int(rep_ids[j])] = (int(rep_ids[i]), d)
        self._drop_copies(ids, rows_rep=rep_of_row, reps=reps, rep_ids=rep_ids, dropped_rep=dropped_rep,
                          pairs=(first_i, later_j, distance))

    def _drop_copies(self, ids, *, rows_rep, reps, rep_ids, dropped_rep, pairs) -> None:
        """Every row that is not its hash's representative is dropped: as a copy of a kept representative
        (0 bits), or as the near duplicate of the closest kept image with a lower id than its own."""
        copies = np.flatnonzero(np.arange(len(ids)) != reps[rows_rep])
        if not len(copies):
            return
        first_i, later_j, distance = pairs
        wanted = {int(rows_rep[row]) for row in copies if int(rows_rep[row]) in dropped_rep}
        neighbours: dict[int, list[tuple[int, int]]] = {r: [] for r in wanted}
        for i, j, d in zip(first_i.tolist(), later_j.tolist(), distance.tolist()):
            for rep, other in ((i, j), (j, i)):
                if rep in neighbours and other not in dropped_rep:
                    neighbours[rep].append((d, int(rep_ids[other])))
        for near in neighbours.values():
            near.sort()
        for row in copies.tolist():
            rep, image_id = int(rows_rep[row]), int(ids[row])
            if rep not in dropped_rep:
                self.dropped[image_id] = (int(rep_ids[rep]), 0)
            else:  # the representative's dropper has a lower id and is kept: there is always one
                self.dropped[image_id] = next((other, d) for d, other in neighbours[rep] if other < image_id)

    def _pairs(self, rep_hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(i, j, distance) with i < j for the representatives within max_distance bits, each pair once."""
        n = len(rep_hashes)
        found_i, found_j, found_d = [], [], []
        for lo, hi in band_edges(self.bits, self.max_distance):
            key = _bits(rep_hashes, lo, hi)
            order = np.lexsort((np.arange(n), key))
            key = key[order]
            start = np.flatnonzero(key[:-1] == key[1:])  # positions whose next one shares the band
            offset = 1
            while len(start):
                a, b = order[start], order[start + offset]
                d = _popcount(rep_hashes[a] ^ rep_hashes[b])
                near = d <= self.max_distance
                found_i.append(np.minimum(a, b)[near])
                found_j.append(np.maximum(a, b)[near])
                found_d.append(d[near])
                offset += 1
                start = start[start + offset < n]
                start = start[key[start] == key[start + offset]]
        if not found_i:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        i, j, d = np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_d)
        _, once = np.unique(i * n + j, return_index=True)  # a pair found in several bands
        return i[once], j[once], d[once]


def _bits(hashes: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Bits lo..hi (at most 63 of them) of each hash, as unsigned integers."""
    word, offset = divmod(lo, WORD)
    value = hashes[:, word] >> np.uint64(offset)
    if offset and offset + (hi - lo) > WORD:
        value = value | (hashes[:, word + 1] << np.uint64(WORD - offset))
    width = hi - lo
    return value & np.uint64((1 << width) - 1) if width < WORD else value


def _popcount(words: np.ndarray) -> np.ndarray:
    """Set bits per row (over every word of the row)."""
    counts = np.bitwise_count(words).astype(np.int64)
    return counts.sum(axis=-1) if counts.ndim > 1 else counts


def _greedy(first_i: np.ndarray, later_j: np.ndarray, distance: np.ndarray) -> dict[int, tuple[int, int]]:
    """{j: (i, distance)} for the representatives the rule drops: going by id, j is dropped as the near
    duplicate of the closest kept i < j (the lowest on ties). Only representatives in some pair can be."""
    dropped: dict[int, tuple[int, int]] = {}
    order = np.lexsort((first_i, distance, later_j))
    current = -1
    for i, j, d in zip(first_i[order].tolist(), later_j[order].tolist(), distance[order].tolist()):
        if j == current:
            continue  # j is decided: its closest kept candidate came first
        if i not in dropped:
            dropped[j] = (i, d)
            current = j
    return dropped
