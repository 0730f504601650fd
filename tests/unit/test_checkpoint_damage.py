"""mt.experiment.checkpoint_file on checkpoints whose bytes changed on disk (issue 25): the weights, a plain value, the
pickle, and a checkpoint saved before checksums; each is a one-line error that says "damaged".
"""

from __future__ import annotations

import dataclasses
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from helpers import one_line

from mt.config.schema import ModelConfig
from mt.errors import MtError
from mt.experiment.checkpoint_file import FORMAT, load_checkpoint, save_checkpoint
from mt.model.transformer import build_model

pytestmark = pytest.mark.usefixtures("single_thread")


# -- 3: checkpoints damaged on disk ---------------------------------------------------------------
def tiny_state() -> dict:
    cfg = ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=2)
    torch.manual_seed(0)
    model = build_model(cfg, 20, 20, shared_vocab=True)
    return {"model": model.state_dict(), "model_config": dataclasses.asdict(cfg),
            "vocab": {"src_size": 20, "tgt_size": 20, "shared": True}, "step": 7}


def entry(path: Path, suffix: str) -> tuple[int, int]:
    """(offset in the file, size) of the stored zip entry whose name ends in `suffix`."""
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(suffix))
    assert info.compress_type == zipfile.ZIP_STORED
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26: info.header_offset + 30])
    return info.header_offset + 30 + name_len + extra_len, info.file_size


def overwrite(path: Path, offset: int, new: bytes) -> None:
    """Change bytes in place: the file keeps its size and zip structure."""
    with open(path, "r+b") as handle:
        handle.seek(offset)
        assert handle.read(len(new)) != new
        handle.seek(offset)
        handle.write(new)


def test_damaged_weights_fail_the_checksum(tmp_path):
    path = tmp_path / "last.pt"
    save_checkpoint(path, tiny_state())
    load_checkpoint(path)  # intact: loads
    start, size = entry(path, "/data/0")
    overwrite(path, start + size // 2, b"\x13\x37\x13\x37")
    with pytest.raises(MtError) as info:
        load_checkpoint(path)
    assert one_line(info, "damaged: checksum mismatch").startswith(f"{path}: ")


def test_a_changed_plain_value_fails_the_checksum(tmp_path):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {**tiny_state(), "note": "abcdef"})
    start, size = entry(path, "data.pkl")
    pickled = path.read_bytes()[start: start + size]
    overwrite(path, start + pickled.index(b"abcdef"), b"zbcdef")  # still a valid pickle
    with pytest.raises(MtError) as info:
        load_checkpoint(path)
    one_line(info, str(path), "damaged: checksum mismatch")


@pytest.mark.parametrize("damage", ["opcode", "global"])
def test_a_damaged_pickle_is_reported_as_damage_not_as_refused_content(tmp_path, damage):
    path = tmp_path / "last.pt"
    save_checkpoint(path, tiny_state())
    start, size = entry(path, "data.pkl")
    pickled = path.read_bytes()[start: start + size]
    if damage == "opcode":  # the opcode after PROTO 2 becomes one that does not exist
        assert pickled[:2] == b"\x80\x02"
        overwrite(path, start + 2, b"\xff")
    else:  # "torch._utils" -> "torch._utilz": torch reports an "Unsupported global"
        overwrite(path, start + pickled.index(b"torch._utils") + 11, b"z")
    with pytest.raises(MtError) as info:
        load_checkpoint(path)
    message = one_line(info, str(path), "damaged", "data.pkl")
    assert "refused" not in message and "more than tensors" not in message


def test_a_checkpoint_without_checksum_still_loads_and_its_damage_is_found(tmp_path):
    path = tmp_path / "old.pt"
    state = tiny_state()
    torch.save({"format": FORMAT, **state}, path)  # as checkpoints were saved before checksums
    loaded = load_checkpoint(path)
    assert loaded["step"] == 7 and "checksum" not in loaded
    for key, value in state["model"].items():
        assert torch.equal(loaded["model"][key], value)
    start, size = entry(path, "/data/0")
    overwrite(path, start + size // 2, b"\x13\x37\x13\x37")
    with pytest.raises(MtError) as info:
        load_checkpoint(path)
    one_line(info, str(path), "damaged")
