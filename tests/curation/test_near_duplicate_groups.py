"""Near duplicates over a whole run from packed arrays (``phash_groups.NearDuplicateGroups``): the same decisions as
the rule applied one image at a time (``HashIndex``, itself checked against a pairwise comparison in
test_image_filters.py), on hash sets shaped like a web collection's: mostly distinct photos, resized or re-encoded
copies a few bits away, byte-identical re-uploads (the same hash many times, the placeholder "image not available"
among them), copies of copies; and a memory cost per image of bytes, not the kilobyte of a row and index entry."""
import random
import tracemalloc

import pytest

from curation.pipeline.phash_groups import HashIndex, NearDuplicateGroups


def _reference(hashes: dict[int, int], bits: int, max_distance: int) -> dict[int, tuple[int, int]]:
    """{dropped id: (kept id, distance)} by the rule, one image at a time in id order."""
    index, dropped = HashIndex(bits, max_distance), {}
    for image_id in sorted(hashes):
        found = index.nearest(hashes[image_id])
        if found:
            dropped[image_id] = found
        else:
            index.add(image_id, hashes[image_id])
    return dropped


def _web_collection(rng: random.Random, n: int, bits: int) -> dict[int, int]:
    """``n`` image ids (not contiguous, not in insertion order) with hashes: a third near copies of an earlier
    image (0 to 9 bits flipped, so some within reach and some not), a tenth byte-identical re-uploads, every
    fiftieth the same placeholder hash."""
    placeholder = rng.getrandbits(bits)
    values: list[int] = []
    for k in range(n):
        roll = rng.random()
        if k and roll < 0.33:
            flips = rng.sample(range(bits), rng.randrange(0, 10))
            values.append(rng.choice(values) ^ sum(1 << b for b in flips))
        elif k and roll < 0.43:
            values.append(rng.choice(values))
        elif roll < 0.45:
            values.append(placeholder)
        else:
            values.append(rng.getrandbits(bits))
    ids = rng.sample(range(10, 40 * n), n)
    return dict(zip(ids, values))


@pytest.mark.parametrize("bits", [64, 121])  # hash_size 8 (the default, Image.phash's cache) and 11 (two words)
@pytest.mark.parametrize("max_distance", [0, 1, 4, 8, 121])
def test_the_packed_solver_decides_exactly_as_the_rule_image_by_image(bits, max_distance):
    rng = random.Random(bits * 1000 + max_distance)
    hashes = _web_collection(rng, 3000, bits)
    groups = NearDuplicateGroups(bits, max_distance)
    for image_id, value in rng.sample(sorted(hashes.items()), len(hashes)):  # the order rows arrive in is free
        groups.add(image_id, value)
    groups.solve()
    expected = _reference(hashes, bits, max_distance)
    got = {i: groups.nearest(i) for i in hashes if groups.nearest(i)}
    assert got == expected
    # The drops are real: at the default distance a third of the collection or so goes, never everything.
    assert 0 < len(got) < len(hashes)
    for image_id, value in hashes.items():
        assert groups.hex_of(image_id) == format(value, f"0{(bits + 3) // 4}x")


def test_an_image_given_twice_counts_once_and_tiny_runs_keep_everything():
    groups = NearDuplicateGroups(64, 4)
    groups.add(7, 0xF0F0)
    groups.add(7, 0xF0F0)
    groups.solve()
    assert 7 in groups and groups.nearest(7) is None and 8 not in groups
    empty = NearDuplicateGroups(64, 4)
    empty.solve()
    assert 1 not in empty


def test_a_copy_of_a_dropped_image_goes_to_the_closest_kept_image_with_a_lower_id():
    """Image 30 is 4 bits from 10 (kept): dropped. Image 35 is 2 bits from 30 but 6 from 10: kept (30 was
    dropped). Image 40 is byte-identical to 30: its closest kept image with a lower id is 35, not 10."""
    base = 0x0123_4567_89AB_CDEF
    groups = NearDuplicateGroups(64, 4)
    groups.add(10, base)
    groups.add(30, base ^ 0b1111)
    groups.add(35, base ^ 0b1111 ^ (1 << 40) ^ (1 << 41))
    groups.add(40, base ^ 0b1111)
    groups.add(50, base)  # a re-upload of the kept 10
    groups.solve()
    assert groups.nearest(30) == (10, 4)
    assert groups.nearest(35) is None
    assert groups.nearest(40) == (35, 2)
    assert groups.nearest(50) == (10, 0)
    assert groups.nearest(10) is None


def _peak(n: int) -> int:
    rng = random.Random(n)
    values = [rng.getrandbits(64) for _ in range(n)]
    tracemalloc.start()
    try:
        groups = NearDuplicateGroups(64, 4)
        for image_id, value in enumerate(values):
            groups.add(image_id + 1, value)
        groups.solve()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def test_memory_per_image_is_bytes_not_a_row_and_index_entry():
    """The whole-run list of rows and the Python index it replaces took about a kilobyte per image (a row dict,
    five bucket entries); the packed arrays and the solver's working copies take well under 150 bytes."""
    small, large = _peak(20_000), _peak(200_000)
    per_image = (large - small) / 180_000
    print(f"near-duplicate solver: {small / 1e6:.1f} MB at 20,000 images, {large / 1e6:.1f} MB at 200,000: "
          f"{per_image:.0f} bytes per image")
    assert per_image < 150, per_image
