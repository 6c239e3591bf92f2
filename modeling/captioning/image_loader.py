"""Images from storage through a model's image processor, decoded by DataLoader workers so the GPU does not wait on
PIL. Used by the feature cache (once per release and encoder) and by fine-tuning (every epoch).

An image that cannot be read comes back as a failure (its index and why), never as a crash of the batch; the
caller counts it. Workers touch storage only, never the database (a forked worker must not use the parent's
connection).
"""
from __future__ import annotations

import io
import os

import torch
from django.core.files.storage import default_storage
from PIL import Image as PILImage
from torch.utils.data import DataLoader, Dataset


def default_workers() -> int:
    """One core is left to the training process itself."""
    return max(0, min(8, (os.cpu_count() or 1) - 1))


class ImageFiles(Dataset):
    """Item i: (i, pixel tensor [3, H, W] or None, error or "")."""

    def __init__(self, names: list[str], processor):
        self.names, self.processor = list(names), processor

    def __len__(self):
        return len(self.names)

    def __getitem__(self, index):
        name = self.names[index]
        try:
            with default_storage.open(name, "rb") as handle:
                data = handle.read()
            with PILImage.open(io.BytesIO(data)) as image:
                values = self.processor(images=[image.convert("RGB")], return_tensors="pt")["pixel_values"][0]
            return index, values, ""
        except FileNotFoundError:
            return index, None, f"{name} (missing)"
        except Exception as exc:  # noqa: BLE001 - unreadable bytes count as missing, with the reason
            return index, None, f"{name} ({type(exc).__name__}: {exc})"


def collate(items):
    """(indices of the decoded images [n], pixels [n, 3, H, W] or None, [(index, error)])."""
    good = [(i, v) for i, v, _ in items if v is not None]
    failed = [(i, e) for i, v, e in items if v is None]
    index = torch.tensor([i for i, _ in good], dtype=torch.long)
    values = torch.stack([v for _, v in good]) if good else None
    return index, values, failed


def image_batches(names: list[str], processor, *, batch_size: int, workers: int | None = None, pin: bool = False,
                  order=None):
    """A DataLoader over ``names`` in ``order`` (a list of indices; default: as given), ``collate``'s batches."""
    workers = default_workers() if workers is None or int(workers) < 0 else int(workers)
    sampler = list(range(len(names))) if order is None else [int(i) for i in order]
    return DataLoader(ImageFiles(names, processor), batch_size=max(1, int(batch_size)), sampler=sampler,
                      num_workers=workers, collate_fn=collate, pin_memory=pin,
                      prefetch_factor=4 if workers else None, persistent_workers=False)
