"""Training strategies.

Fluency-guided (seed 004, Section 3.3), with f = f(S_c), the estimated probability that a caption is fluent:

- ``all``: every caption ("Without fluency").
- ``fluency_only`` (Strategy I): only captions classified fluent, f > 0.5.
- ``rejection_sampling`` (Strategy II): a caption with f < 0.5 enters the mini-batch when f > u,
  u ~ U(0, 0.5), drawn afresh each epoch (so with probability 2f); the others always enter.
- ``weighted_loss`` (Strategy III): bLoss = -1/m sum_i mu_i log p(S_i | I_i), mu_i = 1 if f > 0.5
  else f.

Informativeness (seed 000): NS = a captioner trained on the raw comments, CS = on the comments an
informativeness filter kept; which one a release is follows from its config (the filter run it was
frozen from). CWS = CS with the CNN pretrained on LDA topic distributions (the topic-CNN trainer).
"""
from __future__ import annotations

import torch

STRATEGIES = ("all", "fluency_only", "rejection_sampling", "weighted_loss")
NEEDS_FLUENCY = ("fluency_only", "rejection_sampling", "weighted_loss")


def fluency_weight(f: float) -> float:
    """mu_i of eq. (9)."""
    return 1.0 if f > 0.5 else float(f)


def weights(fluency: torch.Tensor) -> torch.Tensor:
    return torch.where(fluency > 0.5, torch.ones_like(fluency), fluency)


def rejection_mask(fluency: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Which captions enter this epoch's mini-batches under rejection sampling."""
    u = torch.rand(fluency.shape, generator=generator) * 0.5
    return (fluency >= 0.5) | (fluency > u)


def keep_mask(fluency: torch.Tensor, strategy: str, generator: torch.Generator | None = None) -> torch.Tensor:
    if strategy == "fluency_only":
        return fluency > 0.5
    if strategy == "rejection_sampling":
        return rejection_mask(fluency, generator)
    if strategy in ("all", "weighted_loss"):
        return torch.ones(fluency.shape, dtype=torch.bool)
    raise ValueError(f"unknown strategy {strategy!r}")


def weighted_loss(nll: torch.Tensor, fluency: torch.Tensor) -> torch.Tensor:
    """Eq. (9): the mean over the mini-batch of mu_i * (-log p(S_i | I_i))."""
    return (weights(fluency.to(nll.dtype)) * nll).mean()


def batch_loss(nll: torch.Tensor, fluency: torch.Tensor | None, strategy: str) -> torch.Tensor:
    if strategy == "weighted_loss":
        return weighted_loss(nll, fluency)
    return nll.mean()


def informativeness_regime(release) -> str:
    """"CS" when the release was frozen from a filter run with an informativeness step, else "NS"."""
    from curation.models import FilterRun

    run_id = (release.config or {}).get("run")
    if not run_id:
        return "NS"
    snapshot = FilterRun.objects.filter(pk=run_id).values_list("snapshot", flat=True).first() or []
    return "CS" if any(step.get("filter") == "informativeness" for step in snapshot) else "NS"
