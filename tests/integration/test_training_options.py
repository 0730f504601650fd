"""What practitioners bring from fairseq, Marian and OpenNMT: an EMA of the weights, TensorBoard
events, and BLEU on Moses-tokenized text as the Multi30k papers report it.

The exact resume of the EMA is in test_resume (the bitwise kill-and-resume test carries one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from sacrebleu.metrics import BLEU
from test_trainer import build_experiment, copy_experiment

from mt.checkpoint import load_checkpoint
from mt.config.schema import ModelConfig
from mt.metrics import score, score_tokenized
from mt.model.transformer import build_model
from mt.training.ema import WeightAverage
from mt.training.loop import train
from mt.training.setup import build_training

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_experiment(tmp_path_factory.mktemp("habits"))


def mt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, env=env, timeout=300)


# -- EMA -------------------------------------------------------------------------------------------
def test_the_average_follows_the_formula_with_its_ramp_and_covers_tied_embeddings():
    torch.manual_seed(0)
    model = build_model(ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=2), 30, 30, True)
    ema = WeightAverage(model, decay=0.9)
    assert ema.decay_at(1) == pytest.approx(2 / 11) and ema.decay_at(1000) == 0.9
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    expected = dict(start)
    for step in (1, 2, 3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update(model, step)
        d = min(0.9, (1 + step) / (10 + step))
        expected = {name: d * expected[name] + (1 - d) * p.detach() for name, p in model.named_parameters()}
    averaged = ema.state_dict()
    for name, value in expected.items():
        assert torch.allclose(averaged[name], value, atol=1e-6), name
    # One tensor under three state_dict keys: every key holds the average, whichever is loaded last.
    state = ema.model_state(model)
    shared = expected["src_embed.tokens.weight"]
    for key in ("src_embed.tokens.weight", "tgt_embed.tokens.weight", "output.weight"):
        assert torch.allclose(state[key], shared, atol=1e-6), key
    fresh = build_model(ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=2), 30, 30, True)
    fresh.load_state_dict(state)
    assert torch.allclose(fresh.output.weight, shared, atol=1e-6)


@pytest.mark.slow
def test_training_with_ema_saves_ema_pt_that_evaluate_decodes(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=12, ema_decay=0.9)
    train(exp, cfg)
    saved = load_checkpoint(exp.checkpoint_path("ema"))
    last = load_checkpoint(exp.checkpoint_path("last"))
    assert saved["step"] == 12 and saved["ema_decay"] == 0.9 and saved["model_config"] == last["model_config"]
    assert set(last["ema"]) <= set(saved["model"])
    assert any(not torch.equal(saved["model"][k], last["model"][k]) for k in last["ema"])  # not the last weights
    assert all(torch.equal(saved["model"][k], last["ema"][k]) for k in last["ema"])
    done = mt("evaluate", "--exp", str(exp.root), "--checkpoint", "ema", "--json", "--beam", "1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checkpoint"] == "ema.pt"
    refused = mt("average", "--exp", str(exp.root), "--last", "1", "--output", "ema")
    assert refused.returncode != 0 and "belongs to training" in refused.stderr


@pytest.mark.slow
def test_without_ema_nothing_changes_and_a_bad_decay_is_refused(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=3)
    assert build_training(exp, cfg).trainer.ema is None
    train(exp, cfg)
    assert not exp.checkpoint_path("ema").exists() and load_checkpoint(exp.checkpoint_path("last"))["ema"] is None
    refused = mt("train", "--exp", str(exp.root), "--set", "train.ema_decay=1.0")
    assert refused.returncode != 0 and "train.ema_decay must be in [0, 1)" in refused.stderr.strip().splitlines()[-1]


# -- TensorBoard -----------------------------------------------------------------------------------
def test_tensorboard_events_hold_the_logged_numbers(base, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=10, log_every=5, valid_every=5, tensorboard=True)
    train(exp, cfg)
    events = EventAccumulator(str(exp.tensorboard_dir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/nll", "train/lr", "train/grad_norm", "train/tgt_tokens_per_s",
            "valid/loss", "valid/ppl"} <= tags
    records = [json.loads(line) for line in exp.train_log_path.read_text().splitlines()]
    logged = {r["step"]: r["loss"] for r in records if "loss" in r}
    assert {e.step: round(e.value, 4) for e in events.Scalars("train/loss")} == pytest.approx(logged, abs=1e-4)
    assert [e.step for e in events.Scalars("valid/ppl")] == [5, 10]


@pytest.mark.slow
def test_tensorboard_without_the_package_is_one_line_naming_what_to_install(base, tmp_path):
    exp, _ = copy_experiment(base, tmp_path / "exp", max_steps=2, tensorboard=True)
    # The package made unimportable in that process only, as on a machine without it.
    code = ("import sys; sys.modules['tensorboard'] = None; sys.modules['torch.utils.tensorboard'] = None; "
            "from cli.main import entry_point; sys.argv = ['mt', 'train', '--exp', sys.argv[1]]; entry_point()")
    done = subprocess.run([sys.executable, "-c", code, str(exp.root)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2 and "Traceback" not in done.stderr  # a config error
    assert "pip install tensorboard" in done.stderr.strip().splitlines()[-1]


# -- tokenized BLEU --------------------------------------------------------------------------------
def test_tokenized_bleu_scores_moses_tokens_and_says_so():
    hyps = ["Ein Mann, der auf einer Bank sitzt.", "Zwei Hunde spielen im Schnee!"]
    refs = ["Ein Mann sitzt auf einer Bank.", "Zwei hunde spielen im Schnee!"]
    result = score_tokenized(hyps, refs, "de")
    moses_hyps = ["Ein Mann , der auf einer Bank sitzt .", "Zwei Hunde spielen im Schnee !"]
    moses_refs = ["Ein Mann sitzt auf einer Bank .", "Zwei hunde spielen im Schnee !"]
    expected = BLEU(tokenize="none", force=True).corpus_score(moses_hyps, [moses_refs]).score
    assert result["bleu_tokenized"] == pytest.approx(expected)
    assert "tok:none" in result["bleu_tokenized_signature"] and result["bleu_tokenized_signature"].endswith("pretok:moses-de")
    assert "bleu" not in result and "chrf" not in result  # never mistaken for sacreBLEU's
    lowered = score_tokenized(hyps, refs, "de", lowercase=True)
    assert lowered["bleu_tokenized"] > result["bleu_tokenized"] and "case:lc" in lowered["bleu_tokenized_signature"]
    # Where Moses and sacreBLEU's 13a split differently (English clitics), the two metrics differ.
    english = (["The man's dog isn't here."], ["The man's cat isn't here."])
    assert score(*english)["bleu"] != pytest.approx(score_tokenized(*english, "en")["bleu_tokenized"])


@pytest.mark.slow
def test_evaluate_tokenized_on_files_and_its_flag_errors(tmp_path):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("Ein Hund läuft.\nZwei Katzen!\n", encoding="utf-8")
    ref.write_text("Ein Hund rennt.\nZwei Katzen!\n", encoding="utf-8")
    done = mt("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--tokenized", "--lowercase", "--lang", "de")
    assert done.returncode == 0, done.stderr
    first, signature = done.stdout.splitlines()[:2]
    assert first.startswith("tokenized BLEU ") and "not sacreBLEU" in first and "chrF" not in done.stdout
    assert "case:lc" in signature and "pretok:moses-de" in signature
    no_lang = mt("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--tokenized")
    assert no_lang.returncode != 0 and "--lang" in no_lang.stderr.strip().splitlines()[-1]
    lower_alone = mt("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--lowercase")
    assert lower_alone.returncode != 0 and "--lowercase goes with --tokenized" in lower_alone.stderr


@pytest.mark.slow
def test_evaluate_tokenized_on_an_experiment_files_its_scores_apart(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=4)
    train(exp, cfg)
    done = mt("evaluate", "--exp", str(exp.root), "--checkpoint", "last", "--tokenized", "--json", "--beam", "1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "bleu_tokenized" in result and "bleu" not in result
    assert exp.score_path("test.tokenized").exists() and not exp.score_path("test").exists()


def test_init_from_starts_the_average_from_the_loaded_weights(base, tmp_path):
    from mt.training.checkpoints import start_from_weights

    source, source_cfg = copy_experiment(base, tmp_path / "source", max_steps=3)
    train(source, source_cfg)
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=3, ema_decay=0.99)
    run = build_training(exp, cfg)
    start_from_weights(run, str(source.root))
    weights = [p.detach() for p in run.trainer.model.parameters()]
    assert all(torch.equal(a, w) for a, w in zip(run.trainer.ema.average, weights))


# -- warmup ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_run_shorter_than_its_warmup_is_warned_about(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=3, warmup_steps=4000)
    done = mt("train", "--exp", str(exp.root))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: train.warmup_steps 4000 >= train.max_steps 3: the learning rate never reaches "
                        "its peak; lower --warmup-steps"], done.stderr
    exp, cfg = copy_experiment(base, tmp_path / "short", max_steps=3, warmup_steps=2)
    done = mt("train", "--exp", str(exp.root))
    assert done.returncode == 0 and "warning:" not in done.stderr, done.stderr
