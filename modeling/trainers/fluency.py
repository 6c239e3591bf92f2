"""The four-way LSTM sentence fluency classifier of seed 004 (Section 3.1), trainer "fluency-lstm4".

Data: a fluency campaign's consistent labels (modeling.trainers.fluency_data). Model: four LSTM
classifiers over

- ``words``: the rated (translated) sentence's words,
- ``pos``: its part-of-speech tags,
- ``src_words``: the source sentence's words (the caption's parent, or ``metadata["source_text"]``),
- ``src_pos``: the source sentence's part-of-speech tags,

each an embedding, dropout, an LSTM whose last hidden state goes through dropout and an affine layer
to two outputs (fluent, not fluent; softmax). Each classifier is trained with its own cross-entropy
(Eq. 2; their parameters are disjoint, so summing the four losses trains them exactly as four separate
runs would) and the prediction is their average f (Eq. 3); fluent if f > 0.5. POS tags come from spaCy
where a pipeline for the sentence's language is installed; where none is, or where no sentence has a
source text, those branches are left out and the summary's notes say so. An item without a source
text (at scoring time, say) averages over the branches it has.

Hyper-parameters are the seed's: embedding and hidden size 512, dropout, Adam lr 1e-4 with betas
(0.9, 0.9) and eps 1e-6, batch 64. The seed gives no epoch count; the platform trains up to 40 epochs
with early stopping on the validation loss and keeps the best epoch's weights. With fewer than 500
labels the run says the data is small for this model, and k-fold cross-validation decides whether it
beats the majority class (modeling.evaluation). Held-out metrics sit next to the majority class and the
seed's Table 2 baselines (random guess, sentence length) on the same test split.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter

from modeling.models import Kind

from . import register
from .base import Prepared, Trainer, TrainingError
from .fluency_baselines import binary_metrics, length_baseline, random_guess  # noqa: F401 - public names
from .fluency_data import (
    check_counts,
    counts,
    fold_prepared,
    held_out_metrics,
    labelled_items,
    n_words,
    small_data_note,
    split,
)
from .fluency_text import has_pipeline, tokenize

log = logging.getLogger(__name__)

BRANCHES = ("words", "pos", "src_words", "src_pos")
BRANCH_LABELS = {"words": "rated sentence words", "pos": "rated sentence POS tags",
                 "src_words": "source sentence words", "src_pos": "source sentence POS tags"}
PAD, UNK = "<pad>", "<unk>"


# --- the model --------------------------------------------------------------------------------------

def _torch():
    import torch

    return torch


def build_model(vocab_sizes: dict[str, int], embedding: int, hidden: int, dropout: float):
    torch = _torch()
    nn = torch.nn

    class Branch(nn.Module):
        def __init__(self, vocab: int):
            super().__init__()
            self.embed = nn.Embedding(vocab, embedding, padding_idx=0)
            self.drop_in = nn.Dropout(dropout)
            self.lstm = nn.LSTM(embedding, hidden, batch_first=True)
            self.drop_out = nn.Dropout(dropout)
            self.out = nn.Linear(hidden, 2)

        def forward(self, ids, lengths):
            x = self.drop_in(self.embed(ids))
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True,
                                                       enforce_sorted=False)
            _, (h, _) = self.lstm(packed)
            return self.out(self.drop_out(h[-1]))

    class FluencyLSTM4(nn.Module):
        """``forward(inputs)`` -> {branch: logits [B, 2]} (index 1 = fluent)."""

        def __init__(self):
            super().__init__()
            self.branch_names = list(vocab_sizes)
            self.branches = nn.ModuleDict({b: Branch(n) for b, n in vocab_sizes.items()})

        def forward(self, inputs):
            return {b: self.branches[b](*inputs[b]) for b in self.branch_names}

    return FluencyLSTM4()


def average_f(logits: dict, masks: dict):
    """f per item: the mean of the present branches' fluent probabilities (Eq. 3)."""
    torch = _torch()
    total = None
    count = None
    for b, lg in logits.items():
        p = torch.softmax(lg.float(), dim=-1)[:, 1]
        m = masks[b].float()
        total = p * m if total is None else total + p * m
        count = m if count is None else count + m
    return total / count.clamp(min=1.0)



# --- the trainer ------------------------------------------------------------------------------------

class FluencyTrainer(Trainer):
    kind = Kind.FLUENCY
    name = "fluency-lstm4"
    default_config = {
        "epochs": 40,           # the seed gives none; early stopping ends sooner
        "early_stopping_patience": 6,
        "select_best": True,
        "batch_size": 64,
        "lr": 1e-4,
        "betas": [0.9, 0.9],
        "eps": 1e-6,
        "embedding": 512,
        "hidden": 512,
        "dropout": 0.5,
        "min_labels": 20,       # consistent labels needed in all ...
        "min_per_class": 3,     # ... with at least this many of each class
        "test_fraction": 0.2,
        "val_fraction": 0.1,
        "min_count": 1,         # tokens seen fewer times in the training split -> <unk>
        "max_tokens": 60,
        "branches": list(BRANCHES),  # which of the four to use where possible
        "threshold": 0.5,
        "cv_folds": 5,          # k-fold cross-validation below cv_below labels
        "cv_below": 500,
    }

    # --- data ---------------------------------------------------------------------------------
    def labelled_items(self, campaign, exclude_tasks=()) -> tuple[list[dict], dict]:
        return labelled_items(campaign, exclude_tasks)

    def check_counts(self, items: list[dict], left_out: dict, config: dict) -> None:
        check_counts(items, left_out, config)

    def split(self, items: list[dict], config: dict) -> tuple[list, list, list]:
        return split(items, config)

    def choose_branches(self, items: list[dict], config: dict) -> tuple[list[str], list[str]]:
        wanted = [b for b in BRANCHES if b in (config.get("branches") or BRANCHES)]
        if "words" not in wanted:
            raise TrainingError("The fluency classifier needs the 'words' branch.", code="bad_config")
        notes, chosen = [], ["words"]
        languages = sorted({i["language"] for i in items})
        if "pos" in wanted:
            missing = [lang for lang in languages if not has_pipeline(lang)]
            if missing:
                notes.append(f"POS branch of the rated sentences left out: no spaCy pipeline is installed for "
                             f"{', '.join(missing)}.")
            else:
                chosen.append("pos")
        with_source = [i for i in items if i["source"]]
        if not with_source:
            if "src_words" in wanted or "src_pos" in wanted:
                notes.append("Source words and source POS branches left out: no rated caption has a source text "
                             "(a parent caption or metadata source_text).")
        else:
            if len(with_source) < len(items):
                notes.append(f"{len(items) - len(with_source)} of {len(items)} items have no source text; their "
                             f"f averages the branches they have.")
            if "src_words" in wanted:
                chosen.append("src_words")
            if "src_pos" in wanted:
                src_langs = sorted({i["source_language"] for i in with_source})
                missing = [lang for lang in src_langs if not has_pipeline(lang)]
                if missing:
                    notes.append(f"Source POS branch left out: no spaCy pipeline is installed for "
                                 f"{', '.join(missing)}.")
                else:
                    chosen.append("src_pos")
        return chosen, notes

    def sequences(self, items: list[dict], branches: list[str], max_tokens: int) -> list[dict]:
        """Token sequences per branch for each item ({} for a branch the item lacks)."""
        seqs = [dict() for _ in items]
        by_lang: dict[str, list[int]] = {}
        for n, item in enumerate(items):
            by_lang.setdefault(item["language"], []).append(n)
        for lang, idx in by_lang.items():
            parsed = tokenize([items[n]["text"] for n in idx], lang, "pos" in branches, max_tokens)
            for n, (ws, tags) in zip(idx, parsed):
                seqs[n]["words"] = ws
                if "pos" in branches:
                    seqs[n]["pos"] = tags
        if "src_words" in branches or "src_pos" in branches:
            by_lang = {}
            for n, item in enumerate(items):
                if item.get("source"):
                    by_lang.setdefault(item.get("source_language") or "en", []).append(n)
            for lang, idx in by_lang.items():
                pos = "src_pos" in branches and has_pipeline(lang)
                parsed = tokenize([items[n]["source"] for n in idx], lang, pos, max_tokens)
                for n, (ws, tags) in zip(idx, parsed):
                    if "src_words" in branches:
                        seqs[n]["src_words"] = ws
                    if pos:
                        seqs[n]["src_pos"] = tags
        return seqs

    @staticmethod
    def encode_seqs(seqs: list[dict], vocabs: dict[str, list[str]]) -> list[dict]:
        index = {b: {tok: n for n, tok in enumerate(v)} for b, v in vocabs.items()}
        out = []
        for seq in seqs:
            enc = {}
            for b, toks in seq.items():
                if b in index:
                    enc[b] = [index[b].get(t, 1) for t in toks] or [1]
            out.append(enc)
        return out

    def prepare(self, run) -> Prepared:
        config = self.config(run.config)
        if run.campaign_id is None:
            raise TrainingError("The fluency classifier trains on a fluency campaign's aggregated votes: choose a "
                                "campaign.", code="bad_config")
        items, left_out = self.labelled_items(run.campaign, config.get("exclude_tasks") or ())
        self.check_counts(items, left_out, config)
        branches, notes = self.choose_branches(items, config)
        note = small_data_note(len(items), self.name)
        if note:
            notes.append(note)
        train, val, test = self.split(items, config)
        max_tokens = int(config["max_tokens"])
        seqs = {name: self.sequences(part, branches, max_tokens)
                for name, part in (("train", train), ("val", val), ("test", test))}
        min_count = int(config["min_count"])
        vocabs = {}
        for b in branches:
            token_counts = Counter(tok for seq in seqs["train"] for tok in seq.get(b, ()))
            vocabs[b] = [PAD, UNK] + sorted(t for t, c in token_counts.items() if c >= min_count)
        info = {"branches": branches, "vocabs": vocabs, "max_tokens": max_tokens,
                "languages": sorted({i["language"] for i in items}),
                "source_languages": sorted({i["source_language"] for i in items if i["source"]}),
                "embedding": int(config["embedding"]), "hidden": int(config["hidden"]),
                "dropout": float(config["dropout"]), "threshold": float(config["threshold"]),
                "campaign": run.campaign_id}

        def examples(part, part_seqs):
            return [{"task": i["task"], "label": i["label"], "ids": enc, "n_words": n_words(i["text"]), "text": i["text"],
                     "source_length": n_words(i["source"]) if i["source"] else None}
                    for i, s, enc in zip(part, part_seqs, self.encode_seqs(part_seqs, vocabs))]

        data = [[i["task"], i["text"], i["source"], i["label"]] for i in items]
        data_hash = hashlib.sha256(json.dumps(data, ensure_ascii=False).encode()).hexdigest()

        summary = {"campaign": run.campaign_id, "labels": counts(items), "left_out": left_out,
                   "splits": {"train": counts(train), "val": counts(val), "test": counts(test)},
                   "branches": branches, "branches_left_out": [b for b in BRANCHES if b not in branches],
                   "vocab_sizes": {b: len(v) for b, v in vocabs.items()}, "notes": notes}
        for note in notes:
            log.info("fluency run %s: %s", getattr(run, "pk", None), note)
        return Prepared(train=examples(train, seqs["train"]), val=examples(val, seqs["val"]),
                        test=examples(test, seqs["test"]), info=info, data_hash=data_hash, summary=summary)

    # --- model --------------------------------------------------------------------------------
    def build(self, config: dict, info: dict):
        sizes = {b: len(info["vocabs"][b]) for b in info["branches"]}
        return build_model(sizes, int(info.get("embedding", config["embedding"])),
                           int(info.get("hidden", config["hidden"])),
                           float(config.get("dropout", info.get("dropout", 0.5))))

    def optimizer(self, model, config: dict):
        torch = _torch()
        betas = tuple(float(b) for b in (config.get("betas") or (0.9, 0.9)))
        return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=float(config["lr"]),
                                betas=betas, eps=float(config.get("eps", 1e-6)),
                                weight_decay=float(config.get("weight_decay", 0.0)))

    @staticmethod
    def collate(examples: list[dict], branches: list[str]) -> dict:
        torch = _torch()
        inputs, masks = {}, {}
        for b in branches:
            seqs = [e["ids"].get(b) or [0] for e in examples]
            width = max(len(s) for s in seqs)
            ids = torch.zeros((len(seqs), width), dtype=torch.long)
            for n, s in enumerate(seqs):
                ids[n, :len(s)] = torch.tensor(s, dtype=torch.long)
            inputs[b] = (ids, torch.tensor([len(s) for s in seqs], dtype=torch.long))
            masks[b] = torch.tensor([1.0 if e["ids"].get(b) else 0.0 for e in examples])
        labels = torch.tensor([e.get("label", 0) for e in examples], dtype=torch.long)
        return {"inputs": inputs, "masks": masks, "labels": labels}

    def batches(self, split_data, config: dict, epoch: int, generator, train: bool):
        torch = _torch()
        size = max(1, int(config["batch_size"]))
        order = (torch.randperm(len(split_data), generator=generator).tolist() if train
                 else list(range(len(split_data))))
        branches = sorted({b for e in split_data for b in e["ids"]}, key=BRANCHES.index)
        # A list (not a generator), so the engine knows the steps per epoch.
        return [self.collate([split_data[n] for n in order[start:start + size]], branches)
                for start in range(0, len(order), size)]

    @staticmethod
    def _to(batch, device):
        inputs = {b: (ids.to(device), lengths) for b, (ids, lengths) in batch["inputs"].items()}
        masks = {b: m.to(device) for b, m in batch["masks"].items()}
        return inputs, masks, batch["labels"].to(device)

    def loss(self, model, batch, device, config: dict):
        torch = _torch()
        inputs, masks, labels = self._to(batch, device)
        logits = model({b: inputs[b] for b in model.branch_names if b in inputs})
        total = None
        for b, lg in logits.items():
            per = torch.nn.functional.cross_entropy(lg.float(), labels, reduction="none")
            m = masks[b]
            term = (per * m).sum() / m.sum().clamp(min=1.0)
            total = term if total is None else total + term
        return total, int(labels.shape[0])

    def predict(self, model, examples: list[dict], device, batch_size: int = 256) -> tuple[list[float], dict]:
        """(f per example, {branch: fluent probability per example or None where absent})."""
        torch = _torch()
        was_training = model.training
        model.eval()
        fs, per_branch = [], {b: [] for b in model.branch_names}
        try:
            with torch.no_grad():
                for start in range(0, len(examples), batch_size):
                    batch = self.collate(examples[start:start + batch_size], model.branch_names)
                    inputs, masks, _ = self._to(batch, device)
                    logits = model(inputs)
                    fs += average_f(logits, masks).cpu().tolist()
                    for b, lg in logits.items():
                        p = torch.softmax(lg.float(), dim=-1)[:, 1].cpu().tolist()
                        m = masks[b].cpu().tolist()
                        per_branch[b] += [pv if mv else None for pv, mv in zip(p, m)]
        finally:
            model.train(was_training)
        return fs, per_branch

    def evaluate(self, model, prepared: Prepared, device, config: dict) -> dict:
        test, train = prepared.test, prepared.train
        threshold = float(config.get("threshold", 0.5))
        y = [e["label"] for e in test]
        fs, per_branch = self.predict(model, test, device)
        metrics = held_out_metrics(y, fs, threshold, [e["label"] for e in train], [e["n_words"] for e in train],
                                   [e["n_words"] for e in test])
        metrics["branches"] = {}
        for b, ps in per_branch.items():
            pairs = [(t, 1 if p > threshold else 0) for t, p in zip(y, ps) if p is not None]
            if pairs:
                metrics["branches"][b] = binary_metrics([t for t, _ in pairs], [p for _, p in pairs])
        src_train = [e for e in train if e.get("source_length") is not None]
        src_test = [e for e in test if e.get("source_length") is not None]
        if src_train and src_test:
            metrics["baselines"]["length_source"] = length_baseline(
                [e["source_length"] for e in src_train], [e["label"] for e in src_train],
                [e["source_length"] for e in src_test], [e["label"] for e in src_test])
        return metrics

    # --- cross-validation (the engine calls these) -----------------------------------------------
    def labels(self, split_data) -> list[int]:
        return [e["label"] for e in split_data]

    def predict_proba(self, model, split_data, device) -> list[float]:
        return self.predict(model, split_data, device)[0]

    def folds(self, prepared: Prepared, k: int, seed: int) -> list[Prepared]:
        """k stratified folds over every labelled item. The vocabularies stay those of the run's
        training split: a word seen only in another fold keeps an untrained embedding."""
        return fold_prepared(prepared, lambda p: list(p.train) + list(p.val) + list(p.test),
                             lambda items, idx: [items[n] for n in idx], k, seed,
                             max(0.1, float(self.default_config["val_fraction"])), lambda e: e["label"])

    # --- inference ----------------------------------------------------------------------------
    def encode_texts(self, texts: list[str], info: dict, sources: list[str | None] | None = None,
                     language: str | None = None, source_language: str | None = None) -> list[dict]:
        """Scoring input for new sentences with the vocabularies of a trained version. POS branches
        need the same spaCy pipeline as in training; a missing one leaves that branch out for these items."""
        branches = [b for b in info["branches"] if not (b in ("pos", "src_pos") and not has_pipeline(
            (language if b == "pos" else source_language) or (info.get("languages") or ["en"])[0]))]
        lang = language or (info.get("languages") or ["en"])[0]
        src_lang = source_language or (info.get("source_languages") or ["en"])[0]
        items = [{"text": t or "", "source": (sources[n] if sources else None) or "", "language": lang,
                  "source_language": src_lang} for n, t in enumerate(texts)]
        seqs = self.sequences(items, branches, int(info.get("max_tokens", 60)))
        return [{"ids": enc} for enc in self.encode_seqs(seqs, info["vocabs"])]


    def score_texts(self, model, info: dict, texts: list[str], sources=None, device="cpu") -> list[float]:
        """f per text with a trained version (modeling.fluency.score calls this)."""
        return self.predict(model, self.encode_texts(texts, info, sources=sources), device)[0]


register(FluencyTrainer)
