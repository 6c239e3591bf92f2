"""The captioner's data, split by split: caption tokens, references per image, and the image side in one of three
forms, whichever the run's encoder needs:

- ``images``: uint8 [n_images, 3, S, S], decoded once (the small CNN trained from scratch);
- ``pooled`` / ``grid``: a frozen pretrained encoder's features from the feature cache (no image decoded);
- ``files``: storage names, decoded through the encoder's processor every epoch (fine-tuning).

Every form shares ``img`` (the caption's image row), ``tokens``, ``fluency``, ``refs``, ``image_ids`` and ``sources``
(an image's raw source text, where its captions were transformed from one). Also here:
what makes a release too small to learn from, and what the test references are.
"""
from __future__ import annotations

import torch

from modeling.captioning import data as cdata
from modeling.captioning.vocab import SPECIALS

from .base import TrainingError


def caption_tensors(rows: list[dict], vocab, max_tokens: int) -> tuple[dict, list[str]]:
    """(the split without its image side, the split's image keys in row order of the image side)."""
    order = list(dict.fromkeys(r["image_key"] for r in rows))
    index = {key: i for i, key in enumerate(order)}
    tokens = torch.zeros(len(rows), max_tokens + 2, dtype=torch.long)
    for i, r in enumerate(rows):
        ids = vocab.encode(r["text"], max_tokens)
        tokens[i, :len(ids)] = torch.tensor(ids)
    refs: dict[int, list[str]] = {}
    image_ids: dict[int, int | None] = {}
    sources: dict[int, str] = {}
    for r in rows:
        refs.setdefault(index[r["image_key"]], []).append(r["text"])
        image_ids.setdefault(index[r["image_key"]], r["image_id"])
        if r.get("source"):
            sources.setdefault(index[r["image_key"]], r["source"])
    split = {"img": torch.tensor([index[r["image_key"]] for r in rows], dtype=torch.long), "tokens": tokens,
             "fluency": torch.tensor([1.0 if r["fluency"] is None else r["fluency"] for r in rows]),
             "refs": refs, "image_ids": [image_ids[i] for i in range(len(order))], "sources": sources}
    return split, order


def image_count(split: dict) -> int:
    return len(split["image_ids"])


def check_enough(train_rows: list[dict], vocab, config: dict) -> None:
    """Refuse a release too small to learn captions from (issue: a captioner trained on 11 captions said only
    <unk>): fewer captions than ``min_train_captions``, or fewer words than ``min_vocabulary``."""
    needed = int(config["min_train_captions"])
    if len(train_rows) < needed:
        raise TrainingError(f"Too few captions to train: the release's train split has {len(train_rows)} usable "
                            f"caption(s), at least {needed} are needed (config \"min_train_captions\").",
                            code="too_few_labels")
    if vocab is None:  # the captions are counted before the fluency scores and the vocabulary are made
        return
    words = len(vocab) - len(SPECIALS)
    wanted = int(config["min_vocabulary"])
    if words < wanted:
        raise TrainingError(f"Too few words to learn captions from: the train split's vocabulary has {words} "
                            f"word(s) seen at least {config['min_count']} time(s), at least {wanted} are needed "
                            "(config \"min_vocabulary\"; or lower \"min_count\").", code="too_few_labels")


def test_references(rows: list[dict]) -> dict:
    """References per image of the evaluation split, whether every one is human-verified, and how many a
    model generated (scoring a captioner against model captions flatters it)."""
    images = {r["image_key"] for r in rows}
    return {"per_image": round(len(rows) / len(images), 3) if images else 0.0,
            "human_verified": bool(rows) and all(r.get("human_verified") for r in rows),
            "model_generated": sum(1 for r in rows if r.get("model_generated"))}


def apply_missing(rows: dict, missing: list[str], present, config: dict, release, notes: list) -> dict:
    """Rows whose image is in ``present`` (a set or mapping of image keys); ``missing`` (storage names) fails the
    run unless ``missing_images`` is "skip", as for the small CNN (captioning.data.release_rows)."""
    if missing:
        listed = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        if config.get("missing_images", "fail") != "skip":
            raise TrainingError(f"{len(missing)} image(s) of release {release.name!r} are missing in storage: "
                                f"{listed}. Restore them, or set \"missing_images\": \"skip\" to train without "
                                "them.", code="missing_images")
        notes.append(f"skipped {len(missing)} missing image(s): {listed}")
    return {s: [r for r in rows[s] if r["image_key"] in present] for s in cdata.SPLITS}


def missing_files(rows: dict) -> tuple[list[str], set]:
    """(storage names that are not there, the image keys that are): the fine-tuning path's check before training."""
    from django.core.files.storage import default_storage

    names: dict[str, str] = {}
    for s in cdata.SPLITS:
        for r in rows[s]:
            names.setdefault(r["image_key"], r.get("image_file") or "")
    missing, present = [], set()
    for key, name in names.items():
        if name and default_storage.exists(name):
            present.add(key)
        else:
            missing.append(name or f"(image {key[:12]} has no file)")
    return sorted(missing), present


def inputs(split: dict, start: int, end: int, images_for=None):
    """The image side of images [start, end) of a split, in the form ``CaptionerTrainer.generate`` takes."""
    if "pooled" in split:
        return split["pooled"][start:end], split["grid"][start:end]
    if "files" in split:
        return images_for(split["files"][start:end])
    return split["images"][start:end]


GPU_RESIDENT_SHARE = 0.5  # a cached split moves to the GPU when it takes at most this share of its free memory


def on_gpu(split: dict, config: dict):
    """The cached split's tensors on the GPU (moved once, then reused every epoch), or None on the CPU, when
    ``gpu_resident_features`` is off, or when they would take more than half the GPU's free memory.

    Decoder steps on cached features take microseconds per caption: gathering each batch on the CPU and copying
    it over PCIe would leave the GPU waiting (issue 22 measured it 93% idle). Indexing on the GPU keeps it busy."""
    if config.get("device") == "cpu" or not config.get("gpu_resident_features", True) or not torch.cuda.is_available():
        return None
    cached = split.get("_gpu")
    if cached is not None:
        return cached
    names = ("pooled", "grid", "img", "tokens", "fluency")
    size = sum(split[n].element_size() * split[n].nelement() for n in names)
    free, _ = torch.cuda.mem_get_info()
    if size > GPU_RESIDENT_SHARE * free:
        return None
    split["_gpu"] = {n: split[n].to("cuda", non_blocking=True) for n in names}
    return split["_gpu"]


def batch_rows(split: dict, config: dict, generator, train: bool):
    """The caption rows of one epoch, in order (strategy mask and shuffle when training)."""
    from modeling.captioning import strategies

    chosen = torch.arange(int(split["tokens"].shape[0]))
    if train:
        chosen = chosen[strategies.keep_mask(split["fluency"], config.get("strategy", "all"), generator)]
        chosen = chosen[torch.randperm(len(chosen), generator=generator)]
    return chosen
