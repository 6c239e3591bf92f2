"""A fluency classifier that reads realistic errors: an error detector pre-trained on synthetic corruptions of
unlabelled in-domain text, grammar-rule and word-frequency features, calibrated on a few hundred labels:
trainer "fluency-detector".

1. Pre-training (fluency_pretrain, fluency_noise): the in-domain corpus - every text of the campaign
   being rated (labelled or not: only the texts are read, never a label), the crowd-written captions of
   its collection, and any collections the curator designates (``corpus_collections``: ids) - is parsed
   with spaCy and corrupted across fifteen error classes of machine translation (articles,
   prepositions, agreement, noun number, verb form, word order, dropped words, a missing verb, a
   repeated word, pronouns, literal constructions). A detector on the packaged MiniLM encoder learns to
   tell originals from corruptions, per sentence and per word piece (ELECTRA's discriminator, Clark et
   al. 2020; synthetic-error pre-training as in Grundkiewicz et al. 2019; acceptability as in CoLA,
   Warstadt et al. 2019), cross-fitted so that no sentence is scored by a detector that trained on it,
   and cached in storage per corpus and settings: a loop's later rounds and re-runs reuse it.
2. Calibration on the human labels: a class-weighted logistic regression (the "fluency-encoder"
   trainer's head, the same engine loop, cross-validation and held-out report) over the detector's
   sentence score, its highest and mean token scores and the share of tokens it flags; the mean and
   lowest unigram Zipf frequency of the words (wordfreq; the unigram term of SLOR, Lau, Clark and
   Lappin 2017), the share of rare words and the length; counts of violations of general agreement
   rules in the parse (grammar_features); and, by default (``with_encoder``), the "fluency-encoder"
   features (sentence vector, part-of-speech bigram counts).

Measured on dev set 1 at 200 labels (benchmarks/fluency_dev.py, docs/benchmarks.md): 0.673 ± 0.033 macro
F1 on the unseen items against fluency-encoder's 0.669 ± 0.026 and chance's 0.5: no clear win, so it is
not the default trainer.

A corpus smaller than ``min_corpus`` sentences (default 100, counting sentences of 3 words or more:
below that the detector sees too few constructions) or missing, or a language other than English (the
corruption rules are English), falls back to the "fluency-encoder" features; the run says so in its
log and on its page (``data_summary["fallback"]``), and the version scores as an encoder model.
"""
from __future__ import annotations

import numpy as np

from modeling.models import Kind

from . import register
from .base import Prepared
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
        "grammar": True,            # counts of agreement-rule violations in the spaCy parse
        "with_encoder": True,       # also the fluency-encoder's features (sentence vector, POS bigrams)
    }

    # --- data ---------------------------------------------------------------------------------
    def prepare(self, run) -> Prepared:
        config = self.config(run.config)
        items, left_out, parts = self.campaign_items(run, config)
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
                "grammar": bool(config.get("grammar", True)), "with_encoder": bool(config.get("with_encoder")),
                "feature_names": list(DETECTOR_FEATURES) + (list(LEXICAL_FEATURES) if config.get("lexical", True)
                                                            else [])
                + (list(GRAMMAR_FEATURES) if config.get("grammar", True) else [])
                + (["encoder vector and POS bigrams"] if config.get("with_encoder") else [])}
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
        parts = [detectors.features(list(texts))]
        if info.get("lexical", True):
            parts.append(lexical_features(list(texts), info.get("language") or "en"))
        if info.get("grammar", True):
            parts.append(grammar_features(list(texts)))
        if info.get("with_encoder"):
            parts.append(super().text_features(list(texts), None, encoder=(info.get("encoder") or {}).get("name"),
                                               syntax=True, language=info.get("language") or "en"))
        return np.concatenate(parts, axis=1).astype(np.float32)

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


# --- grammar checks ---------------------------------------------------------------------------------------

GRAMMAR_FEATURES = ("repeated_word", "a_an_mismatch", "determiner_number", "subject_verb", "no_finite_verb",
                    "analytic_comparative", "double_determiner", "bare_singular")
SINGULAR_DETERMINERS = {"a", "an", "this", "that", "one", "each", "every", "another"}
PLURAL_DETERMINERS = {"these", "those", "many", "several", "few", "both", "various", "numerous"}


def grammar_features(texts: list[str]) -> np.ndarray:
    """Counts of violations of general English agreement rules, from the spaCy parse (the kind of rules a
    grammar checker such as LanguageTool applies; Naber 2003): a word repeated at once, "a" before a vowel
    or "an" before a consonant letter, a singular determiner before a plural noun or a plural one before
    a singular noun, a subject whose number the verb contradicts, a sentence of eight words or more with
    no finite verb, "more"/"most" before a comparative or a one-syllable adjective, two determiners in a
    row, and a singular count noun with no determiner as a subject or object."""
    from .fluency_pretrain import parse

    out = np.zeros((len(texts), len(GRAMMAR_FEATURES)), dtype=np.float32)
    for n, doc in enumerate(parse([t or "" for t in texts])):
        toks = [t for t in doc if not t.is_space]
        f = dict.fromkeys(GRAMMAR_FEATURES, 0.0)
        for a, b in zip(toks, toks[1:]):
            if a.is_alpha and a.lower_ == b.lower_:
                f["repeated_word"] += 1
            if a.lower_ == "a" and b.is_alpha and b.lower_[:1] in "aeiou" and not b.lower_.startswith(("uni", "use",
                                                                                                      "eu", "one")):
                f["a_an_mismatch"] += 1
            if a.lower_ == "an" and b.is_alpha and b.lower_[:1] not in "aeiouh":
                f["a_an_mismatch"] += 1
            if a.pos_ == "DET" and b.pos_ == "DET" and a.lower_ != "all" and b.lower_ not in ("all", "both"):
                f["double_determiner"] += 1
            if a.lower_ in ("more", "most") and (b.tag_ in ("JJR", "JJS") or (b.tag_ == "JJ" and _syllables(b.lower_)
                                                                             == 1)):
                f["analytic_comparative"] += 1
        for t in toks:
            if t.pos_ in ("NOUN",) and t.tag_ in ("NN", "NNS"):
                dets = [c.lower_ for c in t.children if c.dep_ in ("det", "nummod")]
                if t.tag_ == "NNS" and any(d in SINGULAR_DETERMINERS for d in dets):
                    f["determiner_number"] += 1
                if t.tag_ == "NN" and any(d in PLURAL_DETERMINERS or (d.isdigit() and d != "1") for d in dets):
                    f["determiner_number"] += 1
                if (t.tag_ == "NN" and t.dep_ in ("nsubj", "dobj") and not any(
                        c.dep_ in ("det", "poss", "nummod", "compound") for c in t.children)
                        and t.lower_ not in _MASS and t.i > 0):
                    f["bare_singular"] += 1
            if t.dep_ == "nsubj" and t.tag_ in ("NN", "NNS", "NNP"):
                verb = t.head
                finite = [verb] + [c for c in verb.children if c.dep_ in ("aux", "auxpass")]
                finite = [v for v in finite if v.tag_ in ("VBZ", "VBP") or v.lower_ in ("was", "were")]
                coordinated = any(c.dep_ == "conj" for c in t.children)
                plural = t.tag_ == "NNS" or coordinated
                for v in finite[:1]:
                    if plural and (v.tag_ == "VBZ" or v.lower_ == "was"):
                        f["subject_verb"] += 1
                    if not plural and t.tag_ != "NNP" and (v.tag_ == "VBP" or v.lower_ == "were"):
                        f["subject_verb"] += 1
        if len(toks) >= 8 and not any(t.tag_ in ("VBZ", "VBP", "VBD", "MD") for t in toks) and \
                any(t.pos_ == "VERB" for t in toks):
            f["no_finite_verb"] = 1.0
        out[n] = [f[k] for k in GRAMMAR_FEATURES]
    return out


_MASS = {"water", "information", "equipment", "furniture", "rain", "snow", "music", "traffic", "food", "art",
         "work", "research", "news", "advice", "evidence", "money", "time", "light", "steel", "wood", "paper",
         "oil", "gold", "silver", "glass", "cotton", "wool", "stone", "clay", "bronze", "marble", "police"}


def _syllables(word: str) -> int:
    groups, previous = 0, False
    for ch in word:
        vowel = ch in "aeiouy"
        if vowel and not previous:
            groups += 1
        previous = vowel
    if word.endswith("e") and groups > 1:
        groups -= 1
    return max(1, groups)
