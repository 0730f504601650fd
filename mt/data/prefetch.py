"""Training batches made ahead of the step on a background thread (`PrefetchingStream`).

Collating a batch (reading the memory-mapped ids, padding them into arrays) is host work that would
otherwise sit between two steps, and on a GPU every moment the host spends there is one the GPU may
idle. A thread runs the `BatchStream` a few batches ahead; on CUDA it also pins each batch in
page-locked memory and copies it to the GPU on a side stream of its own, so that the step finds its
batch already there. On the CPU the thread still collates ahead. The batches and their order are
the stream's own; the position a checkpoint saves is that of the batches handed out, not of those
made ahead.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import torch

from mt.data.batching import Batch, BatchStream

DEPTH = 4  # batches made ahead: a few MB even at 64k tokens


def _work(stream: BatchStream, ready: queue.Queue, stop: threading.Event, device: torch.device) -> None:
    """The thread: the stream's batches, each with the position after it, until `stop` (or an error,
    which is handed on to be raised by the step that takes it)."""
    side = torch.cuda.Stream(device) if device.type == "cuda" else None
    while not stop.is_set():
        item: Any
        try:
            batch = stream.next_batch()
            position = (stream.epoch, stream.batch_in_epoch)
            copied = None
            if side is not None:
                with torch.cuda.stream(side):
                    batch = batch.pinned().to(device)
                    copied = torch.cuda.Event()
                    copied.record(side)
            item = (batch, position, copied)
        except BaseException as exc:  # noqa: BLE001 - raised again in the consumer
            item = exc
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                break
            except queue.Full:
                continue
        if isinstance(item, BaseException):
            return


class PrefetchingStream:
    """A `BatchStream` read ahead on a thread, with its interface: `next_batch`, `seek`, `epoch` and
    `batch_in_epoch` (of the batches taken so far), `data`."""

    def __init__(self, stream: BatchStream, device: torch.device, depth: int = DEPTH):
        self.stream, self.device, self.depth = stream, device, depth
        self.data = stream.data
        self.epoch, self.batch_in_epoch = stream.epoch, stream.batch_in_epoch
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ready: queue.Queue = queue.Queue(depth)

    def next_batch(self) -> Batch:
        """The stream's next batch, on the device (on CUDA the step waits on the GPU for its copy, not
        on the host)."""
        if self._thread is None:
            self._start()
        item = self._ready.get()
        if isinstance(item, BaseException):
            self._thread = None
            raise item
        batch, (self.epoch, self.batch_in_epoch), copied = item
        if copied is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(copied)
            for tensor in batch.tensors():
                tensor.record_stream(current)  # made on the side stream, used on this one
        return batch

    def seek(self, epoch: int, batch_in_epoch: int) -> None:
        """Continue from a saved position: what was made ahead is dropped."""
        self.close()
        self.stream.seek(epoch, batch_in_epoch)
        self.epoch, self.batch_in_epoch = epoch, batch_in_epoch

    def close(self) -> None:
        """Stop the thread (a later `next_batch` starts another from the position taken so far)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.stream.seek(self.epoch, self.batch_in_epoch)

    def _start(self) -> None:
        self._stop, self._ready = threading.Event(), queue.Queue(self.depth)
        # The thread holds the stream and the queue, never `self`: a stream nobody holds any more is
        # collected, and its __del__ stops the thread.
        self._thread = threading.Thread(
            target=_work, args=(self.stream, self._ready, self._stop, self.device), name="batches", daemon=True
        )
        self._thread.start()

    def __del__(self) -> None:
        self._stop.set()
