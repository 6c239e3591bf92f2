"""Splits by image, deterministic from a seed.

Every image gets a key: the first 8 bytes of sha256("<seed>:<image sha256>"), so the same image
with the same seed always gets the same key, whichever collection or position it comes from, and
copies of one image (same bytes) always land in the same split. Images are then taken in key
order and the split quotas are filled exactly: the first round(n * test) go to test, the next
round(n * val) to val, the rest to train. With ``test_human_verified`` only images holding at least
one human-verified item may fill the test quota (the Conceptual Captions test split holds only 2+
GOOD captions); the test split comes out smaller when there are too few of them.
"""
from __future__ import annotations

import hashlib
from array import array

SPLITS = ("train", "val", "test")
DEFAULT_RATIOS = {"train": 0.8, "val": 0.1, "test": 0.1}


def split_key(seed: int, image_sha256: str | None, image_id: int | None = None) -> int:
    """A 63-bit key from the seed and the image's bytes hash (its id when it has no hash)."""
    ident = image_sha256 or f"id:{image_id}"
    digest = hashlib.sha256(f"{seed}:{ident}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def quotas(n_images: int, ratios: dict) -> dict[str, int]:
    """Image counts per split: round() for test and val, the rest to train."""
    test = min(n_images, int(round(n_images * float(ratios.get("test", 0)))))
    val = min(n_images - test, int(round(n_images * float(ratios.get("val", 0)))))
    return {"train": n_images - test - val, "val": val, "test": test}


class SplitPlan:
    """Collects (key, eligible-for-test, payload) per image in compact arrays, then assigns splits.

    ``payload`` is an integer the caller uses to find the image again (freeze uses the image's
    first position; its items are contiguous). 24 bytes per image, so a million images fit in
    ~24 MB.
    """

    def __init__(self):
        self.keys = array("q")
        self.payloads = array("q")
        self.eligible = bytearray()

    def add(self, key: int, payload: int, eligible: bool) -> None:
        self.keys.append(key)
        self.payloads.append(payload)
        self.eligible.append(1 if eligible else 0)

    def __len__(self):
        return len(self.keys)

    def assign(self, ratios: dict, test_human_verified: bool = False) -> dict[int, str]:
        """{payload: split} for the images that do not go to train (train is the default).
        ``test_human_verified``: only eligible images fill the test quota (the freeze also restricts
        it when model captions are included: an image needs a caption that is not a model's)."""
        n = len(self.keys)
        want = quotas(n, ratios)
        import numpy as np

        keys = np.frombuffer(self.keys, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
        payloads = np.frombuffer(self.payloads, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
        order = np.lexsort((payloads, keys)).tolist()
        out: dict[int, str] = {}
        test = val = 0
        for i in order:
            if test < want["test"] and (not test_human_verified or self.eligible[i]):
                out[self.payloads[i]] = "test"
                test += 1
            elif val < want["val"]:
                out[self.payloads[i]] = "val"
                val += 1
        return out


__all__ = ["SPLITS", "DEFAULT_RATIOS", "split_key", "quotas", "SplitPlan"]
