"""What every mapping of the model onto another runtime (CTranslate2, Hugging Face) follows: every
field of the model config is known, and every tensor of the checkpoint is taken exactly once, so that
what a later mt adds is refused rather than dropped."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from mt.config.schema import ModelConfig
from mt.errors import MtError

# Every ModelConfig field and how an export treats it. A field not listed (one a later mt adds, or a
# checkpoint from one) is refused, not guessed: it may change what the network computes.
MAPPED_FIELDS = (
    "enc_layers",
    "dec_layers",
    "d_model",
    "d_ff",
    "n_heads",
    "pre_norm",
    "tie_embeddings",
    "max_positions",
)
INFERENCE_FREE_FIELDS = ("dropout", "attention_dropout", "activation_dropout")  # no effect when translating


def check_exportable(model_config: dict[str, Any], where: str, runtime: str) -> None:
    """Refuse a model whose config holds what the mapping cannot express faithfully."""
    known = set(MAPPED_FIELDS) | set(INFERENCE_FREE_FIELDS)
    for key in [f.name for f in dataclasses.fields(ModelConfig)] + list(model_config):
        if key not in known:
            value = model_config.get(key, getattr(ModelConfig(), key, None))
            raise MtError(
                f"{where}: model.{key} = {value!r}: the {runtime} export does not know how to map "
                f"this field, so it writes nothing rather than a model that may translate differently"
            )
    for key in ("enc_layers", "dec_layers"):
        if int(model_config.get(key, 1)) < 1:
            raise MtError(f"{where}: model.{key} = {model_config[key]}: {runtime} needs at least one layer a side")


class Weights:
    """The model's tensors by state-dict name, handed out as float32 copies; `left()` names those never
    taken, so a tensor the mapping forgot is an error instead of a silent change."""

    def __init__(self, model: torch.nn.Module):
        self.tensors = model.state_dict()
        self.taken: set[str] = set()

    def tensor(self, name: str) -> torch.Tensor:
        self.taken.add(name)
        return self.tensors[name].detach().float().cpu().clone()

    def take(self, name: str) -> np.ndarray:
        return self.tensor(name).numpy()

    def left(self) -> list[str]:
        return sorted(set(self.tensors) - self.taken)


def layer_norm_epsilon(model: torch.nn.Module, runtime: str) -> float:
    """The one LayerNorm epsilon of the model (both runtimes take one for the whole model)."""
    eps = {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)}
    if len(eps) != 1:
        raise MtError(f"LayerNorm epsilons {sorted(eps)}: {runtime} takes one for the whole model")
    return float(eps.pop())
