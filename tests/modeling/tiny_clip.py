"""A tiny CLIP directory in the Hugging Face format the model pack loads (config.json, model.safetensors, the
image processor's and the tokenizer's files), built here with random weights so tests need no download.

``build_tiny_clip(path)`` writes it and returns the path. The tokenizer is a byte-level BPE trained on a few
caption words, so different captions get different token ids (and different vectors)."""
from __future__ import annotations

from pathlib import Path

CORPUS = ["a dog runs on the beach", "a cat sleeps on a sofa", "people walk in a city street at night",
          "a red car parked near a building", "a plate of food on a table", "mountains under a blue sky",
          "a bird on a tree branch", "a boat on the water", "children play football in a park"]


def _tokenizer(path: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<|endoftext|>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|startoftext|>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(CORPUS * 3, trainer)
    bos, eos = core.token_to_id("<|startoftext|>"), core.token_to_id("<|endoftext|>")
    core.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", bos), ("<|endoftext|>", eos)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", unk_token="<|endoftext|>", model_max_length=32)


def build_tiny_clip(path: Path, *, image_size: int = 32, projection_dim: int = 16, seed: int = 0) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(path)
    torch.manual_seed(seed)
    config = CLIPConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=32,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=image_size, patch_size=8),
        projection_dim=projection_dim)
    CLIPModel(config).eval().save_pretrained(path, safe_serialization=True)
    CLIPImageProcessorPil(size={"shortest_edge": image_size},
                       crop_size={"height": image_size, "width": image_size}).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_siglip(path: Path, *, image_size: int = 32, seed: int = 0) -> Path:
    """A tiny SigLIP directory (sigmoid-loss image-text model; the pack loads it like CLIP)."""
    import torch
    from transformers import SiglipConfig, SiglipImageProcessorPil, SiglipModel

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(path)
    torch.manual_seed(seed)
    special = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                   pad_token_id=tokenizer.pad_token_id)
    config = SiglipConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=32, projection_size=32, **special),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=image_size, patch_size=8))
    SiglipModel(config).eval().save_pretrained(path, safe_serialization=True)
    SiglipImageProcessorPil(size={"height": image_size, "width": image_size}).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
