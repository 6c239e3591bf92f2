"""A fluency classifier that fine-tunes the whole sentence encoder on the human labels: trainer "fluency-finetune".

The configured text encoder (modeling.encoders: the packaged all-MiniLM-L6-v2 by default, its files checked
against their recorded sha256, loaded offline) is trained end to end with a linear head on its mean-pooled
token states (the sentence-transformers pooling; fine-tuning a pretrained transformer for sentence
acceptability as in BERT, Devlin et al. 2019, and CoLA, Warstadt et al. 2019). A frozen sentence vector
reads meaning and misses most single-word errors of machine translation (a dropped article, a wrong
preposition, a swapped pair); fine-tuning lets the encoder's lower layers attend to them.

Measured on dev set 1 at 200 labels over 5 splits (benchmarks/fluency_dev.py, docs/benchmarks.md): 0.711 ±
0.027 macro F1 on the 242 unseen captions against 0.669 ± 0.026 for "fluency-encoder" and 0.673 ± 0.033 for
"fluency-detector"; it is the default for new fluency runs (a learning loop keeps "fluency-encoder").

The recipe: AdamW with
lr 5e-5 on the encoder and 1e-3 on the head, weight decay 0.01, batches of 16 sentences cut at 96 word
pieces, a fixed number of epochs (no early stopping: a validation share of a few hundred labels is too
small to stop on and better spent on training), the loss weighted by inverse class frequency
(fluency_encoder.class_weights). Synthetic-error pre-training before it did not help and is not done.

Data, splits, the held-out report with its baselines, the k-fold cross-validation and the verdict are the
"fluency-encoder" trainer's; the "features" of an item are its text (an object array), so the learning
loop's re-scoring, the random arm and benchmarks/fluency_dev.py drive this trainer through the same
methods (features_like, prepared_from_features, predict_features, sampler_features: the fine-tuned
encoder's pooled states).

``build`` rebuilds the architecture from the encoder directory's config (AutoConfig + AutoModel.from_config,
no weights read); the registry then loads the version's state dict (stored in float16) with weights_only=True.
The pretrained weights are read (safetensors only) when a run starts training: in ``optimizer``, which only training
calls. Each fit costs tens of seconds on a CPU (44 s for 240 sentences on 2 cores; a 3-fold CV of 300 labels
114 s), so cross-validation uses 3 folds, and the loop's random arm (REPEATS refits per round size) is not simulated
for this trainer (``fast_refit``).
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from modeling.models import Kind

from . import register
from .base import Prepared, TrainingError
from .fluency_data import counts, n_words
from .fluency_encoder import FluencyEncoderTrainer, class_weights

EVAL_BATCH = 64


def _torch():
    import torch

    return torch


def encoder_directory(name: str | None):
    """The verified directory of a modeling.encoders encoder (the configured one when ``name`` is empty)."""
    import os

    from modeling import encoders

    directory = encoders.verify(encoders.spec_of(name or None))
    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[variable] = "1"
    return directory


def build_classifier(directory, max_length: int, weights=None):
    """The encoder (architecture from ``directory``'s config, random weights) with a linear head on its
    mean-pooled states. ``forward(texts)`` -> logits [B, 2] (index 1 = fluent)."""
    torch = _torch()
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        config = AutoConfig.from_pretrained(str(directory), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise TrainingError(f"The sentence encoder in {directory} could not be read: {str(exc)[:300]}",
                            code="encoder_broken") from None
    nn = torch.nn

    class FinetunedFluency(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = AutoModel.from_config(config)
            self.head = nn.Linear(config.hidden_size, 2)
            self.tokenizer = tokenizer
            self.max_length = int(max_length)
            self.class_weights = list(weights or [1.0, 1.0])
            # The registry stores the weights in half precision (about 45 MB instead of 90 for MiniLM-L6).
            self.artifact_dtype = torch.float16

        def pooled(self, texts):
            device = self.head.weight.device
            batch = self.tokenizer([t or "" for t in texts], padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items()}
            states = self.encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            return (states * mask).sum(1) / mask.sum(1).clamp(min=1e-6)

        def forward(self, texts):
            return self.head(self.pooled(texts))

    return FinetunedFluency()


def load_pretrained(model, directory) -> None:
    """The encoder's pretrained weights from its safetensors file (never a pickle) into ``model.encoder``."""
    from pathlib import Path

    from safetensors.torch import load_file

    files = sorted(Path(directory).glob("*.safetensors"))
    if not files:
        raise TrainingError(f"The sentence encoder in {directory} has no safetensors weights.", code="unsafe_weights")
    state = {}
    for path in files:
        state.update(load_file(str(path)))
    wanted = set(model.encoder.state_dict())
    prefix = getattr(model.encoder, "base_model_prefix", "")
    renamed = {}
    for key, value in state.items():
        if key not in wanted and prefix and key.startswith(prefix + "."):
            key = key[len(prefix) + 1:]
        renamed[key] = value
    missing = [k for k in wanted if k not in renamed and not k.endswith("position_ids")]
    if missing:
        raise TrainingError(f"The sentence encoder in {directory} does not match its config: missing "
                            f"{', '.join(sorted(missing)[:5])}.", code="encoder_broken")
    model.encoder.load_state_dict({k: v for k, v in renamed.items() if k in wanted}, strict=False)


def texts_array(texts) -> np.ndarray:
    out = np.empty(len(texts), dtype=object)
    out[:] = [t or "" for t in texts]
    return out


class FluencyFinetuneTrainer(FluencyEncoderTrainer):
    kind = Kind.FLUENCY
    name = "fluency-finetune"
    fast_refit = False  # tens of seconds per fit: the loop's random arm is not simulated
    default_config = {
        **FluencyEncoderTrainer.default_config,
        "encoder": "",          # a modeling.encoders name; empty: settings.TEXT_ENCODER
        "torch_threads": 0,     # a transformer's matrices use every thread the worker's share allows
        "epochs": 7,
        "batch_size": 16,
        "lr": 5e-5,             # the encoder's
        "head_lr": 1e-3,
        "weight_decay": 0.01,
        "max_length": 96,
        "use_source": False,
        "syntax": False,
        "checkpoint_every": 1000,  # the last epoch only: a checkpoint is ~270 MB with AdamW's moments
        "cv_folds": 3,
        "cv_below": 500,
        "early_stopping_patience": 0,
        "select_best": False,
        "val_fraction": 0.0,
    }

    # --- data: the encoder trainer's prepare (its campaign's labelled items and splits) ----------------

    def _info(self, config: dict, labels) -> dict:
        from modeling import encoders

        encoder = config.get("encoder") or None
        encoder_directory(encoder)  # refuse a missing or changed encoder before any training
        return {"encoder": encoders.describe(encoder), "use_source": False, "syntax": False,
                "max_length": int(config["max_length"]), "threshold": float(config["threshold"]),
                "class_weights": class_weights(labels), "finetuned": True}

    def prepared_from_items(self, items, parts, left_out, config, campaign_id=None) -> Prepared:
        train = parts[0]
        info = {**self._info(config, [i["label"] for i in train]), "campaign": campaign_id,
                "language": items[0]["language"] if items else "en"}

        def block(part):
            return self._split_data(texts_array([i["text"] for i in part]), [i["label"] for i in part],
                                    [i["task"] for i in part], [n_words(i["text"]) for i in part],
                                    [i["text"] for i in part])

        data = [[i["task"], i["text"], i["label"]] for i in items]
        recipe = {k: config[k] for k in ("epochs", "batch_size", "lr", "head_lr", "weight_decay", "max_length")}
        data_hash = hashlib.sha256(json.dumps([data, info["encoder"].get("key"), recipe],
                                              ensure_ascii=False).encode()).hexdigest()
        notes = [f"Sentence encoder {info['encoder']['name']} ({info['encoder']['licence']}) fine-tuned end to end "
                 f"with a linear head on its mean-pooled states ({config['epochs']} epochs, lr {config['lr']} / head "
                 f"{config['head_lr']}, batches of {config['batch_size']}, class-weighted loss)."]
        summary = {"campaign": campaign_id, "labels": counts(items), "left_out": left_out,
                   "splits": {name: counts(p) for name, p in zip(("train", "val", "test"), parts)},
                   "encoder": info["encoder"], "features": "text (fine-tuned encoder)", "notes": notes}
        return Prepared(train=block(parts[0]), val=block(parts[1]), test=block(parts[2]), info=info,
                        data_hash=data_hash, summary=summary)

    def prepared_from_features(self, x, labels, config: dict, encoder_info=None) -> Prepared:
        """Training data straight from texts (``x``: what ``features_like`` returns), no test split: the
        loop's random arm and the benchmarks use it."""
        from .fluency_data import inner_split

        config = self.config(config)
        x = texts_array(list(x))
        labels = [int(v) for v in labels]
        train_idx, val_idx = inner_split(list(range(len(labels))), labels, float(config["val_fraction"]),
                                         int(config.get("seed", 0)))
        info = self._info(config, [labels[n] for n in train_idx])

        def block(idx):
            return self._split_data(x[idx], [labels[n] for n in idx], list(idx), [n_words(t) for t in x[idx]],
                                    list(x[idx]))

        return Prepared(train=block(train_idx), val=block(val_idx), test=block([]), info=info)

    @staticmethod
    def _split_data(x, labels, tasks, lengths, texts=None) -> dict:
        torch = _torch()
        return {"x": texts_array(list(x)), "y": torch.as_tensor(list(labels), dtype=torch.long), "tasks": list(tasks),
                "n_words": list(lengths), "texts": list(texts) if texts is not None else None}

    def text_features(self, texts, sources=None, *, encoder=None, syntax=True, language="en") -> np.ndarray:
        """The model reads the texts themselves."""
        return texts_array(list(texts))

    def features_like(self, info: dict, texts: list[str], sources=None) -> np.ndarray:
        return texts_array(list(texts))

    # --- model --------------------------------------------------------------------------------
    def build(self, config: dict, info: dict):
        name = (info.get("encoder") or {}).get("name") or config.get("encoder") or None
        return build_classifier(encoder_directory(name), int(info.get("max_length", config.get("max_length", 96))),
                                info.get("class_weights"))

    def optimizer(self, model, config: dict):
        """Only training calls this: the pretrained weights go in here, then AdamW with the encoder's and the
        head's learning rates."""
        torch = _torch()
        load_pretrained(model, encoder_directory(config.get("encoder") or None))
        decay = float(config.get("weight_decay", 0.0))
        return torch.optim.AdamW([{"params": list(model.encoder.parameters()), "lr": float(config["lr"])},
                                  {"params": list(model.head.parameters()), "lr": float(config["head_lr"])}],
                                 weight_decay=decay)

    def batches(self, split_data, config: dict, epoch: int, generator, train: bool):
        torch = _torch()
        n = len(split_data["tasks"])
        size = max(1, int(config["batch_size"]))
        order = torch.randperm(n, generator=generator) if train else torch.arange(n)
        texts = split_data["x"]
        return [(list(texts[order[s:s + size].numpy()]), split_data["y"][order[s:s + size]])
                for s in range(0, n, size)]

    def loss(self, model, batch, device, config: dict):
        torch = _torch()
        texts, y = batch
        weights = torch.tensor(model.class_weights, dtype=torch.float32, device=device)
        logits = model(texts)
        return torch.nn.functional.cross_entropy(logits.float(), y.to(device), weight=weights), int(y.shape[0])

    def _eval_batches(self, model, x, fn, batch_size):
        torch = _torch()
        texts = list(x)
        was = model.training
        model.eval()
        out = []
        try:
            with torch.no_grad():
                for start in range(0, len(texts), batch_size):
                    out.append(fn(texts[start:start + batch_size]))
        finally:
            model.train(was)
        return out

    def predict_features(self, model, x, device="cpu", batch_size: int = EVAL_BATCH) -> list[float]:
        torch = _torch()
        chunks = self._eval_batches(model, x, lambda t: torch.softmax(model(t).float(), dim=-1)[:, 1].cpu().tolist(),
                                    batch_size)
        return [p for chunk in chunks for p in chunk]

    def sampler_features(self, model, x) -> np.ndarray:
        """The fine-tuned encoder's mean-pooled states, L2-normalised: the space the hybrid sampler clusters in."""
        chunks = self._eval_batches(model, x, lambda t: model.pooled(t).float().cpu().numpy(), EVAL_BATCH)
        if not chunks:
            return np.zeros((0, model.head.in_features), dtype=np.float32)
        states = np.concatenate(chunks).astype(np.float32)
        return states / np.maximum(np.linalg.norm(states, axis=1, keepdims=True), 1e-6)

    def folds(self, prepared: Prepared, k: int, seed: int) -> list[Prepared]:
        from .fluency_data import fold_prepared

        torch = _torch()

        def combine(p):
            return [{"x": part["x"][n], "y": int(part["y"][n]), "task": part["tasks"][n], "n": part["n_words"][n],
                     "text": part["texts"][n] if part.get("texts") is not None else None}
                    for part in (p.train, p.val, p.test) for n in range(len(part["tasks"]))]

        def select(items, idx):
            chosen = [items[n] for n in idx]
            return {"x": texts_array([c["x"] for c in chosen]),
                    "y": torch.tensor([c["y"] for c in chosen], dtype=torch.long),
                    "tasks": [c["task"] for c in chosen], "n_words": [c["n"] for c in chosen],
                    "texts": [c["text"] for c in chosen] if all(c["text"] is not None for c in chosen) else None}

        return fold_prepared(prepared, combine, select, k, seed, float(prepared.info.get("val_fraction", 0.0)),
                             lambda e: e["y"])


register(FluencyFinetuneTrainer)
