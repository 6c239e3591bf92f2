"""Captioner trainers on a frozen Release: "captioner-lstm" (Show-and-Tell) and "captioner-transformer".

The image side is the small CNN trained from scratch (optionally initialised from a topic CNN, seed 000's CWS, or
a state-dict file), or a pretrained encoder from the model pack, frozen (the decoder learns from the feature
cache, large batches, no image decoded per epoch) or fine-tuned (captioner_encoders). The topic CNN itself is
trained by topic_cnn.py.
"""
from __future__ import annotations

import math
import os

from modeling.captioning.provenance import training_data_versions
from modeling.captioning.vocab import MAX_TOKENS, Vocab
from modeling.models import Kind

from . import register
from .base import Prepared, Trainer, TrainingError
from .lazy import with_loader

# torch and the modules built on it are imported when a trainer method first runs, not when the trainer
# registers: the web process lists trainers (the new-run form) and must not load torch (benchmarks/web_memory.py).
torch = cdata = strategies = beam_search = Captioner = sentence_nll = ImageEncoder = load_encoder_weights = None
caption_metrics = diversity = cd = encoders = pretrained = image_loader = judge = None


def _load_torch() -> None:
    global torch
    if torch is not None:
        return
    import torch as _torch

    from modeling.captioning import data, metrics
    from modeling.captioning import image_loader as _image_loader
    from modeling.captioning import pretrained as _pretrained
    from modeling.captioning import strategies as _strategies
    from modeling.captioning.beam import beam_search as _beam_search
    from modeling.captioning.decoders import Captioner as _Captioner
    from modeling.captioning.decoders import sentence_nll as _sentence_nll
    from modeling.captioning.encoder import ImageEncoder as _ImageEncoder
    from modeling.captioning.encoder import load_encoder_weights as _load_weights

    from . import captioner_data, captioner_encoders, captioner_judge

    globals().update(judge=captioner_judge, cdata=data, strategies=_strategies, beam_search=_beam_search, Captioner=_Captioner,
                     sentence_nll=_sentence_nll, ImageEncoder=_ImageEncoder, load_encoder_weights=_load_weights,
                     caption_metrics=metrics.caption_metrics, diversity=metrics.diversity, cd=captioner_data,
                     encoders=captioner_encoders, pretrained=_pretrained, image_loader=_image_loader)
    torch = _torch  # last: it marks the rest as loaded


MODEL_KEYS = ("feature_dim", "width", "embed", "hidden", "dropout", "heads", "layers")
FROZEN_BATCH_SIZE = 256  # decoder steps on cached features are cheap: large batches keep a GPU busy
EVAL_CHUNK = 64  # images whose inputs are gathered (or decoded) at a time while evaluating


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


@with_loader(_load_torch)
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
            # A pretrained encoder from the model pack ("": the small CNN above, from scratch) and how it is used.
            "encoder": "", "encoder_mode": "frozen", "finetune_blocks": 2, "encoder_lr_scale": 0.1,
            "encoder_image_size": 0, "feature_grid": 0, "loader_workers": -1, "cache_batch_size": 64,
            # Too little data to learn from is refused, not registered (min_count words of the train split).
            "min_train_captions": 50, "min_vocabulary": 20,
            "max_eval_images": 0, "meteor": True,
            # Training a researcher can trust: warm-up then cosine decay, stop when the validation loss has not
            # improved for 3 epochs (the engine evaluates the best-validation weights), CLIPScore and RefCLIPScore
            # beside the n-gram metrics when an image-text model is registered.
            "lr_schedule": "cosine", "warmup_fraction": 0.05, "min_lr_ratio": 0.1, "early_stopping_patience": 3,
            "clip_score": True,
            # Trivial captioners on the same test images (captioner_judge): the most frequent training caption,
            # nearest-neighbour retrieval over the model's image features (k neighbours), the raw source text.
            "baselines": True, "retrieval_k": 30,
        }

    def config(self, overrides: dict | None = None) -> dict:
        """As Trainer.config; a frozen pretrained encoder's default batch is FROZEN_BATCH_SIZE."""
        merged = super().config(overrides)
        if merged.get("encoder") and merged.get("encoder_mode") == "frozen" and "batch_size" not in (overrides or {}):
            merged["batch_size"] = FROZEN_BATCH_SIZE
        return merged

    # --- data -----------------------------------------------------------------------------------
    def prepare(self, run) -> Prepared:
        config = self.config(run.config)
        strategy = config["strategy"]
        if strategy not in strategies.STRATEGIES:
            raise TrainingError(f"Unknown strategy {strategy!r}; use one of {', '.join(strategies.STRATEGIES)}.",
                                code="bad_config")
        encoders.check_config(config, self.decoder)
        source, label = _encoder_source(config)
        if source is not None:  # refuse a missing, corrupt or mismatched file before reading any image
            load_encoder_weights(ImageEncoder(int(config["feature_dim"]), int(config["width"])), source, label)
        release = run.release
        encoder = row = settings = None
        if config["encoder"]:
            row, _, encoder, settings = encoders.spec(config, self.decoder)
        rows = cdata.release_rows(release, config, decode=encoder is None)
        notes = list(rows.notes)
        if source is not None:
            notes.append(f"encoder initialised from {label}")
        cached = self._image_side(run, rows, row, encoder, settings, config, notes)
        train_rows = rows.rows["train"]
        cd.check_enough(train_rows, None, config)
        # Which classifier scored the data is part of what the run trained on: recorded on the run and
        # in the version's info, so a release of its captions can name it (None: fluency not used).
        fluency_version = self._fill_fluency(rows, strategy, notes) if strategy in strategies.NEEDS_FLUENCY else None
        vocab = Vocab.build([r["text"] for r in train_rows], int(config["min_count"]), int(config["max_tokens"]))
        cd.check_enough(train_rows, vocab, config)
        eval_split = next((s for s in ("test", "val") if rows.rows[s]), "train")
        if eval_split == "train":
            notes.append("the release has no val/test items: metrics are computed on the train split")
        if len(train_rows) < int(config["batch_size"]):
            notes.append(f"batch size {config['batch_size']} is more than the {len(train_rows)} train captions: "
                         "one batch per epoch")
        splits = {s: self._split(rows, s, vocab, int(config["max_tokens"]), cached, encoder)
                  for s in cdata.SPLITS}
        regime = strategies.informativeness_regime(release)
        info = {"vocab": vocab.to_json(), "decoder": self.decoder, "image_size": int(config["image_size"]),
                "max_tokens": int(config["max_tokens"]), "eval_split": eval_split, "strategy": strategy,
                "regime": "CWS" if config.get("encoder_version") and regime == "CS" else regime,
                "release": release.pk, "release_hash": release.content_hash,
                **{k: config[k] for k in MODEL_KEYS}}
        if encoder is not None:
            info["encoder"] = encoder
        if fluency_version is not None:
            info["fluency_version"] = fluency_version
        summary = self._summary(rows, splits, vocab, info, notes, eval_split, fluency_version)
        if strategy in strategies.NEEDS_FLUENCY:
            train_f = splits["train"]["fluency"]
            summary["fluent_share"] = float((train_f > 0.5).float().mean()) if len(train_f) else 0.0
            needed = int(config["min_train_captions"])
            if strategy == "fluency_only" and int((train_f > 0.5).sum()) < needed:
                raise TrainingError(f"Too few fluent captions for fluency-only training: {int((train_f > 0.5).sum())}"
                                    f" have f > 0.5, at least {needed} are needed.", code="too_few_labels")
        extra = {"strategy": strategy, "min_count": config["min_count"], "image_size": config["image_size"]}
        if encoder is not None:
            extra["encoder"] = [encoder["key"], encoder["preprocessing"], encoder["mode"], encoder["grid_side"]]
        digest = cdata.data_hash(release, rows, extra)
        return Prepared(splits["train"], splits["val"], splits["test"], info, digest, summary)

    def _image_side(self, run, rows, row, encoder, settings, config, notes):
        """Drop the rows whose images a pretrained encoder cannot read (or fail, per missing_images); the
        frozen encoder's cached features."""
        if encoder is None:
            return None
        if encoder["mode"] == "frozen":
            from modeling.engine.device import pick_device

            device = pick_device(str(config.get("device", "auto"))).type
            rows.rows, cached, rows.missing = encoders.frozen_side(run.release, rows.rows, row, encoder, settings,
                                                                   config, device, notes)
            return cached
        missing, present = cd.missing_files(rows.rows)
        rows.rows = cd.apply_missing(rows.rows, missing, present, config, run.release, notes)
        rows.missing = missing
        return None

    def _split(self, rows, split, vocab, max_tokens, cached, encoder) -> dict:
        data, order = cd.caption_tensors(rows.rows[split], vocab, max_tokens)
        if cached is not None:
            encoders.attach_features(data, order, cached, self.decoder)
        elif encoder is not None:  # fine-tuning: decoded through the encoder's processor every epoch
            files = {r["image_key"]: r["image_file"] for r in rows.rows[split]}
            data["files"] = [files[key] for key in order]
        else:
            data["images"], _ = cdata.images_tensor(order, rows.images)
        return data

    @staticmethod
    def _summary(rows, splits, vocab, info, notes, eval_split, fluency_version) -> dict:
        summary = {s: {"captions": len(rows.rows[s]), "images": cd.image_count(splits[s])} for s in cdata.SPLITS}
        summary.update({"vocabulary": len(vocab), "strategy": info["strategy"], "regime": info["regime"],
                        "missing_images": len(rows.missing), "notes": notes, "fluency_version": fluency_version,
                        "test_references": cd.test_references(rows.rows[eval_split])})
        encoder = info.get("encoder")
        if encoder:
            summary["encoder"] = {k: encoder.get(k) for k in ("name", "key", "mode", "preprocessing", "feature_cache",
                                                               "finetune_blocks")}
        return summary

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
            except Exception as exc:  # no active fluency model, or FLUENCY's module absent  # noqa: BLE001
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

    # --- model ----------------------------------------------------------------------------------
    def build(self, config: dict, info: dict):
        config = self.config(config)
        sizes = {k: info.get(k, config[k]) for k in MODEL_KEYS}
        encoder = info.get("encoder") or {}
        model = Captioner(len(info["vocab"]), info.get("decoder", self.decoder), int(sizes["feature_dim"]),
                          int(sizes["width"]), int(sizes["embed"]), int(sizes["hidden"]), float(sizes["dropout"]),
                          int(sizes["heads"]), int(sizes["layers"]), max_len=int(info.get("max_tokens", 15)) + 2,
                          encoder=encoders.build_encoder(info), pooled_dim=encoder.get("pooled_dim"),
                          grid_dim=encoder.get("grid_dim"), grid_side=int(encoder.get("grid_side") or 0))
        if encoder:
            return model
        source, label = _encoder_source(config)
        # prepare() already refused a missing file; a later rebuild (registry, resume) overwrites these
        # weights anyway, so a file removed since then is no reason to fail there.
        if source is not None and not (isinstance(source, str) and not os.path.isfile(source)):
            load_encoder_weights(model.encoder, source, label)
        if config.get("freeze_encoder"):
            for p in model.encoder.parameters():
                p.requires_grad_(False)
        return model

    def optimizer(self, model, config: dict):
        """Fine-tuning: the encoder's trainable blocks at ``encoder_lr_scale`` x lr, the decoder at lr."""
        if not (config.get("encoder") and config.get("encoder_mode") == "finetune"):
            return super().optimizer(model, config)
        lr = float(config.get("lr", 1e-3))
        encoder, rest = encoders.encoder_parameters(model)
        groups = [{"params": rest, "lr": lr}]
        if encoder:
            groups.append({"params": encoder, "lr": lr * float(config.get("encoder_lr_scale", 0.1))})
        return torch.optim.Adam(groups, lr=lr, weight_decay=float(config.get("weight_decay", 0.0)))

    def batches(self, split_data, config, epoch, generator, train):
        if int(split_data["tokens"].shape[0]) == 0:
            return
        chosen = cd.batch_rows(split_data, config, generator, train)
        size = max(1, int(config.get("batch_size", 32)))
        if "files" in split_data:
            yield from self._image_batches(split_data, chosen, size, config)
            return
        resident = cd.on_gpu(split_data, config) if "pooled" in split_data else None
        if resident is not None:  # the whole cached split sits in GPU memory: batches are gathered there
            split_data, chosen = resident, chosen.to(resident["tokens"].device)
        pin = resident is None and "pooled" in split_data and split_data["pooled"].is_pinned()
        for start in range(0, len(chosen), size):
            rows = chosen[start:start + size]
            img = split_data["img"][rows]
            batch = {"tokens": split_data["tokens"][rows], "fluency": split_data["fluency"][rows]}
            if "pooled" in split_data:
                batch["pooled"], batch["grid"] = split_data["pooled"][img], split_data["grid"][img]
                if pin:  # so that the copy to the GPU does not wait
                    batch["pooled"], batch["grid"] = batch["pooled"].pin_memory(), batch["grid"].pin_memory()
            else:
                batch["images"] = split_data["images"][img]
            yield batch

    def _image_batches(self, split_data, chosen, size, config):
        """Fine-tuning: each caption's image decoded by DataLoader workers through the encoder's processor."""
        processor = self._processor(config)
        names = [split_data["files"][int(i)] for i in split_data["img"]]
        loader = image_loader.image_batches(names, processor, batch_size=size, order=chosen.tolist(),
                                            workers=int(config.get("loader_workers", -1)),
                                            pin=torch.cuda.is_available() and config.get("device") != "cpu")
        for index, values, _ in loader:
            if values is not None:  # an image gone since prepare() is left out of its batch
                yield {"pixels": values, "tokens": split_data["tokens"][index], "fluency": split_data["fluency"][index]}

    @staticmethod
    def _processor(config):
        return pretrained.processor_for(pretrained.model_row(config["encoder"]),
                                        int(config.get("encoder_image_size") or 0))

    def count_batches(self, split_data, config) -> int:
        """The engine's step count for the lr schedule and the loss chart, without a dry pass over the images."""
        n = int(split_data["tokens"].shape[0])
        if config.get("strategy") == "fluency_only":
            n = int((split_data["fluency"] > 0.5).sum())
        return math.ceil(n / max(1, int(config.get("batch_size", 32))))

    def loss(self, model, batch, device, config):
        if "pooled" in batch:
            inputs = (batch["pooled"].to(device, non_blocking=True).float(),
                      batch["grid"].to(device, non_blocking=True).float())
        elif "pixels" in batch:
            inputs = batch["pixels"].to(device, non_blocking=True)
        else:
            inputs = cdata.to_float(batch["images"].to(device, non_blocking=True))
        tokens = batch["tokens"].to(device, non_blocking=True)
        logits = model(inputs, tokens)
        nll = sentence_nll(logits, tokens)
        loss = strategies.batch_loss(nll, batch["fluency"].to(device), config.get("strategy", "all"))
        return loss, int(tokens.shape[0])

    # --- evaluation -----------------------------------------------------------------------------
    def images_for(self, names: list[str], info: dict):
        """The model's image input for storage names: uint8 [N, 3, S, S] for the small CNN, the pretrained
        encoder's processor pixels otherwise (the generation job calls this)."""
        encoder = info.get("encoder")
        if not encoder:
            return torch.stack([cdata.load_image(name, int(info["image_size"])) for name in names])
        processor = pretrained.processor_for(pretrained.model_row(encoder["name"]), int(encoder.get("image_size") or 0))
        index, values, failed = image_loader.collate([image_loader.ImageFiles(names, processor)[i]
                                                      for i in range(len(names))])
        if failed:
            raise TrainingError(f"{len(failed)} image(s) cannot be read: {', '.join(e for _, e in failed[:5])}",
                                code="missing_images")
        return values

    def generate(self, model, images, info, device, beam_size=5):
        """[(best text, [(text, score) x k])] per image: ``images`` uint8 [N, 3, S, S] (small CNN), pixel values
        [N, 3, H, W] (a pretrained encoder) or the cached features (pooled [N, D], grid [N, R, D])."""
        vocab = Vocab.from_json(info["vocab"])
        cached = isinstance(images, (tuple, list))
        n = int(images[0].shape[0]) if cached else int(images.shape[0])
        was_training = model.training
        model.eval()
        out = []
        try:
            for i in range(n):
                if cached:
                    one = (images[0][i:i + 1].to(device).float(), images[1][i:i + 1].to(device).float())
                elif images.dtype == torch.uint8:
                    one = cdata.to_float(images[i].to(device))
                else:
                    one = images[i].to(device)
                cands = beam_search(model, one, start_id=vocab.start_id, end_id=vocab.end_id, beam_size=beam_size,
                                    max_len=int(info["max_tokens"]) + 1)
                texts = [(vocab.decode(ids), float(score)) for ids, score in cands]
                out.append((texts[0][0] if texts else "", texts))
        finally:
            model.train(was_training)
        return out

    def _generate_split(self, model, split, info, device, count, beam_size):
        out = []
        for start in range(0, count, EVAL_CHUNK):
            chunk = cd.inputs(split, start, min(count, start + EVAL_CHUNK), lambda names: self.images_for(names, info))
            out += self.generate(model, chunk, info, device, beam_size)
        return out

    def evaluate(self, model, prepared, device, config):
        """Scores on the whole evaluation split unless ``max_eval_images`` caps it (the cap is recorded)."""
        info = prepared.info
        split = getattr(prepared, info.get("eval_split", "test"))
        total = cd.image_count(split)
        cap = int(config.get("max_eval_images") or 0)
        count = min(total, cap) if cap else total
        generated = self._generate_split(model, split, info, device, count, int(config.get("beam_size", 5)))
        candidates = {i: text for i, (text, _) in enumerate(generated)}
        references = {i: split["refs"][i] for i in candidates}
        scores = caption_metrics(references, candidates, meteor=bool(config.get("meteor", True)), per_image=True)
        scores.pop("skipped", None)
        per_image = scores.pop("per_image")
        div = diversity(list(candidates.values()), positions=int(info.get("max_tokens", 15)))
        scores["diversity"] = {"vocabulary": div["vocabulary"], "unique_captions": div["unique_captions"],
                               **{f"distinct_{n}": v for n, v in div["distinct_n"].items()},
                               **{f"position_{p + 1}": v for p, v in enumerate(div["unique_per_position"])}}
        clip_each = None
        if config.get("clip_score", True):
            clip = self._clip_scores(split, candidates, references)
            clip_each = clip.pop("_per_image", None)
            scores.update(clip)
        scores["intervals"] = judge.intervals(per_image, clip_each)
        if config.get("baselines", True):
            scores.update(judge.judge(model, prepared, split, candidates, references, per_image, device, config,
                                      lambda names: self.images_for(names, info)))
        scores["eval_images"] = len(candidates)
        scores["eval_images_total"] = total
        if cap:
            scores["eval_cap"] = cap
        return scores

    @staticmethod
    def _clip_scores(split, candidates: dict, references: dict) -> dict:
        """CLIP-S and RefCLIP-S (Hessel et al. 2021) of the generated captions, by the registered image-text
        model, with the human references' CLIP-S by the same model as their reference value and a note naming it;
        nothing when none is registered (the n-gram metrics stand alone then)."""
        from modeling.captioning.clipscore import clip_note, clip_scores

        ids = {i: split["image_ids"][i] for i in candidates if split["image_ids"][i] is not None}
        if not ids:
            return {}
        found = clip_scores(None, list(ids.values()), {ids[i]: candidates[i] for i in ids},
                            {ids[i]: references[i] for i in ids}, per_image=True)
        out = {k: found[k] for k in ("CLIP-S", "RefCLIP-S") if k in found}
        if "CLIP-S" in found:
            out["clip"] = {"references_CLIP-S": found.get("references_CLIP-S"), "model": found["clip_model"],
                           "note": clip_note(found["clip_model"], found.get("references_CLIP-S"))}
            out["_per_image"] = [row["clip_s"] for row in found["per_image"].values()]
        return out

    def finish(self, run, model, prepared, device, config):
        from modeling.captioning.metrics import SPICE_SKIPPED

        info = prepared.info
        split = getattr(prepared, info.get("eval_split", "test"))
        count = min(10, cd.image_count(split))
        generated = self._generate_split(model, split, info, device, count, int(config.get("beam_size", 5)))
        notes = [SPICE_SKIPPED] + ([] if config.get("meteor", True) else ["METEOR off"])
        total, cap = cd.image_count(split), int(config.get("max_eval_images") or 0)
        if cap and cap < total:
            notes.append(f"metrics on the first {cap} of {total} {info.get('eval_split', 'test')} images "
                         "(max_eval_images)")
        extras = {"samples": [{"image": split["image_ids"][i], "text": text, "candidates": cands,
                               "references": split["refs"][i][:3]} for i, (text, cands) in enumerate(generated)],
                  "regime": info.get("regime"), "strategy": info.get("strategy"), "metric_notes": notes}
        if info.get("encoder"):
            extras["encoder"] = {k: info["encoder"].get(k) for k in ("name", "key", "mode", "preprocessing")}
        return extras


register(CaptionerTrainer("lstm"))
register(CaptionerTrainer("transformer"))
