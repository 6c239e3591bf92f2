"""A captioner judged against trivial captioners on its own evaluation images (captioning.baselines): the most
frequent training caption, nearest-neighbour retrieval over the image features the model itself reads, and the
raw source text where the items have one; scored with the run's metrics. The verdict on the headline metric,
CIDEr: the model beats retrieval only when the 95% paired-bootstrap interval of its per-image CIDEr minus
retrieval's lies above zero (captioning.bootstrap). The model's own intervals come from the same bootstrap,
cut to the metric's range.
"""
from __future__ import annotations

import numpy as np
import torch

from modeling.captioning import baselines, bootstrap
from modeling.captioning import data as cdata
from modeling.captioning.metrics import caption_metrics
from modeling.metric_keys import clip_to_range

from . import captioner_data as cd

HEADLINE = "CIDEr"
SHOWN = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr")
FEATURE_CHUNK = 256


def split_features(model, split: dict, count: int, device, images_for) -> np.ndarray | None:
    """[count, D] pooled features of the split's first ``count`` images as the model's encoder gives them (the
    cached features of a frozen pretrained encoder, or the encoder run on the images); None when there are none."""
    if count == 0:
        return None
    out = []
    with torch.no_grad():
        for start in range(0, count, FEATURE_CHUNK):
            inputs = cd.inputs(split, start, min(count, start + FEATURE_CHUNK), images_for)
            if isinstance(inputs, (tuple, list)):
                pooled = inputs[0]
            else:
                pixels = cdata.to_float(inputs) if inputs.dtype == torch.uint8 else inputs.float()
                pooled, _ = model.features(pixels.to(device))
            if pooled is None:
                return None
            out.append(pooled.detach().float().reshape(pooled.shape[0], -1).cpu().numpy())
    return np.concatenate(out)


def _scored(references: dict, candidates: dict, meteor: bool) -> dict:
    found = caption_metrics(references, candidates, meteor=meteor, per_image=True)
    return {k: found[k] for k in SHOWN if k in found} | {"_per_image": found["per_image"]}


def intervals(per_image: dict, clip_per_image: list[float] | None = None) -> dict:
    """{metric: {"low", "high"}}: 95% bootstrap intervals over the evaluation images, cut to each metric's range."""
    out = {}
    for key, found in (("CIDEr", bootstrap.mean_interval(per_image["CIDEr"])),
                       ("ROUGE-L", bootstrap.mean_interval(per_image["ROUGE-L"])),
                       ("BLEU-4", bootstrap.bleu_interval(per_image["bleu_counts"])),
                       ("CLIP-S", bootstrap.mean_interval(clip_per_image) if clip_per_image else None)):
        if found is not None:
            low, high = clip_to_range(key, *found)
            out[key] = {"low": low, "high": high}
    return out


def retrieval_verdict(model_scores: list[float], retrieval: dict | None, skipped: str) -> dict:
    """Does the model beat retrieval on CIDEr, by a paired bootstrap interval that excludes zero?"""
    if retrieval is None:
        return {"beats_retrieval": None, "metric": HEADLINE, "text": f"not judged against retrieval: {skipped}"}
    model_value, base_value = float(np.mean(model_scores)), retrieval[HEADLINE]
    test = bootstrap.paired_difference(model_scores, retrieval["_per_image"][HEADLINE])
    low, high = clip_to_range(HEADLINE, test["low"], test["high"], difference=True)
    beats = low is not None and low > 0
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None else " (no interval: one image)"
    text = (f"CIDEr {model_value:.3f} against nearest-neighbour retrieval's {base_value:.3f}, difference "
            f"{test['diff']:+.3f}{interval} by a paired bootstrap over {test['n']} test image(s): "
            + ("beats retrieval" if beats else "does not beat retrieval"))
    return {"beats_retrieval": beats, "metric": HEADLINE, "model": round(model_value, 4),
            "retrieval": round(base_value, 4), "diff": round(test["diff"], 4), "low": low, "high": high,
            "images": test["n"], "text": text}


def judge(model, prepared, split: dict, candidates: dict, references: dict, model_per_image: dict, device,
          config: dict, images_for) -> dict:
    """{"caption_baselines", "retrieval_verdict", "per_image"} for a captioner's evaluation (see the module)."""
    meteor = bool(config.get("meteor", True))
    train = prepared.train
    train_images = cd.image_count(train)
    train_refs = [train["refs"].get(i, []) for i in range(train_images)]
    out: dict = {"notes": []}
    texts = [t for refs in train_refs for t in refs]
    frequent = baselines.most_frequent_caption(texts)
    if frequent:
        out["most_frequent"] = _scored(references, dict.fromkeys(candidates, frequent), meteor) | {"caption": frequent}
    k = baselines.neighbourhood(int(config.get("retrieval_k") or baselines.DEFAULT_K), train_images)
    train_features = query = None
    on_train = prepared.info.get("eval_split") == "train"
    if train_images >= 2 and not on_train:
        train_features = split_features(model, train, train_images, device, images_for)
        query = split_features(model, split, len(candidates), device, images_for)
    skipped = ("the release has no val/test images: scored on the train split, retrieval would find each image "
               "itself") if on_train else baselines.skip_reason(train_images, train_features, query)
    retrieval = None
    if skipped:
        out["notes"].append(f"retrieval left out: {skipped}")
    else:
        found = baselines.retrieval_captions(train_features, train_refs, query, k=k)
        retrieval = _scored(references, dict(zip(candidates, found)), meteor) | {"k": k}
        out["retrieval"] = retrieval
        out["notes"].append(f"retrieval: the consensus caption of the {k} nearest of "
                            f"{train_images} training images by cosine of {_feature_origin(prepared.info)}")
    sources = {i: split["sources"][i] for i in candidates if i in split.get("sources", {})}
    if sources:
        out["source_text"] = _scored({i: references[i] for i in sources}, sources, meteor) | {"images": len(sources)}
        if len(sources) < len(candidates):
            out["notes"].append(f"source text: on the {len(sources)} of {len(candidates)} test images that have one")
    verdict = retrieval_verdict(model_per_image[HEADLINE], retrieval, skipped)
    image_ids = [split["image_ids"][i] if split["image_ids"][i] is not None else f"#{i}" for i in candidates]
    per_image = {"image_ids": image_ids, HEADLINE: [round(v, 5) for v in model_per_image[HEADLINE]]}
    for base in ("most_frequent", "retrieval", "source_text"):
        out.get(base, {}).pop("_per_image", None)
    return {"caption_baselines": out, "retrieval_verdict": verdict, "per_image": per_image}


def _feature_origin(info: dict) -> str:
    encoder = info.get("encoder")
    if encoder:
        return f"the frozen {encoder.get('name')} features the model reads" if encoder.get("mode") == "frozen" \
            else f"the fine-tuned {encoder.get('name')} encoder's pooled features"
    return "the pooled features of the model's own small CNN"
