"""Tiny image encoders in the Hugging Face formats the model pack registers as kind "vision" (config.json,
model.safetensors, preprocessor_config.json), with random weights, so captioner tests need no download."""
from __future__ import annotations

from pathlib import Path


def build_tiny_vit(path: Path, *, image_size: int = 32, seed: int = 0) -> Path:
    """A 2-block ViT, 8 px patches: at 32 px, a CLS token and 16 patch tokens of 16 features."""
    import torch
    from transformers import ViTConfig, ViTImageProcessorPil, ViTModel

    path = Path(path)
    torch.manual_seed(seed)
    config = ViTConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                       image_size=image_size, patch_size=8)
    ViTModel(config, add_pooling_layer=False).eval().save_pretrained(path, safe_serialization=True)
    ViTImageProcessorPil(size={"height": image_size, "width": image_size}).save_pretrained(path)
    return path


def build_tiny_resnet(path: Path, *, image_size: int = 32, seed: int = 0) -> Path:
    """A 2-stage basic-block ResNet: at 32 px a 4 x 4 map of 16 channels, pooled to 16 features."""
    import torch
    from transformers import ConvNextImageProcessorPil, ResNetConfig, ResNetModel

    path = Path(path)
    torch.manual_seed(seed)
    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")
    ResNetModel(config).eval().save_pretrained(path, safe_serialization=True)
    ConvNextImageProcessorPil(size={"shortest_edge": image_size}, crop_pct=1.0).save_pretrained(path)
    return path


def register(models_dir: Path, name: str, builder, **kwargs):
    """Build the directory under the models dir and register it through the pack (the PretrainedModel row)."""
    import pack

    builder(models_dir / name, **kwargs)
    return pack.model_add_pretrained(directory=name, name=name, licence="MIT (random test weights)",
                                     source="built by tests/modeling/tiny_vision.py")
