"""What the updates of a run tell the host, kept on the training device until it is read.

A GPU runs the work the host queues; each time the host reads a number off it (`loss.item()`,
`float(grad_norm)`, an `if` on a tensor) the host waits for the whole queue to drain, and then the
GPU waits for the host to queue the next step. So the loss, the gradient norm and whether an update
was skipped are summed here, on the device, and read only when the training loop needs them (every
train.log_every updates, at validation and checkpoints): one wait there instead of several in every
update. On the CPU there is nothing to wait for, and the same code runs.
"""

from __future__ import annotations

import torch

# Totals over all updates so far, then the state of the latest one.
NAMES = (
    "loss",  # summed smoothed loss of the updates made (skipped ones left out)
    "nll",
    "tgt_tokens",  # target tokens of the updates made
    "src_tokens",
    "skipped",  # updates skipped for a non-finite loss or gradient norm
    "bad_in_row",  # updates in a row, up to the latest, that were bad (a loss scale's overflow is not)
    "most_bad_in_row",  # the longest such run so far
    "last_loss",  # the latest update's summed loss, NLL and gradient norm, as they were (nan included)
    "last_nll",
    "grad_norm",
)


class UpdateCounters:
    """The totals of `NAMES` as one float64 tensor on the device; `add` never reads it, `read` does."""

    def __init__(self, device: torch.device):
        self.totals = torch.zeros(len(NAMES), dtype=torch.float64, device=device)

    @torch.no_grad()
    def add(
        self,
        loss: torch.Tensor,
        nll: torch.Tensor,
        grad_norm: torch.Tensor,
        tgt_tokens: float,
        src_tokens: float,
        made: torch.Tensor,  # bool: the update was made
        bad: torch.Tensor,  # bool: skipped, and not for the loss scale's overflow
    ) -> None:
        """One update's numbers, added on the device."""
        latest = torch.stack([loss.detach(), nll.detach(), grad_norm.detach()]).to(torch.float64)
        made = made.to(torch.float64)
        totals = self.totals
        sums = torch.cat(
            [torch.where(made > 0, latest[:2], 0.0), torch.stack([made * tgt_tokens, made * src_tokens, 1.0 - made])]
        )
        totals[:5] += sums
        in_row = (totals[5] + 1.0) * bad.to(torch.float64)
        totals[5:7] = torch.stack([in_row, torch.maximum(totals[6], in_row)])
        totals[7:] = latest

    def continue_bad_run(self, in_row: int) -> None:
        """A resumed run's first updates continue the saved run of bad updates (`TrainingState.bad_in_row`)."""
        self.totals[5:7] = float(in_row)

    def read(self) -> dict[str, float]:
        """The totals, read from the device: on a GPU, after everything queued before has run."""
        return dict(zip(NAMES, self.totals.to("cpu", copy=True).tolist()))  # one copy to the host
