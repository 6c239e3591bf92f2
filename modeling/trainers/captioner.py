"""Captioner trainers on a frozen Release: "captioner-lstm" (Show-and-Tell), "captioner-transformer",
and "topic-cnn", the CNN trained on the images' LDA topic distributions (seed 000's weak supervision,
CWS) whose weights a captioner run can start from (config "encoder_version")."""
from __future__ import annotations


import functools
import os

from modeling.captioning.provenance import training_data_versions
from modeling.captioning.vocab import MAX_TOKENS, Vocab
from modeling.models import Kind

from . import register
from .base import Prepared, Trainer, TrainingError

# torch and the modules built on it are imported when a trainer method first runs, not when the trainer
# registers: the web process lists trainers (the new-run form) and must not load torch (benchmarks/web_memory.py).
torch = F = cdata = strategies = beam_search = Captioner = sentence_nll = ImageEncoder = None
load_encoder_weights = caption_metrics = diversity = None


def _load_torch() -> None:
    global torch, F, cdata, strategies, beam_search, Captioner, sentence_nll, ImageEncoder, load_encoder_weights
    global caption_metrics, diversity
    if torch is not None:
        return
    import torch as _torch
    from torch.nn import functional as _F

    from modeling.captioning import data as _cdata
    from modeling.captioning import strategies as _strategies
    from modeling.captioning.beam import beam_search as _beam_search
    from modeling.captioning.decoders import Captioner as _Captioner
    from modeling.captioning.decoders import sentence_nll as _sentence_nll
    from modeling.captioning.encoder import ImageEncoder as _ImageEncoder
    from modeling.captioning.encoder import load_encoder_weights as _load_encoder_weights
    from modeling.captioning.metrics import caption_metrics as _caption_metrics
    from modeling.captioning.metrics import diversity as _diversity

    torch, F, cdata, strategies, beam_search = _torch, _F, _cdata, _strategies, _beam_search
    Captioner, sentence_nll, ImageEncoder, load_encoder_weights = _Captioner, _sentence_nll, _ImageEncoder, \
        _load_encoder_weights
    caption_metrics, diversity = _caption_metrics, _diversity


def _with_torch(cls):
    """Wrap every method the class defines so that torch and friends are loaded before it runs."""
    for name, member in list(vars(cls).items()):
        if name.startswith("__"):
            continue
        if isinstance(member, staticmethod):  # callable too: check it first
            setattr(cls, name, staticmethod(_wrap(member.__func__)))
        elif callable(member):
            setattr(cls, name, _wrap(member))
    return cls


def _wrap(function):
    @functools.wraps(function)
    def loaded(*args, **kwargs):
        _load_torch()
        return function(*args, **kwargs)

    return loaded

MODEL_KEYS = ("feature_dim", "width", "embed", "hidden", "dropout", "heads", "layers")


def _encoder_source(config: dict):
    """(bytes or path, label) of the weights a run's encoder starts from, or (None, None)."""
    if config.get("encoder_version"):
        from django.core.files.storage import default_storage

        from modeling.models import ModelVersion

        try:
            version = ModelVersion.objects.get(pk=config["encoder_version"], kind=Kind.TOPIC_CNN)
        except (ModelVersion.DoesNotExist, ValueError, TypeError):
            raise TrainingError(f"Encoder version {config['encoder_version']!r} is not a topic-CNN model version.",
                                code="bad_config") from None
        try:
            with default_storage.open(version.artifact, "rb") as fh:
                return fh.read(), f"topic CNN v{version.version} ({version.artifact})"
        except OSError as exc:
            raise TrainingError(f"The artifact of topic CNN v{version.version} cannot be read: {exc}",
                                code="bad_weights") from None
    if config.get("encoder_weights"):
        return str(config["encoder_weights"]), repr(str(config["encoder_weights"]))
    return None, None


@_with_torch
class CaptionerTrainer(Trainer):
    kind = Kind.CAPTIONER

    def __init__(self, decoder: str):
        self.decoder = decoder
        self.name = f"captioner-{decoder}"
        self.default_config = {
            "epochs": 10, "batch_size": 32, "lr": 1e-3, "strategy": "all", "min_count": 5,
            "max_tokens": MAX_TOKENS, "image_size": 64, "beam_size": 5, "missing_images": "fail",
            "feature_dim": 128, "width": 32, "embed": 256, "hidden": 256, "dropout": 0.3,
            "heads": 4, "layers": 2, "encoder_weights": "", "encoder_version": None, "freeze_encoder": False,
            "min_train_captions": 2, "max_eval_images": 200, "meteor": True,
        }

    # --- data -----------------------------------------------------------------------------------
    def prepare(self, run) -> Prepared:
        config = self.config(run.config)
        strategy = config["strategy"]
        if strategy not in strategies.STRATEGIES:
            raise TrainingError(f"Unknown strategy {strategy!r}; use one of {', '.join(strategies.STRATEGIES)}.",
                                code="bad_config")
        source, label = _encoder_source(config)
        if source is not None:  # refuse a missing, corrupt or mismatched file before reading any image
            load_encoder_weights(ImageEncoder(int(config["feature_dim"]), int(config["width"])), source, label)
        release = run.release
        rows = cdata.release_rows(release, config)
        notes = list(rows.notes)
        if source is not None:
            notes.append(f"encoder initialised from {label}")
        train_rows = rows.rows["train"]
        needed = int(config["min_train_captions"])
        if len(train_rows) < needed:
            raise TrainingError(f"Too few captions to train: the release's train split has {len(train_rows)} "
                                f"usable caption(s), at least {needed} are needed.", code="too_few_labels")
        # Which classifier scored the data is part of what the run trained on: recorded on the run and
        # in the version's info, so a release of its captions can name it (None: fluency not used).
        fluency_version = self._fill_fluency(rows, strategy, notes) if strategy in strategies.NEEDS_FLUENCY else None
        vocab = Vocab.build([r["text"] for r in train_rows], int(config["min_count"]), int(config["max_tokens"]))
        eval_split = next((s for s in ("test", "val") if rows.rows[s]), "train")
        if eval_split == "train":
            notes.append("the release has no val/test items: metrics are computed on the train split")
        splits = {s: self._tensors(rows.rows[s], rows.images, vocab, int(config["max_tokens"])) for s in cdata.SPLITS}
        regime = strategies.informativeness_regime(release)
        info = {"vocab": vocab.to_json(), "decoder": self.decoder, "image_size": int(config["image_size"]),
                "max_tokens": int(config["max_tokens"]), "eval_split": eval_split, "strategy": strategy,
                "regime": "CWS" if config.get("encoder_version") and regime == "CS" else regime,
                "release": release.pk, "release_hash": release.content_hash,
                **{k: config[k] for k in MODEL_KEYS}}
        if fluency_version is not None:
            info["fluency_version"] = fluency_version
        train_f = splits["train"]["fluency"]
        summary = {s: {"captions": len(rows.rows[s]), "images": int(splits[s]["images"].shape[0])}
                   for s in cdata.SPLITS}
        summary.update({"vocabulary": len(vocab), "strategy": strategy, "regime": info["regime"],
                        "missing_images": len(rows.missing), "notes": notes, "fluency_version": fluency_version})
        if strategy in strategies.NEEDS_FLUENCY:
            summary["fluent_share"] = float((train_f > 0.5).float().mean()) if len(train_f) else 0.0
            if strategy == "fluency_only" and int((train_f > 0.5).sum()) < needed:
                raise TrainingError(f"Too few fluent captions for fluency-only training: {int((train_f > 0.5).sum())}"
                                    f" have f > 0.5, at least {needed} are needed.", code="too_few_labels")
        digest = cdata.data_hash(release, rows, {"strategy": strategy, "min_count": config["min_count"],
                                                 "image_size": config["image_size"]})
        return Prepared(splits["train"], splits["val"], splits["test"], info, digest, summary)

    @staticmethod
    def _fill_fluency(rows, strategy, notes) -> dict | None:
        """Score with the active fluency classifier the captions the release has no fluency score for;
        return the fluency version(s) that scored the data (modeling.captioning.provenance)."""
        every = [r for s in cdata.SPLITS for r in rows.rows[s]]
        todo = [r for r in every if r["fluency"] is None]
        classifier = None
        if not todo:
            notes.append("fluency scores from the release's fluency filter decisions")
        else:
            try:
                from modeling.fluency import resolve, score

                classifier = resolve()  # pinned: an activation meanwhile must not change what is recorded
                values = score([r["text"] for r in todo], version=classifier)
            except Exception as exc:  # no active fluency model, or FLUENCY's module absent
                raise TrainingError(f"Strategy {strategy!r} needs a fluency score for every caption: {len(todo)} "
                                    f"caption(s) have none in the release and the fluency model could not score "
                                    f"them ({exc}). Activate a fluency classifier or freeze the release from a run "
                                    "with a fluency filter.", code="bad_config") from None
            for r, f in zip(todo, values):
                r["fluency"] = float(f)
                r["fluency_by_classifier"] = True
            notes.append(f"{len(todo)} fluency score(s) from the active fluency classifier "
                         f"(fluency v{classifier.version})")
        return training_data_versions(every, classifier, len(todo))

    @staticmethod
    def _tensors(rows, cache, vocab, max_tokens):
        images, index = cdata.images_tensor([r["image_key"] for r in rows], cache)
        length = max_tokens + 2
        tokens = torch.zeros(len(rows), length, dtype=torch.long)
        for i, r in enumerate(rows):
            ids = vocab.encode(r["text"], max_tokens)
            tokens[i, :len(ids)] = torch.tensor(ids)
        refs: dict[int, list[str]] = {}
        image_ids: dict[int, int | None] = {}
        for r in rows:
            refs.setdefault(index[r["image_key"]], []).append(r["text"])
            image_ids.setdefault(index[r["image_key"]], r["image_id"])
        return {"images": images, "img": torch.tensor([index[r["image_key"]] for r in rows], dtype=torch.long),
                "tokens": tokens,
                "fluency": torch.tensor([1.0 if r["fluency"] is None else r["fluency"] for r in rows]),
                "refs": refs, "image_ids": [image_ids[i] for i in range(len(image_ids))]}

    # --- model ----------------------------------------------------------------------------------
    def build(self, config: dict, info: dict):
        config = self.config(config)
        sizes = {k: info.get(k, config[k]) for k in MODEL_KEYS}
        model = Captioner(len(info["vocab"]), info.get("decoder", self.decoder), int(sizes["feature_dim"]),
                          int(sizes["width"]), int(sizes["embed"]), int(sizes["hidden"]), float(sizes["dropout"]),
                          int(sizes["heads"]), int(sizes["layers"]), max_len=int(info.get("max_tokens", 15)) + 2)
        source, label = _encoder_source(config)
        # prepare() already refused a missing file; a later rebuild (registry, resume) overwrites these
        # weights anyway, so a file removed since then is no reason to fail there.
        if source is not None and not (isinstance(source, str) and not os.path.isfile(source)):
            load_encoder_weights(model.encoder, source, label)
        if config.get("freeze_encoder"):
            for p in model.encoder.parameters():
                p.requires_grad_(False)
        return model

    def batches(self, split_data, config, epoch, generator, train):
        n = int(split_data["tokens"].shape[0])
        if n == 0:
            return
        strategy = config.get("strategy", "all")
        chosen = torch.arange(n)
        if train:
            mask = strategies.keep_mask(split_data["fluency"], strategy, generator)
            chosen = chosen[mask]
            chosen = chosen[torch.randperm(len(chosen), generator=generator)]
        size = max(1, int(config.get("batch_size", 32)))
        for start in range(0, len(chosen), size):
            rows = chosen[start:start + size]
            yield {"images": split_data["images"][split_data["img"][rows]], "tokens": split_data["tokens"][rows],
                   "fluency": split_data["fluency"][rows]}

    def loss(self, model, batch, device, config):
        images = cdata.to_float(batch["images"].to(device, non_blocking=True))
        tokens = batch["tokens"].to(device, non_blocking=True)
        logits = model(images, tokens)
        nll = sentence_nll(logits, tokens)
        loss = strategies.batch_loss(nll, batch["fluency"].to(device), config.get("strategy", "all"))
        return loss, int(tokens.shape[0])

    # --- evaluation -----------------------------------------------------------------------------
    def generate(self, model, images, info, device, beam_size=5):
        """[(best text, [(text, score) x k])] for uint8 images [N, 3, S, S]."""
        vocab = Vocab.from_json(info["vocab"])
        was_training = model.training
        model.eval()
        out = []
        try:
            for image in images:
                cands = beam_search(model, cdata.to_float(image.to(device)), start_id=vocab.start_id,
                                    end_id=vocab.end_id, beam_size=beam_size, max_len=int(info["max_tokens"]) + 1)
                texts = [(vocab.decode(ids), float(score)) for ids, score in cands]
                out.append((texts[0][0] if texts else "", texts))
        finally:
            model.train(was_training)
        return out

    def evaluate(self, model, prepared, device, config):
        info = prepared.info
        split = getattr(prepared, info.get("eval_split", "test"))
        limit = int(config.get("max_eval_images", 200))
        images = split["images"][:limit]
        generated = self.generate(model, images, info, device, int(config.get("beam_size", 5)))
        candidates = {i: text for i, (text, _) in enumerate(generated)}
        references = {i: split["refs"][i] for i in candidates}
        scores = caption_metrics(references, candidates, meteor=bool(config.get("meteor", True)))
        scores.pop("skipped", None)
        div = diversity(list(candidates.values()), positions=int(info.get("max_tokens", 15)))
        scores["diversity"] = {"vocabulary": div["vocabulary"], "unique_captions": div["unique_captions"],
                               **{f"distinct_{n}": v for n, v in div["distinct_n"].items()},
                               **{f"position_{p + 1}": v for p, v in enumerate(div["unique_per_position"])}}
        scores["eval_images"] = len(candidates)
        return scores

    def finish(self, run, model, prepared, device, config):
        from modeling.captioning.metrics import SPICE_SKIPPED

        info = prepared.info
        split = getattr(prepared, info.get("eval_split", "test"))
        generated = self.generate(model, split["images"][:10], info, device, int(config.get("beam_size", 5)))
        return {"samples": [{"image": split["image_ids"][i], "text": text, "candidates": cands,
                             "references": split["refs"][i][:3]} for i, (text, cands) in enumerate(generated)],
                "regime": info.get("regime"), "strategy": info.get("strategy"),
                "metric_notes": [SPICE_SKIPPED] + ([] if config.get("meteor", True) else ["METEOR off"])}


@_with_torch
class TopicCNNTrainer(Trainer):
    """The image encoder trained to predict each image's LDA topic distribution (seed 000, Section 4:
    the topic model's distribution is the CNN's soft label, cross-entropy against it)."""

    kind = Kind.TOPIC_CNN
    name = "topic-cnn"
    default_config = {"epochs": 10, "batch_size": 32, "lr": 1e-3, "image_size": 64, "feature_dim": 128, "width": 32,
                      "topics_artifact": None, "missing_images": "fail", "min_images": 4}

    def prepare(self, run) -> Prepared:
        from curation.models import ImageTopics

        config = self.config(run.config)
        rows = cdata.release_rows(run.release, config)
        image_ids = {r["image_id"] for s in cdata.SPLITS for r in rows.rows[s]}
        topics = ImageTopics.objects.filter(image_id__in=image_ids)
        if config.get("topics_artifact"):
            topics = topics.filter(artifact_id=config["topics_artifact"])
        else:  # the newest artifact that labels this release's images (not another collection's)
            latest = topics.order_by("-artifact_id").values_list("artifact_id", flat=True).first()
            topics = topics.filter(artifact_id=latest)
        dist = {}
        for image_id, d in topics.values_list("image_id", "distribution"):
            dist[image_id] = d
        splits, counts = {}, {}
        k = None
        for s in cdata.SPLITS:
            seen = {}
            for r in rows.rows[s]:
                d = dist.get(r["image_id"])
                if d is not None and r["image_key"] not in seen:
                    vec = list(d.values()) if isinstance(d, dict) else list(d)
                    seen[r["image_key"]] = vec
                    k = k or len(vec)
            keys = list(seen)
            images, _ = cdata.images_tensor(keys, rows.images)
            target = torch.tensor([seen[key] for key in keys], dtype=torch.float32) if keys else torch.zeros(0, k or 1)
            target = target / target.sum(dim=1, keepdim=True).clamp_min(1e-8)
            splits[s] = {"images": images, "targets": target}
            counts[s] = len(keys)
        needed = int(config["min_images"])
        if counts["train"] < needed:
            raise TrainingError(f"Too few images with LDA topic distributions: {counts['train']} in the train split, "
                                f"at least {needed} are needed. Run the topics filter over the release's collection "
                                "first.", code="too_few_labels")
        info = {"topics": k, "image_size": int(config["image_size"]), "feature_dim": int(config["feature_dim"]),
                "width": int(config["width"])}
        digest = cdata.data_hash(run.release, rows, {"topics": config.get("topics_artifact"), "k": k})
        return Prepared(splits["train"], splits["val"], splits["test"], info, digest,
                        {**{s: {"images": counts[s]} for s in counts}, "topics": k, "notes": rows.notes})

    def build(self, config, info):
        from torch import nn

        class TopicCNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = ImageEncoder(int(info["feature_dim"]), int(info["width"]))
                self.head = nn.Linear(int(info["feature_dim"]), int(info["topics"]))

            def forward(self, images):
                return self.head(self.encoder(images)[0])

        return TopicCNN()

    def batches(self, split_data, config, epoch, generator, train):
        n = int(split_data["images"].shape[0])
        order = torch.randperm(n, generator=generator) if train else torch.arange(n)
        size = max(1, int(config.get("batch_size", 32)))
        for start in range(0, n, size):
            rows = order[start:start + size]
            yield {"images": split_data["images"][rows], "targets": split_data["targets"][rows]}

    def loss(self, model, batch, device, config):
        logits = model(cdata.to_float(batch["images"].to(device)))
        target = batch["targets"].to(device)
        loss = -(target * F.log_softmax(logits.float(), dim=-1)).sum(dim=1).mean()
        return loss, int(target.shape[0])

    def evaluate(self, model, prepared, device, config):
        split = prepared.test if prepared.test["images"].shape[0] else (
            prepared.val if prepared.val["images"].shape[0] else prepared.train)
        model.eval()
        with torch.no_grad():
            logits = model(cdata.to_float(split["images"].to(device))).float()
            target = split["targets"].to(device)
            ce = float(-(target * F.log_softmax(logits, -1)).sum(1).mean())
            top1 = float((logits.argmax(1) == target.argmax(1)).float().mean())
        model.train()
        return {"cross_entropy": ce, "top1_topic_agreement": top1}


register(CaptionerTrainer("lstm"))
register(CaptionerTrainer("transformer"))
register(TopicCNNTrainer())
