"""CLIPScore and RefCLIPScore (Hessel et al. 2021, "CLIPScore: A Reference-free Evaluation Metric for
Image Captioning"), beside BLEU/METEOR/ROUGE-L/CIDEr when a CLIP-family model is registered in the pack.

    CLIP-S(c, v)       = w * max(cos(v, c), 0), w = 2.5
    RefCLIP-S(c, R, v) = harmonic mean of CLIP-S(c, v) and max(max over r in R of cos(c, r), 0)

Corpus scores are the means over the images. Image vectors come from the embeddings store (computed
once, stored, and reused by search and the filters); texts go through the encoder directly, since
generated candidates are not worth caching. The paper used ViT-B/32; another CLIP gives other numbers,
so the result names the model and scores from two models must not be compared. For the same reason a CLIP-S is
shown beside its reference value, the mean CLIP-S of the human references of the same images by the same model:
a CLIP with random or weak weights gives the references a CLIP-S as meaningless as the candidates'.
"""
from __future__ import annotations

import numpy as np

W = 2.5


def clip_scores(model, image_ids, candidates: dict[int, str], references: dict[int, list[str]] | None = None, *,
                images: dict | None = None, per_image: bool = False) -> dict:
    """{"CLIP-S": mean, "RefCLIP-S": mean (with references), "references_CLIP-S": the human references' mean
    CLIP-S (with references), "clip_model": key, "n": images scored,
    "skipped": images without a vector or a candidate}; with ``per_image`` also {"per_image": {id: {...}}}.

    ``model``: a registered CLIP-family PretrainedModel, or None for the one the pack picks
    (``find_model(kind="clip")``). ``image_ids`` are Image pks (vectors through the store) unless
    ``images`` maps them to PIL images. With no CLIP model registered: {"note": why} and no scores."""
    import pack
    from pack.embeddings.store import image_vectors

    model = model or pack.find_model(kind="clip")
    if model is None:
        return {"note": "CLIPScore not computed: no CLIP-family model is registered in the model pack."}
    ids = [i for i in dict.fromkeys(image_ids) if (candidates.get(i) or "").strip()]
    encoder = pack.load(model)
    if images is not None:
        given = [i for i in ids if i in images]
        vectors = dict(zip(given, encoder.encode_images([images[i] for i in given]))) if given else {}
    else:
        vectors, _ = image_vectors(model, ids, encoder=encoder)
    ids = [i for i in ids if i in vectors]
    skipped = len(list(dict.fromkeys(image_ids))) - len(ids)
    if not ids:
        return {"note": "CLIPScore not computed: no image with both a vector and a caption.",
                "clip_model": model.key, "n": 0, "skipped": skipped}
    scores = _score(encoder, ids, vectors, candidates, references or {})
    out = {"CLIP-S": float(np.mean([s["clip_s"] for s in scores.values()])), "clip_model": model.key,
           "n": len(ids), "skipped": skipped}
    with_refs = [s["refclip_s"] for s in scores.values() if s.get("refclip_s") is not None]
    if with_refs:
        out["RefCLIP-S"] = float(np.mean(with_refs))
        out["references_CLIP-S"] = float(np.mean([s["references_clip_s"] for s in scores.values()
                                                  if "references_clip_s" in s]))
    if per_image:
        out["per_image"] = scores
    return out


def _score(encoder, ids, vectors, candidates, references) -> dict[int, dict]:
    image = np.stack([vectors[i] for i in ids]).astype(np.float32)  # [N, D], L2-normalised
    cand = encoder.encode_texts([candidates[i] for i in ids])  # [N, D]
    clip_s = W * np.maximum(np.sum(image * cand, axis=1), 0.0)
    refs = [[r for r in references.get(i, []) if (r or "").strip()] for i in ids]
    flat = [r for rs in refs for r in rs]
    ref_vectors = encoder.encode_texts(flat) if flat else np.zeros((0, image.shape[1]), np.float32)
    out, at = {}, 0
    for k, i in enumerate(ids):
        row = {"clip_s": float(clip_s[k])}
        if refs[k]:
            block = ref_vectors[at:at + len(refs[k])]  # [R, D]
            at += len(refs[k])
            ref_s = max(float(np.max(block @ cand[k])), 0.0)
            row["ref_s"] = ref_s
            row["refclip_s"] = harmonic_mean(row["clip_s"], ref_s)
            row["references_clip_s"] = float(W * np.mean(np.maximum(block @ image[k], 0.0)))
        out[i] = row
    return out


def harmonic_mean(a: float, b: float) -> float:
    return 2 * a * b / (a + b) if a > 0 and b > 0 else 0.0


def clip_note(model_key: str, references_clip_s: float | None) -> str:
    """What a CLIP-S figure can and cannot be read as, naming the model that gave it."""
    reference = (f"the human references of the same images score {references_clip_s:.3f} with it"
                 if references_clip_s is not None else "no human references to give a reference value")
    return (f"CLIP-S and RefCLIP-S by {model_key}; {reference}. Hessel et al. 2021 used CLIP ViT-B/32: another "
            "model gives other numbers, so compare CLIP-S only with the reference value and runs scored by the "
            "same model.")
