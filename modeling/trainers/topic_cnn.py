"""The "topic-cnn" trainer: the image encoder trained on the images' LDA topic distributions (seed 000's weak
supervision, CWS), whose weights a captioner run can start from (the captioner's config "encoder_version")."""
from __future__ import annotations

from modeling.models import Kind

from . import register
from .base import Prepared, Trainer, TrainingError
from .lazy import with_loader

torch = F = cdata = ImageEncoder = None


def _load_torch() -> None:
    global torch, F, cdata, ImageEncoder
    if torch is not None:
        return
    import torch as _torch
    from torch.nn import functional as _F

    from modeling.captioning import data as _cdata
    from modeling.captioning.encoder import ImageEncoder as _ImageEncoder

    torch, F, cdata, ImageEncoder = _torch, _F, _cdata, _ImageEncoder


@with_loader(_load_torch)
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


register(TopicCNNTrainer())
