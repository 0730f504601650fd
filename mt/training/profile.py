"""Where a training step's time goes: the step split into phases (embedding, attention, FFN, residual
+ LayerNorm, output layer + loss, optimizer, data, other) with torch's profiler.

Used by bench/throughput.py --phases. It hooks the model's sub-layers and the Trainer's public
phases (the stream's `next_batch`, `finish_gradients`, `apply_update`) and removes every hook after.
"""

from __future__ import annotations

from contextlib import ExitStack

from torch import nn

from mt.model.attention import MultiHeadAttention
from mt.model.layers import Embedding, FeedForward, Residual
from mt.training.trainer import Trainer

PHASES = ("embedding", "attention", "FFN", "residual+LayerNorm", "output+loss", "optimizer", "data")


def phase_of_module(module: nn.Module, trainer: Trainer) -> str | None:
    """The phase whose time a module's forward (and the backward of what it made) counts to."""
    if isinstance(module, Embedding):
        return "embedding"
    if isinstance(module, MultiHeadAttention):  # self and cross, with their projections
        return "attention"
    if isinstance(module, FeedForward):
        return "FFN"
    if isinstance(module, Residual):  # its LayerNorm, dropout and sum; the sublayer is its own scope
        return "residual+LayerNorm"
    if module is trainer.model.output or module is trainer.loss_module:
        # The loss module's scope is the outermost: whatever the forward does outside the model's
        # sub-layers (masks, picking the non-pad positions, the loss itself) counts here.
        return "output+loss"
    return None


def profile_phases(trainer: Trainer, steps: int) -> dict[str, float]:
    """Milliseconds per step of each of PHASES, "other" (the step less all of them) and "step".

    Why this way: the profiler sees operators, not the model's structure. Forward hooks open a
    record_function scope per sub-layer; a forward operator belongs to its innermost scope, and a
    backward node to the phase of the forward operator that made it (same autograd sequence_nr).
    Data (next_batch + collate) and optimizer (gradient scaling and clipping, Adam, zero_grad) are
    scopes around the Trainer's phases. Times are those of the profiled steps, which the
    profiler's own overhead makes slower than plain ones; shares are of the profiled step.
    """
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    open_scopes: dict[int, list] = {}

    def enter(phase):
        def hook(module, args):
            scope = record_function(f"phase:{phase}")
            scope.__enter__()
            open_scopes.setdefault(id(module), []).append(scope)
        return hook

    def leave(module, args, output):
        open_scopes[id(module)].pop().__exit__(None, None, None)

    def scoped(phase, method):
        def run(*args, **kwargs):
            with record_function(f"phase:{phase}"):
                return method(*args, **kwargs)
        return run

    with ExitStack() as stack:
        for module in [*trainer.model.modules(), trainer.loss_module]:
            phase = phase_of_module(module, trainer)
            if phase is not None:
                stack.callback(module.register_forward_pre_hook(enter(phase)).remove)
                stack.callback(module.register_forward_hook(leave, always_call=True).remove)
        for owner, name, phase in ((trainer.stream, "next_batch", "data"), (trainer, "finish_gradients", "optimizer"),
                                   (trainer, "apply_update", "optimizer")):
            setattr(owner, name, scoped(phase, getattr(owner, name)))
            stack.callback(delattr, owner, name)  # back to the class's method
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                with record_function("phase:step"):
                    trainer.step()
    return attribute_phases(prof.events(), steps)


def attribute_phases(events, steps: int) -> dict[str, float]:
    """The arithmetic of `profile_phases` on a profiler's events: exclusive time of each phase
    scope (its span less the phase scopes nested in it) plus the backward nodes of its operators."""
    def phase_above(event):
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("phase:"):
            parent = parent.cpu_parent
        return parent

    totals = dict.fromkeys(PHASES, 0.0)
    step = 0.0
    forward_phase: dict[int, str] = {}  # autograd sequence_nr -> phase of the op that made the node
    backward = []
    for event in events:
        duration = event.time_range.end - event.time_range.start  # microseconds
        if event.name == "phase:step":
            step += duration
        elif event.name.startswith("phase:"):
            totals[event.name[6:]] += duration
            scope = phase_above(event)
            if scope is not None and scope.name != "phase:step":
                totals[scope.name[6:]] -= duration
        elif event.name.startswith("autograd::engine::evaluate_function:"):
            backward.append((event.sequence_nr, duration))
        elif event.sequence_nr >= 0:
            scope = phase_above(event)
            if scope is not None and scope.name != "phase:step":
                forward_phase.setdefault(event.sequence_nr, scope.name[6:])
    for sequence_nr, duration in backward:
        phase = forward_phase.get(sequence_nr)
        if phase is not None:  # else (AccumulateGrad, ...) it stays in "other"
            totals[phase] += duration
    result = {phase: totals[phase] / steps / 1e3 for phase in PHASES}
    result["other"] = step / steps / 1e3 - sum(result.values())
    result["step"] = step / steps / 1e3
    return result
