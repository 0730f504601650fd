"""mt.experiment.checkpoint_file: checkpoints that round-trip, refuse what is not theirs in one line, and average."""

from __future__ import annotations

import dataclasses
import pickle
import shutil

import pytest
import torch
from helpers import mt as run_mt  # `mt ARGS` in this process: (exit code, stdout, stderr)

from mt.config.schema import ModelConfig
from mt.errors import ConfigError, MtError
from mt.experiment.checkpoint_file import load_checkpoint, model_from_checkpoint, save_checkpoint
from mt.experiment.paths import Experiment
from mt.model.transformer import Transformer, build_model
from mt.tokenizer import BOS_ID, EOS_ID
from mt.training.average import average_checkpoints, average_last

pytestmark = pytest.mark.usefixtures("single_thread")


# -- checkpoints ------------------------------------------------------------------------------------------

TINY = ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=4, max_positions=32)


def tiny_state() -> tuple[Transformer, dict]:
    torch.manual_seed(0)
    model = build_model(TINY, 20, 20, shared_vocab=True)
    state = {
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(TINY),
        "vocab": {"src_size": 20, "tgt_size": 20, "shared": True},
        "tokenizer_sha256": {"src": "ab" * 32, "tgt": "ab" * 32},
        "step": 7,
        "best_valid": 1.5,
    }
    return model, state


def test_checkpoint_round_trip(tmp_path):
    model, state = tiny_state()
    path = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(path, state)
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.pt"]  # no temporary file left
    loaded = load_checkpoint(path)
    assert loaded["step"] == 7 and loaded["best_valid"] == 1.5 and loaded["vocab"] == state["vocab"]
    assert loaded["tokenizer_sha256"] == state["tokenizer_sha256"]
    for key, value in state["model"].items():
        torch.testing.assert_close(loaded["model"][key], value, atol=0, rtol=0)
    rebuilt = model_from_checkpoint(loaded).eval()
    assert rebuilt.output.weight is rebuilt.src_embed.tokens.weight  # still tied after loading
    src = torch.tensor([[5, 6, 7, EOS_ID]])
    tgt = torch.tensor([[BOS_ID, 8, 9]])
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(src, tgt), model.eval()(src, tgt), atol=0, rtol=0)


def assert_one_line_error(path, match: str) -> None:
    with pytest.raises(MtError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message and "\x1b" not in message
    assert message.startswith(f"{path}: ") and match in message
    assert len(message) < 300


@pytest.mark.parametrize("keep", [0.0, 0.001, 0.01, 0.5, 0.999])
def test_truncated_checkpoint_is_a_one_line_error(tmp_path, keep):
    _, state = tiny_state()
    path = tmp_path / "last.pt"
    save_checkpoint(path, state)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(MtError):
        load_checkpoint(path)
    assert_one_line_error(path, "")


RAN = []


def _record(what):
    RAN.append(what)
    return what


class Sneaky:
    """Unpickling this calls _record: code a checkpoint must never run."""

    def __reduce__(self):
        return (_record, ("unpickled code ran",))


def test_foreign_files_are_refused_with_one_line(tmp_path):
    plain = tmp_path / "plain.pt"
    torch.save({"model": {"w": torch.zeros(2)}}, plain)  # a torch file, but not ours
    assert_one_line_error(plain, "not an mt checkpoint")

    listed = tmp_path / "list.pt"
    torch.save([torch.zeros(2)], listed)
    assert_one_line_error(listed, "not an mt checkpoint")

    torch_object = tmp_path / "object.pt"
    torch.save({"format": "mt-checkpoint-1", "model": Sneaky()}, torch_object)
    assert_one_line_error(torch_object, "refused")

    pickled = tmp_path / "pickled.pt"
    pickled.write_bytes(pickle.dumps(Sneaky(), protocol=2))
    assert_one_line_error(pickled, "")

    text = tmp_path / "notes.pt"
    text.write_text("hello\n")
    assert_one_line_error(text, "truncated or not a checkpoint")

    assert_one_line_error(tmp_path / "missing.pt", "no such checkpoint")
    assert RAN == []


def test_average_checkpoints_is_the_mean(tmp_path):
    _, state = tiny_state()
    paths = []
    for k in (1, 2, 6):
        weights = {
            "w": torch.tensor([[1.0, -2.0], [0.5, 4.0]]) * k,
            "b": torch.full((3,), float(k)),
            "steps": torch.tensor(k),  # not floating point: taken from the last checkpoint
        }
        path = tmp_path / f"step_{k}.pt"
        save_checkpoint(path, {**state, "model": weights, "step": k})
        paths.append(path)
    averaged = average_checkpoints(paths)
    torch.testing.assert_close(averaged["model"]["w"], torch.tensor([[3.0, -6.0], [1.5, 12.0]]))
    torch.testing.assert_close(averaged["model"]["b"], torch.full((3,), 3.0))
    assert averaged["model"]["w"].dtype == torch.float32
    assert int(averaged["model"]["steps"]) == 6
    assert averaged["step"] == 6 and averaged["model_config"] == state["model_config"]
    assert averaged["averaged_from"] == ["step_1.pt", "step_2.pt", "step_6.pt"]
    with pytest.raises(MtError, match="no checkpoints to average"):
        average_checkpoints([])


def test_average_writes_only_a_name_under_checkpoints(trained_experiment, tmp_path):
    exp = Experiment(tmp_path / "a" / "b" / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    before = sorted(tmp_path.rglob("*"))
    for name in ("../../evil", "sub/avg", "..", "a\\b", "", "last.pt", "best.pt"):
        with pytest.raises(ConfigError, match="--output") as info:
            average_last(exp, 2, name)
        assert info.value.exit_code == 2 and "\n" not in str(info.value)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, above checkpoints/ or in it
    path, used = average_last(exp, 2, "avg2")
    assert path == exp.checkpoints_dir / "avg2.pt" and path.is_file() and len(used) == 2


def one_line_cli_error(code: int, err: str, *needles: str) -> str:
    assert code == 1 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def test_average_refuses_an_existing_output_unless_force(trained_experiment, tmp_path, capsys, monkeypatch):
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    mine = exp.checkpoint_path("mine")
    code, _, err = run_mt(capsys, monkeypatch, "average", "--exp", exp.root, "--last", "1", "--output", "mine")
    assert code == 0 and mine.is_file(), err
    first = mine.read_bytes()
    for args in (["--last", "2", "--output", "mine"], ["--last", "2", "--output", "mine.pt"]):
        code, _, err = run_mt(capsys, monkeypatch, "average", "--exp", exp.root, *args)
        one_line_cli_error(code, err, f"{mine}: exists", "--force")
        assert mine.read_bytes() == first
    code, _, err = run_mt(capsys, monkeypatch, "average", "--exp", exp.root, "--last", "2", "--output", "mine", "--force")
    assert code == 0, err
    assert load_checkpoint(mine)["averaged_from"] == [p.name for p in exp.step_checkpoints()[-2:]]
    # The default name too: a second `mt average` does not silently replace the first.
    assert run_mt(capsys, monkeypatch, "average", "--exp", exp.root, "--last", "1")[0] == 0
    code, _, err = run_mt(capsys, monkeypatch, "average", "--exp", exp.root, "--last", "2")
    one_line_cli_error(code, err, f"{exp.checkpoint_path('average')}: exists", "--force")
    with pytest.raises(MtError, match="exists.*--force"):
        average_last(exp, 2)
    average_last(exp, 2, force=True)
    # A directory where the file would go is refused, --force or not, and left alone.
    (exp.checkpoints_dir / "folder.pt").mkdir()
    for force in ([], ["--force"]):
        code, _, err = run_mt(capsys, monkeypatch, "average", "--exp", exp.root, "--last", "1", "--output", "folder", *force)
        one_line_cli_error(code, err, str(exp.checkpoints_dir / "folder.pt"), "is a directory")
    assert (exp.checkpoints_dir / "folder.pt").is_dir()
    assert not [p for p in exp.checkpoints_dir.iterdir() if p.name.endswith(".tmp")]


def test_average_refuses_checkpoints_of_another_model_naming_the_file(trained_experiment, tmp_path, capsys, monkeypatch):
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    newest = exp.step_checkpoints()[-1]
    state = load_checkpoint(newest)
    key = next(k for k, v in state["model"].items() if v.dim() == 2)
    wider = {**state["model"], key: torch.zeros(state["model"][key].shape[0], state["model"][key].shape[1] * 2)}
    odd = exp.checkpoint_path("step_3")  # the oldest: averaged with --last 3
    save_checkpoint(odd, {**state, "model": wider, "step": 3})
    with pytest.raises(MtError) as info:
        average_last(exp, 3)
    message = str(info.value)
    assert message.startswith(f"{odd}: ") and newest.name in message and key in message and "\n" not in message
    # Other parameter names (another architecture): refused the same way, through the command line.
    _, foreign = tiny_state()
    save_checkpoint(odd, foreign)
    code, _, err = run_mt(capsys, monkeypatch, "average", "--exp", exp.root, "--last", "3")
    one_line_cli_error(code, err, f"{odd}: not the same model as {newest.name}")
    assert not exp.checkpoint_path("average").exists()
    path, used = average_last(exp, 2)  # the experiment's own two still average
    assert odd not in used and path.is_file()
    # The same shapes, another run's model: another tokenizer of the same size, or a field no shape shows.
    config = state["model_config"]
    others = [({**state, "tokenizer_sha256": {"src": "0" * 64, "tgt": "0" * 64}}, "another tokenizer"),
              ({**state, "model_config": {**config, "pre_norm": not config.get("pre_norm")}}, "model.pre_norm")]
    for other, needle in others:
        save_checkpoint(odd, {**other, "step": 3})
        with pytest.raises(MtError) as info:
            average_last(exp, 3, "others")
        assert str(info.value).startswith(f"{odd}: not the same model") and needle in str(info.value)
    dropout = {**config, **{key: 0.0 for key in config if "dropout" in key}}  # fine-tuned with other dropout
    save_checkpoint(odd, {**state, "model_config": dropout, "step": 3})
    assert odd in average_last(exp, 3, "again")[1]


def test_a_model_only_checkpoint_as_last_pt_is_refused_in_one_line(trained_experiment, tmp_path, capsys, monkeypatch):
    """average.pt copied over last.pt (the refusal without last.pt says to put one back): a KeyError's
    traceback from the optimizer state it lacks."""
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    average, _ = average_last(exp, 1)
    shutil.copy(average, exp.checkpoint_path("last"))
    code, _, err = run_mt(capsys, monkeypatch, "train", "--exp", exp.root, "--threads", "1")
    one_line_cli_error(code, err, f"{exp.checkpoint_path('last')}: holds a model but no training state", "step_N.pt")


def test_mt_runs_average_step_without_periodic_checkpoints_keeps_last_and_says_so(trained_experiment, tmp_path, capsys):
    """A training shorter than train.save_every left last.pt alone: `mt run`'s average step stopped the
    run ("fewer than --last 1", a flag `mt run` does not have) after the training had finished."""
    from mt.apps.run import _average_fresh, average_step

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    for path in exp.step_checkpoints():
        path.unlink()
    average_step(exp, exp.load_config())
    assert "average.pt holds last.pt's model" in capsys.readouterr().err
    averaged = torch.load(exp.checkpoint_path("average"), map_location="cpu", weights_only=True)
    last = torch.load(exp.checkpoint_path("last"), map_location="cpu", weights_only=True)
    assert averaged["averaged_from"] == ["last.pt"] and averaged["step"] == last["step"]
    assert all(torch.equal(averaged["model"][k], v) for k, v in last["model"].items())
    assert _average_fresh(exp, exp.load_config())  # done: the next `mt run` neither averages nor evaluates again
