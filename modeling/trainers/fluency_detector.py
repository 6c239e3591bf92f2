"""A fluency classifier that first learns realistic errors from unlabelled in-domain text, then a few
hundred human labels: trainer "fluency-detector".

1. Pre-training (fluency_pretrain, fluency_noise): the in-domain corpus - every text of the campaign
   being rated (labelled or not: only the texts are read, never a label), the crowd-written captions of
   its collection, and any collections the curator designates (``corpus_collections``) - is parsed
   with spaCy and corrupted across fifteen error classes of machine translation (articles,
   prepositions, agreement, noun number, verb form, word order, dropped words, a missing verb, a
   repeated word, pronouns, literal constructions). The packaged MiniLM encoder's top layers are
   fine-tuned to tell originals from corruptions, per sentence and per token (ELECTRA's discriminator,
   Clark et al. 2020; synthetic-error pre-training as in Grundkiewicz et al. 2019; acceptability as in
   CoLA, Warstadt et al. 2019), cross-fitted so that no sentence is scored by a detector that trained
   on it. The detectors are cached in storage per corpus and settings: a loop's later rounds and
   re-runs reuse them.
2. Calibration on the human labels: a class-weighted logistic regression (the "fluency-encoder"
   trainer's head, the same engine loop, cross-validation and held-out report) over a handful of
   features - the detector's sentence score, its highest and mean token scores, the share of tokens it
   flags - and cheap lexical ones: the mean and lowest unigram Zipf frequency of the words (wordfreq;
   the unigram term of SLOR, Lau, Clark and Lappin 2017, "Grammaticality, Acceptability, and
   Probability"), the share of rare words, and the length. Few features, so 100-300 labels suffice.

A corpus smaller than ``min_corpus`` sentences (default 100: below that the detector sees too few
constructions to generalise) or missing falls back to the "fluency-encoder" features; the run says so
in its log and on its page (``data_summary["fallback"]``), and the version scores as an encoder model.
"""
from __future__ import annotations

import numpy as np

from modeling.models import Kind

from . import register
from .base import Prepared
from .fluency_data import check_counts, labelled_items, split
from .fluency_encoder import FluencyEncoderTrainer
from .fluency_pretrain import DEFAULTS as PRETRAIN_DEFAULTS
from .fluency_pretrain import FEATURES as DETECTOR_FEATURES
from .fluency_text import has_pipeline, words

LEXICAL_FEATURES = ("zipf_mean", "zipf_min", "rare_share", "length")
MIN_CORPUS = 100


def lexical_features(texts: list[str], language: str = "en") -> np.ndarray:
    """Per text: mean and lowest Zipf frequency of its alphabetic words (wordfreq), the share of words
    rarer than Zipf 2 (about once per million words in ten), and the length in tens of words."""
    from wordfreq import zipf_frequency

    out = np.zeros((len(texts), len(LEXICAL_FEATURES)), dtype=np.float32)
    lang = (language or "en").split("-")[0]
    for n, text in enumerate(texts):
        tokens = words(text)
        alpha = [w for w in tokens if w.isalpha()]
        zipfs = [zipf_frequency(w, lang) for w in alpha] or [0.0]
        out[n] = [float(np.mean(zipfs)), float(np.min(zipfs)), float(np.mean([z < 2.0 for z in zipfs])),
                  len(tokens) / 10.0]
    return out


class FluencyDetectorTrainer(FluencyEncoderTrainer):
    kind = Kind.FLUENCY
    name = "fluency-detector"
    default_config = {
        **FluencyEncoderTrainer.default_config,
        **PRETRAIN_DEFAULTS,
        "syntax": False,            # the fallback's part-of-speech counts (the detector reads syntax itself)
        "use_source": False,
        "weight_decay": 1e-2,
        "corpus_collections": [],   # ids of collections whose captions join the corpus (fluent text, ideally)
        "corpus_pool": True,        # every text of the campaign (labelled or not)
        "corpus_crowd": True,       # crowd-written captions of the campaign's collection
        "corpus_max": 4000,         # a seeded sample of at most this many sentences
        "min_corpus": MIN_CORPUS,
        "lexical": True,            # the wordfreq features beside the detector's
    }

    # --- data ---------------------------------------------------------------------------------
    def prepare(self, run) -> Prepared:
        from modeling.trainers.base import TrainingError

        config = self.config(run.config)
        if run.campaign_id is None:
            raise TrainingError("The fluency classifier trains on a fluency campaign's aggregated votes: choose a "
                                "campaign.", code="bad_config")
        items, left_out = labelled_items(run.campaign, config.get("exclude_tasks") or ())
        check_counts(items, left_out, config)
        parts = split(items, config)
        corpus, sources = corpus_texts(run.campaign, config)
        return self.prepared_with_corpus(items, parts, left_out, config, corpus, sources,
                                         campaign_id=run.campaign_id, echo=getattr(run, "echo", None))

    def prepared_with_corpus(self, items, parts, left_out, config, corpus: list[str], corpus_sources: dict,
                             campaign_id=None, echo=None) -> Prepared:
        from . import fluency_pretrain

        language = items[0]["language"] if items else "en"
        minimum = int(config.get("min_corpus", MIN_CORPUS))
        usable = sorted({t.strip() for t in corpus if t and len(words(t)) >= 3})
        why = None
        if not has_pipeline(language) or language.split("-")[0] != "en":
            why = (f"the synthetic errors are English rules and the texts are {language!r}")
        elif len(usable) < minimum:
            why = (f"the in-domain corpus has {len(usable)} usable sentences (of 3 words or more) and the detector "
                   f"needs at least {minimum}")
        if why:
            return self.fallback(items, parts, left_out, config, campaign_id, why, corpus_sources, len(usable))
        detectors = fluency_pretrain.pretrain(usable, config, config.get("encoder") or None,
                                              int(config.get("pretrain_seed", 0)), echo=echo)
        info = {"encoder": _describe(config.get("encoder") or None), "use_source": False, "syntax": False,
                "language": language, "detector": detectors.key, "lexical": bool(config.get("lexical", True)),
                "feature_names": list(DETECTOR_FEATURES) + (list(LEXICAL_FEATURES) if config.get("lexical", True)
                                                            else [])}
        x_all = self.features_like(info, [i["text"] for i in items])
        facts = detectors.facts
        when = "reused from the cache" if facts.get("reused") else f"pre-trained in {facts.get('seconds')} s"
        notes = [f"Error detector: {info['encoder']['name']} fine-tuned on {facts.get('corpus')} in-domain sentences "
                 f"and their synthetic corruptions ({facts.get('parts')} cross-fitted parts, {when}); "
                 f"{len(info['feature_names'])} features -> logistic regression."]
        summary = {"corpus": {"sentences": len(usable), "sources": corpus_sources, "detector": detectors.key[:16],
                              "pretraining": facts}}
        return self.assemble(items, parts, left_out, config, x_all, info, notes, campaign_id=campaign_id,
                             summary=summary)

    def fallback(self, items, parts, left_out, config, campaign_id, why: str, corpus_sources: dict, size: int):
        """The "fluency-encoder" features instead of the detector's, and a message that says so."""
        message = (f"No error detector: {why}. Fell back to the fluency-encoder features (frozen sentence "
                   f"vector and part-of-speech bigram counts), which miss most single-word errors; add fluent "
                   f"in-domain text (corpus_collections) or label a bigger pool.")
        fallback_config = {**config, "syntax": True, "use_source": bool(config.get("use_source", False))}
        prepared = super().prepared_from_items(items, parts, left_out, fallback_config, campaign_id=campaign_id)
        prepared.info["fallback"] = message
        prepared.summary["fallback"] = message
        prepared.summary["corpus"] = {"sentences": size, "sources": corpus_sources, "minimum":
                                      int(config.get("min_corpus", MIN_CORPUS))}
        prepared.summary["notes"] = [message] + list(prepared.summary.get("notes") or [])
        return prepared

    # --- features -----------------------------------------------------------------------------
    def features_like(self, info: dict, texts: list[str], sources=None) -> np.ndarray:
        if not info.get("detector"):
            return super().features_like(info, texts, sources)
        from . import fluency_pretrain
        from .base import TrainingError

        detectors = fluency_pretrain.load_cached(info["detector"], (info.get("encoder") or {}).get("name"))
        if detectors is None:
            raise TrainingError(f"The error detector {info['detector'][:16]} of this version is missing from "
                                f"storage; train the version again.", code="bad_checkpoint")
        x = detectors.features(list(texts))
        if info.get("lexical", True):
            x = np.concatenate([x, lexical_features(list(texts), info.get("language") or "en")], axis=1)
        return x.astype(np.float32)

    def text_features(self, texts, sources=None, *, encoder=None, syntax=True, language="en", detector=None,
                      lexical=True):
        if detector:
            return self.features_like({"detector": detector, "encoder": {"name": encoder}, "lexical": lexical,
                                       "language": language}, texts)
        return super().text_features(texts, sources, encoder=encoder, syntax=syntax, language=language)


def _describe(encoder):
    from modeling import encoders

    return encoders.describe(encoder)


def corpus_texts(campaign, config: dict) -> tuple[list[str], dict]:
    """(texts, {source: count}) of the in-domain corpus: the campaign's task texts (no labels read), the
    crowd-written captions of its collection, the designated collections' captions; a seeded sample of
    ``corpus_max`` when larger."""
    import random

    from annotation.models import Task
    from curation.models import Caption

    found: dict[str, str] = {}
    counts: dict[str, int] = {}

    def add(texts, source):
        n = 0
        for text in texts:
            text = (text or "").strip()
            if text and text not in found:
                found[text] = source
                n += 1
        counts[source] = n

    if config.get("corpus_pool", True):
        add(Task.objects.filter(campaign=campaign, caption__isnull=False).values_list("caption__text", flat=True),
            "pool")
    if config.get("corpus_crowd", True):
        add(Caption.objects.filter(image__collection_id=campaign.collection_id, origin=Caption.Origin.CROWD)
            .values_list("text", flat=True)[:20000], "crowd")
    ids = [int(c) for c in (config.get("corpus_collections") or []) if str(c).strip().isdigit()]
    if ids:
        add(Caption.objects.filter(image__collection_id__in=ids).values_list("text", flat=True)[:50000], "collections")
    texts = sorted(found)
    cap = int(config.get("corpus_max", 4000) or 0)
    if cap and len(texts) > cap:
        texts = sorted(random.Random("fluency-corpus").sample(texts, cap))
    return texts, counts


register(FluencyDetectorTrainer)
