"""Beam search (size 4-5 in the seeds): keeps the k best partial captions by summed log-probability
and returns k finished candidates, best first."""
from __future__ import annotations

import torch


@torch.no_grad()
def beam_search(model, image, *, start_id: int, end_id: int, beam_size: int = 5, max_len: int = 16,  # noqa: PLR0915
                length_penalty: float = 0.0) -> list[tuple[list[int], float]]:
    """Candidates for one image ([3, H, W] or [1, 3, H, W], or its cached features (pooled, grid)) as
    [(token ids without START/END, score)] in descending score order; exactly ``beam_size`` of them when the
    vocabulary allows.

    The score is the summed log-probability, divided by len**length_penalty when that is not 0.
    A beam that reaches ``max_len`` tokens without END is finished as it stands."""
    if isinstance(image, (tuple, list)):  # cached (pooled [1, D], grid [1, N, D]): only the device is read below
        state, image = model.start(image), image[0]
    else:
        image = image.unsqueeze(0) if image.dim() == 3 else image
        state = model.start(image)
    k = beam_size
    state = model.select(state, torch.zeros(k, dtype=torch.long, device=image.device))
    seqs = [[] for _ in range(k)]
    scores = torch.zeros(k, device=image.device)
    scores[1:] = float("-inf")  # all beams start identical: expand only the first at step one
    tokens = torch.full((k,), start_id, dtype=torch.long, device=image.device)
    finished: list[tuple[list[int], float, float]] = []  # (ids, raw score, ranked score)

    def ranked(raw: float, length: int) -> float:
        return raw / (max(length, 1) ** length_penalty) if length_penalty else raw

    for t in range(max_len):
        logp, state = model.step(tokens, state)
        total = (scores.unsqueeze(1) + logp).view(-1)
        vocab = logp.shape[1]
        best, flat = total.topk(min(2 * k, total.numel()))
        next_seqs, next_scores, next_tokens, origins = [], [], [], []
        for score, index in zip(best.tolist(), flat.tolist()):
            if score == float("-inf"):
                break
            beam, word = divmod(index, vocab)
            seq = seqs[beam] + [word]
            if word == end_id or t == max_len - 1:
                ids = seq[:-1] if word == end_id else seq
                finished.append((ids, score, ranked(score, len(ids) + 1)))
            else:
                next_seqs.append(seq)
                next_scores.append(score)
                next_tokens.append(word)
                origins.append(beam)
            if len(next_seqs) == k:
                break
        # stop when k finished candidates beat every live beam
        if len(finished) >= k:
            kth = sorted((f[2] for f in finished), reverse=True)[k - 1]
            if not next_scores or max(ranked(s, len(q)) for s, q in zip(next_scores, next_seqs)) <= kth:
                break
        if not next_seqs:
            break
        n = len(next_seqs)
        origin = torch.tensor(origins, dtype=torch.long, device=image.device)
        state = model.select(state, origin)
        seqs = next_seqs
        scores = torch.tensor(next_scores, device=image.device)
        tokens = torch.tensor(next_tokens, dtype=torch.long, device=image.device)
        if n < k:  # keep the batch shape; the pads can never win
            pad = k - n
            state = model.select(state, torch.cat([torch.arange(n, device=image.device),
                                                   torch.zeros(pad, dtype=torch.long, device=image.device)]))
            seqs = seqs + [[] for _ in range(pad)]
            scores = torch.cat([scores, torch.full((pad,), float("-inf"), device=image.device)])
            tokens = torch.cat([tokens, torch.full((pad,), start_id, dtype=torch.long, device=image.device)])
    finished.sort(key=lambda f: f[2], reverse=True)
    return [(ids, score) for ids, _, score in finished[:k]]
