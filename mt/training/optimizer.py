"""The optimizer: Adam with the paper's betas and eps (Sec. 5.3), as AdamW for optional decoupled
weight decay, and a saved optimizer state laid out again for the settings of a resumed run."""

from __future__ import annotations

from typing import Any

import torch


def decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW's parameter groups: decoupled weight decay (Loshchilov & Hutter, 2019) on the weight
    matrices and embeddings, none on biases and LayerNorm gains, whose scale is not capacity.
    Without decay one group, as checkpoints written before weight decay existed expect."""
    params = list(model.parameters())
    if weight_decay == 0:
        return [{"params": params, "weight_decay": 0.0}]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def build_optimizer(
    model: torch.nn.Module, weight_decay: float, betas: tuple[float, float], eps: float
) -> torch.optim.AdamW:
    """AdamW over `decay_groups`; the lr is set before each update by the schedule."""
    # fused: one kernel over all parameters, several times faster than foreach on the CPU
    # (docs/performance-notes.md).
    return torch.optim.AdamW(decay_groups(model, weight_decay), lr=0.0, betas=betas, eps=eps, fused=True)


def regroup_optimizer_state(
    saved: dict[str, Any], model: torch.nn.Module, weight_decay: float, betas: tuple[float, float], eps: float
) -> dict[str, Any]:
    """A saved AdamW state laid out for the groups `decay_groups` makes now, with these betas, eps
    and weight decay. torch's load_state_dict would keep the saved hyperparameters (a changed
    `train.weight_decay` or `adam_beta2` silently ignored on resume) and refuses another number of
    groups (weight decay turned on or off); each parameter keeps its moments either way."""
    saved_decay = 1.0 if len(saved["param_groups"]) == 2 else 0.0  # the layout that wrote it
    saved_order = [p for g in decay_groups(model, saved_decay) for p in g["params"]]
    groups = decay_groups(model, weight_decay)
    index = {id(p): i for i, p in enumerate(p for g in groups for p in g["params"])}
    state = {index[id(saved_order[int(i)])]: s for i, s in saved["state"].items()}
    template = saved["param_groups"][0]
    param_groups, start = [], 0
    for g in groups:
        ids = list(range(start, start + len(g["params"])))
        start += len(ids)
        param_groups.append({**template, "params": ids, "weight_decay": g["weight_decay"], "betas": betas, "eps": eps})
    return {"state": state, "param_groups": param_groups}
