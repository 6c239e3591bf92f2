"""Caption metrics: BLEU-1..4, METEOR, ROUGE-L and CIDEr with pycocoevalcap, and diversity.

Texts are tokenized with :func:`modeling.captioning.vocab.tokenize` and joined by spaces before
scoring (the coco-caption PTB tokenizer would start Java for every call; our tokens are already
lower-cased and free of punctuation). METEOR runs the METEOR 1.5 jar and needs Java; where Java is
absent it is left out and ``skipped`` says why. SPICE is always left out: it downloads Stanford
CoreNLP models at run time, and these machines download nothing.
"""
from __future__ import annotations

import shutil
from collections import Counter

from .vocab import tokenize

SPICE_SKIPPED = "SPICE left out: it downloads Stanford CoreNLP models at run time"


def _prepare(references: dict, candidates: dict) -> tuple[dict, dict]:
    """{id: [ref texts]} and {id: text} -> pycocoevalcap's gts/res with tokenized, space-joined texts."""
    missing = sorted(set(candidates) ^ set(references), key=str)
    if missing:
        raise ValueError(f"references and candidates must cover the same ids (differ on {missing[:5]})")
    if not candidates:
        raise ValueError("nothing to score: no candidates")
    gts, res = {}, {}
    for key in candidates:
        refs = references[key]
        if isinstance(refs, str):
            refs = [refs]
        if not refs:
            raise ValueError(f"id {key!r} has no reference caption")
        gts[key] = [" ".join(tokenize(r)) for r in refs]
        res[key] = [" ".join(tokenize(candidates[key]))]
    return gts, res


def _meteor_scorer():
    from pycocoevalcap.meteor.meteor import Meteor

    class ClosingMeteor(Meteor):
        closed = False

        def close(self):
            if self.closed:
                return
            self.closed = True
            with self.lock:
                try:
                    self.meteor_p.stdin.close()
                except OSError:
                    pass
                self.meteor_p.kill()
                self.meteor_p.wait()

        def __del__(self):
            self.close()

    return ClosingMeteor()


def caption_metrics(references: dict, candidates: dict, *, meteor: bool = True, per_image: bool = False) -> dict:
    """Corpus scores {"BLEU-1".."BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "skipped": [...]} as pycocoevalcap
    computes them. ``references``: {id: [texts]}, ``candidates``: {id: text}. With ``per_image`` also
    {"per_image": {"CIDEr": [...], "ROUGE-L": [...], "bleu_counts": [[...]]}} in the candidates' order (what
    captioning.bootstrap resamples)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts, res = _prepare(references, candidates)
    out: dict = {}
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    for n, value in enumerate(bleu, start=1):
        out[f"BLEU-{n}"] = float(value)
    skipped = [SPICE_SKIPPED]
    if meteor and shutil.which("java"):
        scorer = _meteor_scorer()
        try:
            out["METEOR"] = float(scorer.compute_score(gts, res)[0])
        finally:
            scorer.close()
    elif meteor:
        skipped.append("METEOR left out: no Java on this machine")
    else:
        skipped.append("METEOR left out by the config")
    rouge, rouge_each = Rouge().compute_score(gts, res)
    cider, cider_each = Cider().compute_score(gts, res)
    out["ROUGE-L"], out["CIDEr"] = float(rouge), float(cider)
    out["skipped"] = skipped
    if per_image:
        out["per_image"] = {"CIDEr": [float(v) for v in cider_each], "ROUGE-L": [float(v) for v in rouge_each],
                            "bleu_counts": bleu_counts(gts, res)}
    return out


def bleu_counts(gts: dict, res: dict, n: int = 4) -> list[list[float]]:
    """Per image [testlen, reflen, guess_1..n, correct_1..n] as pycocoevalcap's BleuScorer counts them (the
    reference length closest to the candidate's), so that corpus BLEU can be recomputed on resampled images."""
    from pycocoevalcap.bleu.bleu_scorer import cook_refs, cook_test

    rows = []
    for key in res:
        cooked = cook_test(res[key][0], cook_refs(gts[key], n=n), eff="closest", n=n)
        rows.append([cooked["testlen"], cooked["reflen"], *cooked["guess"][:n], *cooked["correct"][:n]])
    return rows


def diversity(captions: list[str], max_n: int = 4, positions: int = 15) -> dict:
    """How varied generated captions are (seed 000, Section 6.3.2):

    - ``vocabulary``: distinct words used over all captions;
    - ``unique_captions``: distinct captions / captions;
    - ``distinct_n``: {n: distinct n-grams / n-grams} and ``ngrams``: {n: distinct n-gram count};
    - ``unique_per_position``: [distinct words at position p] for p = 0 .. positions-1 (a caption
      shorter than p+1 tokens adds nothing there)."""
    toks = [tokenize(c) for c in captions]
    words = {w for t in toks for w in t}
    out = {"captions": len(captions), "vocabulary": len(words),
           "unique_captions": (len({tuple(t) for t in toks}) / len(toks)) if toks else 0.0,
           "ngrams": {}, "distinct_n": {}, "unique_per_position": []}
    for n in range(1, max_n + 1):
        grams = Counter(tuple(t[i:i + n]) for t in toks for i in range(len(t) - n + 1))
        total = sum(grams.values())
        out["ngrams"][str(n)] = len(grams)
        out["distinct_n"][str(n)] = (len(grams) / total) if total else 0.0
    for p in range(positions):
        out["unique_per_position"].append(len({t[p] for t in toks if len(t) > p}))
    return out
