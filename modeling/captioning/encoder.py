"""A small CNN image encoder in plain PyTorch, trained from scratch, or initialised from a local
state-dict file (nothing is ever downloaded). Weight files are read with
``torch.load(..., weights_only=True)``: a pickle holding arbitrary objects is refused, never run."""
from __future__ import annotations

import io
import os
import pickle

import torch
from torch import nn

from modeling.trainers.base import TrainingError


class ImageEncoder(nn.Module):
    """Four conv blocks (conv-BN-ReLU, stride 2) -> a grid of features and their mean.

    ``forward`` returns ``(pooled [B, dim], grid [B, H*W, dim])``; the LSTM decoder uses the pooled
    vector (Show-and-Tell's CNN(I)), the Transformer decoder attends over the grid."""

    def __init__(self, dim: int = 128, width: int = 32):
        super().__init__()
        chans = [3, width, width * 2, width * 4, dim]
        layers = []
        for cin, cout in zip(chans, chans[1:]):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout),
                       nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*layers)
        self.dim = dim

    def forward(self, images):
        grid = self.body(images)  # [B, dim, h, w]
        grid = grid.flatten(2).transpose(1, 2)  # [B, h*w, dim]
        return grid.mean(dim=1), grid


def read_state_dict(source, label: str) -> dict:
    """A state dict from a path or bytes, loaded weights-only. Raises TrainingError(code="bad_weights")."""
    try:
        if isinstance(source, (bytes, bytearray)):
            obj = torch.load(io.BytesIO(source), map_location="cpu", weights_only=True)
        else:
            if not os.path.isfile(source):
                raise TrainingError(f"The encoder weights file {label} does not exist on this worker.",
                                    code="bad_weights")
            obj = torch.load(source, map_location="cpu", weights_only=True)
    except TrainingError:
        raise
    except pickle.UnpicklingError as exc:
        raise TrainingError(f"The weights file {label} holds more than tensors and was refused (only plain "
                            f"state dicts are loaded, with weights_only=True): {str(exc).splitlines()[0]}",
                            code="bad_weights") from None
    except Exception as exc:  # truncated zip, not a torch file at all, ...  # noqa: BLE001
        raise TrainingError(f"The weights file {label} is not a readable PyTorch state dict "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'corrupt'}).",
                            code="bad_weights") from None
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
        obj = obj["model"]  # an engine artifact or checkpoint
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise TrainingError(f"The weights file {label} is not a state dict (a mapping of names to tensors).",
                            code="bad_weights")
    return obj


def encoder_part(state: dict) -> dict:
    """The encoder's entries of a state dict saved from an encoder, a topic CNN or a whole captioner."""
    for prefix in ("encoder.", "module.encoder."):
        if any(k.startswith(prefix) for k in state):
            return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    return dict(state)


def load_encoder_weights(encoder: ImageEncoder, source, label: str | None = None) -> None:
    """Load weights into ``encoder`` strictly; mismatched names or shapes -> TrainingError."""
    label = label or repr(str(source) if not isinstance(source, (bytes, bytearray)) else "<bytes>")
    state = encoder_part(read_state_dict(source, label))
    own = encoder.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
              for k in own if k in state and state[k].shape != own[k].shape]
    if missing or unexpected or shapes:
        parts = []
        if shapes:
            parts.append("shape mismatch " + "; ".join(shapes[:3]))
        if missing:
            parts.append(f"{len(missing)} missing (e.g. {', '.join(missing[:3])})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected (e.g. {', '.join(unexpected[:3])})")
        raise TrainingError(f"The encoder weights {label} do not match this encoder (dim {encoder.dim}): "
                            + "; ".join(parts) + ". Use weights saved from an encoder of the same sizes.",
                            code="bad_weights")
    encoder.load_state_dict(state, strict=True)
