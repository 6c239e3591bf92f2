"""Decoders and the whole captioner.

ShowAndTell (seed 004 Section 3.2, after Vinyals et al.): the image embedding x_{-1} = W_v CNN(I) is
fed once to initialise the LSTM's memory, then the words; a softmax over the vocabulary at each step.
TransformerCaptioner: a causal Transformer decoder attending over the encoder's feature grid.

Both expose the same step interface for beam search: ``start(images) -> state``,
``step(tokens [N], state) -> (log_probs [N, V], state)``, ``select(state, index) -> state``.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .encoder import ImageEncoder


class ShowAndTell(nn.Module):
    def __init__(self, vocab_size: int, feature_dim: int, embed: int = 256, hidden: int = 256,
                 dropout: float = 0.3):
        super().__init__()
        self.image_proj = nn.Linear(feature_dim, embed)
        self.embed = nn.Embedding(vocab_size, embed, padding_idx=0)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, pooled, grid, tokens_in):
        """Teacher forcing: logits [B, T, V] for predicting tokens_in shifted by one."""
        x_img = self.image_proj(pooled).unsqueeze(1)
        x = torch.cat([x_img, self.embed(tokens_in)], dim=1)
        h, _ = self.lstm(self.drop(x))
        return self.out(self.drop(h[:, 1:]))

    def start(self, pooled, grid):
        _, state = self.lstm(self.image_proj(pooled).unsqueeze(1))
        return state

    def step(self, tokens, state):
        h, state = self.lstm(self.embed(tokens).unsqueeze(1), state)
        return F.log_softmax(self.out(h[:, -1]).float(), dim=-1), state

    @staticmethod
    def select(state, index):
        h, c = state
        return h[:, index], c[:, index]


class TransformerCaptioner(nn.Module):
    def __init__(self, vocab_size: int, feature_dim: int, d_model: int = 256, heads: int = 4, layers: int = 2,
                 ff: int = 512, dropout: float = 0.1, max_len: int = 32):
        super().__init__()
        self.memory_proj = nn.Linear(feature_dim, d_model)
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerDecoderLayer(d_model, heads, ff, dropout, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(layer, layers)
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, vocab_size)
        self.d_model = d_model
        self.max_len = max_len

    def _decode(self, memory, tokens):
        t = tokens.shape[1]
        positions = torch.arange(t, device=tokens.device)
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.pos(positions)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tokens.device), diagonal=1)
        pad = tokens == 0
        h = self.decoder(x, memory, tgt_mask=mask, tgt_key_padding_mask=pad if pad.any() else None)
        return self.out(self.norm(h))

    def forward(self, pooled, grid, tokens_in):
        return self._decode(self.memory_proj(grid), tokens_in)

    def start(self, pooled, grid):
        memory = self.memory_proj(grid)
        return memory, torch.empty(memory.shape[0], 0, dtype=torch.long, device=memory.device)

    def step(self, tokens, state):
        memory, prefix = state
        prefix = torch.cat([prefix, tokens.unsqueeze(1)], dim=1)
        logits = self._decode(memory, prefix)[:, -1]
        return F.log_softmax(logits.float(), dim=-1), (memory, prefix)

    @staticmethod
    def select(state, index):
        memory, prefix = state
        return memory[index], prefix[index]


DECODERS = {"lstm": ShowAndTell, "transformer": TransformerCaptioner}


class Captioner(nn.Module):
    """Encoder + decoder. ``forward(inputs, tokens)`` with tokens = [START w1 .. wn END PAD..] returns
    logits [B, T-1, V] that predict tokens[:, 1:].

    ``inputs``: images for the encoder, or the encoder's ``(pooled, grid)`` already computed (a feature cache).
    ``encoder``: the small CNN trained from scratch when None, else a pretrained one (captioning.pretrained) whose
    outputs have ``pooled_dim`` and ``grid_dim`` features; ``grid_side`` pools its grid to at most side x side."""

    def __init__(self, vocab_size: int, decoder: str = "lstm", feature_dim: int = 128, width: int = 32,
                 embed: int = 256, hidden: int = 256, dropout: float = 0.3, heads: int = 4, layers: int = 2,
                 max_len: int = 32, encoder: nn.Module | None = None, pooled_dim: int | None = None,
                 grid_dim: int | None = None, grid_side: int = 0):
        super().__init__()
        if decoder not in DECODERS:
            raise ValueError(f"unknown decoder {decoder!r}; use one of {', '.join(DECODERS)}")
        self.encoder = encoder if encoder is not None else ImageEncoder(feature_dim, width)
        self.decoder_name = decoder
        self.grid_side = grid_side
        if decoder == "lstm":
            self.decoder = ShowAndTell(vocab_size, pooled_dim or feature_dim, embed, hidden, dropout)
        else:
            self.decoder = TransformerCaptioner(vocab_size, grid_dim or feature_dim, embed, heads, layers, hidden * 2,
                                                dropout, max_len)

    def features(self, inputs):
        if isinstance(inputs, (tuple, list)):
            return inputs
        pooled, grid = self.encoder(inputs)
        if self.grid_side:
            from .pretrained import reduce_grid

            grid = reduce_grid(grid, self.grid_side)
        return pooled, grid

    def forward(self, inputs, tokens):
        pooled, grid = self.features(inputs)
        return self.decoder(pooled, grid, tokens[:, :-1])

    def start(self, inputs):
        pooled, grid = self.features(inputs)
        return self.decoder.start(pooled, grid)

    def step(self, tokens, state):
        return self.decoder.step(tokens, state)

    def select(self, state, index):
        return self.decoder.select(state, index)


def sentence_nll(logits, tokens, pad_id: int = 0):
    """-log p(S|I) per sentence: the sum over its tokens (END included, PAD excluded). [B]"""
    targets = tokens[:, 1:]
    logp = F.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return -(logp * (targets != pad_id)).sum(dim=1)
