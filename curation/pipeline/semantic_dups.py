"""Semantic duplicates: captions that say the same thing in other words (text embeddings from the packaged
sentence encoder, or another registered one), and images that show the same thing (image embeddings from the
registered CLIP-family model). Pairs at or above ``min_similarity`` (cosine) are candidates; for captions
each candidate is then checked for what the cosine cannot see, negation, numbers, swapped roles, different
words (``meaning``), and only the pairs judged the same meaning are joined into clusters (connected
components, so A~B and B~C make one cluster). Caption clusters wait for the curator's review by default
(every member kept, the others than the chosen one with the reason ``possible_duplicate``); with the action
"drop", or a calibrated ``drop_at``, the others are dropped with the reason ``semantic_duplicate``, as image
clusters always are.

Decision details (the cluster review page reads them): ``{"cluster": smallest member id, "size", "members":
at most 50 ids, "kept_id", "similarity": cosine to the kept member, "model": key}``; for captions also
``"pair"`` (the score and reasons of the member's pair with the kept one) and, on every caption with checked
candidates, ``"pairs"`` (at most MAX_PAIRS: the other caption, cosine, score, verdict, reasons, features), which
a same-meaning pairs campaign turns into tasks.

The pairs come from FAISS range search: exact (flat inner product) up to EXACT_LIMIT distinct vectors, an
inverted-file index above it (a duplicate pair almost always falls in the same or a probed cell). Measured on
this project's two shared cores (load average 4.5): 100,000 random 384-d vectors with 1,000 planted pairs in
35 s, every pair found; the exact search would take about 150 s (extrapolated from one block of 4,096).
Identical vectors (identical texts) are searched once.
"""
from __future__ import annotations

import math

import numpy as np

from . import meaning, model_steps
from .base import Decision, Filter, Item, drop, keep, not_applicable
from .registry import register

EXACT_LIMIT = 20_000
BLOCK = 4096  # queries per range search: bounds the memory of one block's results
MAX_MEMBERS = 50
MAX_PAIRS = 10  # checked candidate pairs kept in a caption's details (the review page, a pairs campaign)


def similar_pairs(vectors: np.ndarray, min_similarity: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, cosine) with i < j for the rows of L2-normalised ``vectors`` at or above ``min_similarity``."""
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = x.shape
    if n < 2:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0, np.float32)
    if n <= EXACT_LIMIT:
        index = faiss.IndexFlatIP(dim)
    else:
        nlist = int(4 * math.sqrt(n))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = 10  # coarse cells are enough: a duplicate pair sits in the same or a probed cell
        sample = np.random.default_rng(0).choice(n, size=min(n, 64 * nlist), replace=False)
        index.train(x[np.sort(sample)])
        index.nprobe = 8
    index.add(x)
    radius = float(min_similarity) - 1e-6  # FAISS keeps scores strictly above the radius
    found_i, found_j, found_s = [], [], []
    for start in range(0, n, BLOCK):
        lims, scores, ids = index.range_search(x[start:start + BLOCK], radius)
        queries = np.repeat(np.arange(start, start + len(lims) - 1), np.diff(lims).astype(np.int64))
        upper = ids > queries
        found_i.append(queries[upper])
        found_j.append(ids[upper])
        found_s.append(scores[upper])
    return np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_s)


def nearest(i: np.ndarray, j: np.ndarray, s: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs that are among the ``k`` most similar of either of their rows, so that the checks run on a
    bounded number of pairs however many captions share a topic."""
    if len(i) == 0:
        return i, j, s
    order = np.argsort(-s, kind="stable")
    ends = np.concatenate([i[order], j[order]])  # each pair twice, by its rank of similarity
    position = np.tile(np.arange(len(order)), 2)
    by_row = np.lexsort((position, ends))  # grouped by row, most similar first within a row
    counts = np.bincount(ends)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    rank = np.empty(len(ends), dtype=np.int64)
    rank[by_row] = np.arange(len(ends)) - starts
    near = (rank[:len(order)] < k) | (rank[len(order):] < k)
    chosen = order[near]
    return i[chosen], j[chosen], s[chosen]


def clusters(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """A cluster label per row: the connected components of the pairs' graph."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(i), dtype=np.int8), (i, j)), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def group(ids: list[int], vectors: np.ndarray, min_similarity: float) -> list[list[int]]:
    """Clusters of two or more of ``ids`` (one vector each, rows of ``vectors``). Identical vectors (the same
    text on many images, common in web alt-texts) are searched once and share their cluster."""
    distinct, inverse = np.unique(np.ascontiguousarray(vectors, dtype=np.float32), axis=0, return_inverse=True)
    i, j, _ = similar_pairs(distinct, min_similarity)
    labels = clusters(len(distinct), i, j)[inverse.reshape(-1)]
    members: dict[int, list[int]] = {}
    for row, label in enumerate(labels):
        members.setdefault(int(label), []).append(ids[row])
    return [sorted(m) for m in members.values() if len(m) > 1]


def cluster_decisions(groups: list[list[int]], vector_of, choose, model_key: str, kept_by: str) -> dict[int, Decision]:
    """Keep the chosen member of each cluster, drop the others as its semantic duplicates."""
    out = {}
    for members in groups:
        kept = choose(members)
        base = {"cluster": members[0], "size": len(members), "members": members[:MAX_MEMBERS], "kept_id": kept,
                "model": model_key, "kept_by": kept_by}
        for member in members:
            similarity = round(float(vector_of(member) @ vector_of(kept)), 4)
            if member == kept:
                out[member] = keep("cluster_kept", similarity=1.0, **base)
            else:
                out[member] = drop("semantic_duplicate", similarity, similarity=similarity, **base)
    return out


def alignment_scores(caption_ids: list[int]) -> dict[int, float]:
    """Each caption's latest alignment score (any run), where it has one."""
    from ..models import FilterDecision

    found = {}
    for start in range(0, len(caption_ids), 5000):
        rows = (FilterDecision.objects.filter(caption_id__in=caption_ids[start:start + 5000], filter_name="alignment",
                                              score__isnull=False).values_list("run_id", "caption_id", "score"))
        for _, caption_id, score in sorted(rows):
            found[caption_id] = score
    return found


class _SemanticDuplicates(Filter):
    run_level = True
    kind = "text"  # the model kind whose vectors are compared

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        value = self.params["min_similarity"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ValueError(f"{self.name}: min_similarity must be a cosine in (0, 1], not {value!r}")
        if self.params["keep"] not in self.keep_choices:
            raise ValueError(f"{self.name}: keep must be one of {', '.join(self.keep_choices)}")
        if not isinstance(self.params[self.model_param], str):
            raise ValueError(f"{self.name}: {self.model_param} must be a registered model's name, "
                             f"or '' for the default")

    def apply(self, items: list[Item]) -> list[Decision]:
        """This batch judged alone, as if it were the whole run (previews and tests)."""
        rows = [{"caption_id": it.caption_id, "image_id": it.image_id, "text": it.text} for it in items]
        found = self.decide_run(rows)
        key = "image_id" if self.target == "image" else "caption_id"
        return [found.get(getattr(it, key)) or not_applicable("no_vector") for it in items]

    def decide_run(self, rows: list[dict]) -> dict[int, Decision]:
        from pack import PackError

        key = "image_id" if self.target == "image" else "caption_id"
        ids = list(dict.fromkeys(row[key] for row in rows))
        name = self.params[self.model_param]
        model = model_steps.find(name, self.kind)
        if model is None:
            return {i: model_steps.no_model(name, self.kind) for i in ids}
        try:
            vectors, errors = self.vectors(model, rows)
        except PackError as exc:
            return {i: model_steps.unavailable(model, exc) for i in ids}
        out = {i: not_applicable("undecodable", model=model.key, error=errors[i]) for i in ids if i in errors}
        usable = [i for i in ids if i in vectors]
        if usable:
            groups = group(usable, np.stack([vectors[i] for i in usable]), float(self.params["min_similarity"]))
            out.update(cluster_decisions(groups, vectors.__getitem__, self.chooser(rows, groups), model.key,
                                         self.params["keep"]))
        for i in usable:
            out.setdefault(i, keep("distinct", model=model.key))
        return out


@register
class SemanticDuplicates(_SemanticDuplicates):
    name = "semantic_duplicates"
    version = 3  # 3: contradictions veto, rewording costs by the share of content left uncovered
    label = "Semantic duplicate captions"
    description = ("Finds captions that say the same thing in other words: candidate pairs by the sentence "
                   "encoder (the packaged all-MiniLM-L6-v2 by default) at or above min_similarity, then checks on "
                   "their parses that tell same words from same meaning: contradictions (negation, numbers, nouns "
                   "that trade places, a different word in the same place: antonyms, other things) veto, while "
                   "rewording only lowers the share of content the other caption covers; combined into a score; "
                   "pairs at or above threshold are grouped into clusters for the curator's review (nothing "
                   "dropped) unless action is drop, or a calibrated drop_at says the pair is sure. Runs over the whole run.")
    model_kind = "text"
    model_param = "text_model"
    keep_choices = ("best_scored", "longest", "first")
    action_choices = ("review", "drop")
    needs = frozenset()  # parsed inside decide_run, candidate pairs only
    defaults = {
        # Cosine (MiniLM) for a pair to be a candidate: paraphrases written for this project's development
        # pairs sat at 0.62-0.98, the same words with another meaning at 0.80-0.99; the checks decide.
        "min_similarity": 0.6,
        "max_candidates": 10,  # the most similar candidates per caption that are checked
        "checks": True,  # False: the cosine alone (a pair at min_similarity is a duplicate), as in version 1
        "synonym": 0.8,  # two different words count as near synonyms at this cosine of their encoder vectors
        "threshold": meaning.DEFAULT_THRESHOLD,  # a pair is the same meaning at this score
        "weights": {},  # the score's weights, {} for meaning.DEFAULT_WEIGHTS; fitted from a pairs campaign
        "action": "review",  # "review": clusters kept for the curator; "drop": the others of a cluster dropped
        "drop_at": None,  # with "review": drop a member whose pair score with the kept one is at least this
        "keep": "best_scored",  # "best_scored" (alignment score, then length), "longest" or "first" (lowest id)
        "text_model": "",  # a registered sentence encoder; "" = the packaged all-MiniLM-L6-v2
    }

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        p = self.params
        for key in ("synonym", "threshold"):
            if isinstance(p[key], bool) or not isinstance(p[key], (int, float)) or not 0 <= p[key] <= 1:
                raise ValueError(f"{self.name}: {key} must be a number in [0, 1], not {p[key]!r}")
        if p["drop_at"] is not None and (isinstance(p["drop_at"], bool) or not isinstance(p["drop_at"], (int, float))
                                         or not 0 <= p["drop_at"] <= 1):
            raise ValueError(f"{self.name}: drop_at must be a score in [0, 1] or null, not {p['drop_at']!r}")
        if p["action"] not in self.action_choices:
            raise ValueError(f"{self.name}: action must be one of {', '.join(self.action_choices)}")
        if not isinstance(p["checks"], bool):
            raise ValueError(f"{self.name}: checks must be true or false")
        if isinstance(p["max_candidates"], bool) or not isinstance(p["max_candidates"], int) or not 1 <= p["max_candidates"] <= 100:
            raise ValueError(f"{self.name}: max_candidates must be a whole number from 1 to 100")
        weights = p["weights"]
        if not isinstance(weights, dict) or any(k not in ("bias", *meaning.FEATURES) for k in weights) or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) for v in weights.values()):
            raise ValueError(f"{self.name}: weights must map some of bias, {', '.join(meaning.FEATURES)} to numbers")

    def scorer(self) -> meaning.PairScorer:
        return meaning.PairScorer({**meaning.DEFAULT_WEIGHTS, **self.params["weights"]}, float(self.params["threshold"]))

    def vectors(self, model, rows):
        from pack.embeddings import text_vectors

        self._model = model  # decide_groups embeds the compared words with the same encoder
        matrix = text_vectors(model, [row.get("text") or "" for row in rows])
        return {row["caption_id"]: vec for row, vec in zip(rows, matrix)}, {}

    def decide_groups(self, usable, vectors, rows):
        """Clusters of pairs judged the same meaning, and each caption's checked candidate pairs."""
        from pack.embeddings import text_vectors

        from .nlp import parse_unique

        text = {row["caption_id"]: row.get("text") or "" for row in rows}
        matrix = np.stack([vectors[i] for i in usable])
        distinct, first, inverse = np.unique(np.ascontiguousarray(matrix, dtype=np.float32), axis=0,
                                             return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        i, j, s = nearest(*similar_pairs(distinct, float(self.params["min_similarity"])),
                          int(self.params["max_candidates"]))
        rep = [usable[k] for k in first]  # a caption (the first of its text) for each distinct vector
        judged: dict[tuple[int, int], meaning.PairJudgement] = {}
        if self.params["checks"] and len(i):
            involved = sorted({int(x) for x in i} | {int(x) for x in j})
            docs = parse_unique([text[rep[k]] for k in involved], meaning.SPACY_NEEDS)
            readings = {k: meaning.read(docs[text[rep[k]]]) for k in involved if docs.get(text[rep[k]]) is not None}
            words = meaning.lemmas_of(readings.values())
            word_vecs = dict(zip(words, text_vectors(self._model, words))) if words else {}
            scorer, synonym = self.scorer(), float(self.params["synonym"])
            for a, b, cosine in zip(i.tolist(), j.tolist(), s.tolist()):
                if a in readings and b in readings:
                    judged[(a, b)] = meaning.judge(readings[a], readings[b], cosine, word_vecs, scorer, synonym)
        else:
            for a, b, cosine in zip(i.tolist(), j.tolist(), s.tolist()):
                judged[(a, b)] = meaning.PairJudgement(cosine, {"cosine": round(cosine, 4)}, cosine, True,
                                                       ["cosine alone (checks off)"])
        same = [(a, b) for (a, b), jd in judged.items() if jd.same]
        labels = clusters(len(distinct), np.array([a for a, _ in same], int), np.array([b for _, b in same], int))
        labels = labels[inverse]
        members: dict[int, list[int]] = {}
        for row, label in enumerate(labels):
            members.setdefault(int(label), []).append(usable[row])
        groups = [sorted(m) for m in members.values() if len(m) > 1]
        row_of = {cid: int(inverse[k]) for k, cid in enumerate(usable)}
        return groups, judged, row_of, rep

    def decide_run(self, rows: list[dict]) -> dict[int, Decision]:
        from pack import PackError

        ids = list(dict.fromkeys(row["caption_id"] for row in rows))
        model = model_steps.find(self.params[self.model_param], self.kind)
        if model is None:
            return {i: model_steps.no_model(self.params[self.model_param], self.kind) for i in ids}
        try:
            vectors, _ = self.vectors(model, rows)
        except PackError as exc:
            return {i: model_steps.unavailable(model, exc) for i in ids}
        if len(ids) < 2:
            return {i: keep("distinct", model=model.key) for i in ids}
        groups, judged, row_of, rep = self.decide_groups(ids, vectors, rows)
        pairs_of: dict[int, list[dict]] = {}
        for (a, b), jd in sorted(judged.items(), key=lambda kv: -kv[1].score):
            for mine, other in ((a, b), (b, a)):
                found = pairs_of.setdefault(rep[mine], [])
                if len(found) < MAX_PAIRS:
                    found.append({"with": rep[other], **jd.as_details()})
        out = self.cluster_review(groups, vectors, judged, row_of, self.chooser(rows, groups), model.key)
        for cid in ids:
            out.setdefault(cid, keep("distinct", model=model.key))
            pairs = pairs_of.get(rep[row_of[cid]]) if cid == rep[row_of[cid]] else None
            if pairs:
                out[cid].details["pairs"] = pairs
        return out

    def cluster_review(self, groups, vectors, judged, row_of, choose, model_key) -> dict[int, Decision]:
        """Each cluster's chosen caption kept; the others kept for review (reason ``possible_duplicate``) or
        dropped (``semantic_duplicate``) when the action is drop or the pair's score reaches drop_at."""
        out = {}
        drop_at, action = self.params["drop_at"], self.params["action"]
        for members in groups:
            kept = choose(members)
            base = {"cluster": members[0], "size": len(members), "members": members[:MAX_MEMBERS], "kept_id": kept,
                    "model": model_key, "kept_by": self.params["keep"], "action": action}
            for member in members:
                similarity = round(float(vectors[member] @ vectors[kept]), 4)
                if member == kept:
                    out[member] = keep("cluster_kept", similarity=1.0, **base)
                    continue
                a, b = sorted((row_of[member], row_of[kept]))
                pair = judged.get((a, b))
                if a == b:
                    link = {"score": 1.0, "reasons": ["the same text"]}
                elif pair is not None:
                    link = {"score": round(pair.score, 4), "reasons": pair.reasons[:8]}
                else:
                    link = {"score": None, "reasons": ["joined through other members of the cluster"]}
                sure = drop_at is not None and link["score"] is not None and link["score"] >= drop_at
                details = {**base, "similarity": similarity, "pair": link}
                if action == "drop" or sure:
                    out[member] = drop("semantic_duplicate", similarity, **details)
                else:
                    out[member] = keep("possible_duplicate", similarity, **details)
        return out

    def chooser(self, rows, groups):
        text = {row["caption_id"]: row.get("text") or "" for row in rows}
        scores = alignment_scores([c for g in groups for c in g]) if self.params["keep"] == "best_scored" else {}
        if self.params["keep"] == "first":
            return min
        return lambda members: min(members, key=lambda c: (-scores.get(c, -math.inf), -len(text[c].strip()), c))


@register
class SemanticDuplicateImages(_SemanticDuplicates):
    name = "semantic_duplicate_images"
    label = "Semantic duplicate images"
    description = ("Groups images whose CLIP image embeddings are at or above min_similarity into clusters (the "
                   "same scene re-shot, cropped or edited beyond what the perceptual hash catches) and keeps one "
                   "per cluster: the largest, else the first. Runs over the whole run.")
    target = "image"
    kind = model_kind = "clip"
    model_param = "model"
    keep_choices = ("largest", "first")
    defaults = {
        "min_similarity": 0.95,  # cosine of CLIP image embeddings
        "keep": "largest",  # "largest" (most pixels, then lowest id) or "first" (lowest id)
        "model": "",  # a registered CLIP-family model's name; "" = the default one
    }

    def vectors(self, model, rows):
        from pack.embeddings import image_vectors

        return image_vectors(model, sorted({row["image_id"] for row in rows}))

    def chooser(self, rows, groups):
        if self.params["keep"] == "first":
            return min
        from ..models import Image

        members = [i for g in groups for i in g]
        pixels = {pk: (w or 0) * (h or 0) for pk, w, h in
                  Image.objects.filter(pk__in=members).values_list("pk", "width", "height")}
        return lambda ids: min(ids, key=lambda i: (-pixels.get(i, 0), i))
