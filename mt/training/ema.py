"""An exponential moving average of the weights during training (train.ema_decay).

fairseq's --store-ema, OpenNMT-py's average_decay and Marian's --exponential-smoothing keep one: after
each update, ema = d * ema + (1 - d) * weights. Decoding the average instead of the last weights
smooths out the noise of the last updates, much as averaging the last checkpoints does (Sec. 6.1), but
over every update. The decay ramps up as min(d, (1 + t) / (10 + t)) at update t (TensorFlow's
ExponentialMovingAverage with num_updates), so that a short run's average is not dominated by the
random initialisation. Kept in fp32 on the training device; checkpoints carry it for an exact resume,
and checkpoints/ema.pt holds it as a model that `--checkpoint ema` decodes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class WeightAverage:
    """The moving average of a model's floating-point parameters, in their order and on their device."""

    def __init__(self, model: nn.Module, decay: float):
        self.decay = decay
        self.names = [name for name, p in model.named_parameters() if p.is_floating_point()]
        self.average = [p.detach().float().clone() for _, p in model.named_parameters() if p.is_floating_point()]

    def decay_at(self, step: int) -> float:
        return min(self.decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def update(self, model: nn.Module, step: int, made: torch.Tensor | None = None) -> None:
        """Move the average towards the weights after update `step` (from 1); where `made` (a bool
        tensor on the device, not read) is false the update was skipped and the average stays."""
        weights = [p.detach().float() for _, p in model.named_parameters() if p.is_floating_point()]
        weight = 1.0 - self.decay_at(step)
        if made is None:
            torch._foreach_lerp_(self.average, weights, weight)
        else:  # one 0-dim weight per tensor: a single tensor weight would be read as a Python number
            weight_made = made.to(self.average[0].dtype) * weight
            torch._foreach_lerp_(self.average, weights, [weight_made] * len(weights))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """name -> averaged tensor (what a checkpoint's "ema" holds)."""
        return {name: tensor.clone() for name, tensor in zip(self.names, self.average)}

    def load_state_dict(self, saved: dict[str, torch.Tensor]) -> None:
        if sorted(saved) != sorted(self.names):
            raise ValueError("the saved average holds other parameters than this model")
        for i, name in enumerate(self.names):
            self.average[i].copy_(saved[name])

    def model_state(self, model: nn.Module) -> dict[str, Any]:
        """The model's state_dict with the averaged parameters in the model's dtypes: a checkpoint's "model"."""
        state = model.state_dict()
        averaged = dict(zip(self.names, self.average))
        first_name = {id(p): name for name, p in reversed(list(model.named_parameters()))}
        # Tied embeddings are one parameter under several state_dict keys: each key gets the average.
        for name, p in model.named_parameters(remove_duplicate=False):
            if id(p) in first_name and first_name[id(p)] in averaged:
                state[name] = averaged[first_name[id(p)]].to(state[name].dtype).clone()
        return state
