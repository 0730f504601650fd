"""Translating: streaming order, empty and over-long lines, output formats, ensembles, fast modes.

On conftest's tiny trained experiment (tokenizer + binarized data + a 40-step model, built once
through the library); the streaming checks pipe real processes through `python -m mt translate`.
"""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys

import pytest
from helpers import mt, toy_corpus

from mt.data.batching import length_groups
from mt.decoding.options import DecodeOptions, Sampling
from mt.decoding.output import stream
from mt.decoding.translator import Translator
from mt.errors import ConfigError
from mt.experiment.paths import Experiment
from mt.text.translate import translate as translate_text


def mt_translate(exp: Experiment, stdin: str, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "mt", "translate", "--exp", str(exp.root), "--threads", "1", *flags],
                          input=stdin.encode(), capture_output=True, env=env, timeout=300)


@pytest.mark.slow
def test_ten_thousand_lines_come_out_in_order_with_empty_lines(trained_experiment):
    distinct = toy_corpus(40, seed=99)[0]
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    alone = {line: translator.translate([line])[0] for line in distinct}
    assert len(set(alone.values())) > 5, "the tiny model must tell inputs apart for this test to mean anything"
    rng = random.Random(5)
    lines = [rng.choice(distinct) if rng.random() > 0.1 else "" for _ in range(10_000)]
    done = mt_translate(trained_experiment, "\n".join(lines) + "\n", "--beam", "1", "--max-len-b", "4")
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode().split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    greedy = Translator.load(trained_experiment, trained_experiment.load_config())
    greedy.decode_cfg.beam, greedy.decode_cfg.max_len_b = 1, 4
    expected = {line: greedy.translate([line])[0] for line in distinct}
    assert out[:-1] == [expected[line] if line else "" for line in lines]


@pytest.mark.slow
def test_a_very_long_line_is_cut_with_a_warning(trained_experiment):
    # With --alignments a line is one segment (mt.text: no sentences, no pieces): the model's positions cut it.
    long_line = ("Der Hund läuft im Park. " * 5000)[:100_000]
    done = mt_translate(trained_experiment, f"Ein Mann.\n{long_line}\nDie Katze.\n", "--beam", "2", "--max-len-b", "3",
                        "--alignments")
    assert done.returncode == 0, done.stderr.decode()
    assert len(done.stdout.decode().split("\n")) == 4
    assert "cut to" in done.stderr.decode() and "line 2" in done.stderr.decode()


def test_nbest_and_scores_formats(trained_experiment, capsys, monkeypatch):
    def translate(stdin: str, *flags: str) -> tuple[int, str, str]:  # in this process: the formats, not the process
        return mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--threads", "1", *flags,
                  stdin=stdin)

    code, out, err = translate("Ein Mann läuft.\n\nDie Katze sitzt.\n", "--nbest", "3")
    assert code == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[0] for r in rows] == ["1", "1", "1", "2", "3", "3", "3"]
    for line_rows in (rows[0:3], rows[4:7]):
        scores = [float(r[1]) for r in line_rows]
        assert scores == sorted(scores, reverse=True)
    assert rows[3] == ["2", "0.0000", ""]
    code, scored, err = translate("Ein Mann läuft.\n", "--scores")
    score, text = scored.rstrip("\n").split("\t")
    assert float(score) == float(rows[0][1]) and text == rows[0][2]
    # Moses' n-best format: the same hypotheses, numbered from 0, the score as a feature and as the total.
    code, moses, err = translate("Ein Mann läuft.\n\nDie Katze sitzt.\n", "--nbest", "3", "--nbest-format", "moses")
    assert code == 0, err
    fields = [line.split(" ||| ") for line in moses.splitlines()]
    assert [(int(f[0]) + 1, f[3], f[1]) for f in fields] == [(int(r[0]), r[1], r[2]) for r in rows]
    assert all(f[2] == f"mt= {f[3]}" for f in fields)
    code, _, err = translate("x\n", "--nbest-format", "moses")
    assert code == 2 and "goes with --nbest" in err
    # a web address is kept as it is in every hypothesis, as in the one-best (was: read as words)
    code, listed, err = translate("Ein Mann läuft nach https://example.org/a?b=1 .\n", "--nbest", "3")
    rows = [line.split("\t") for line in listed.splitlines()]
    assert code == 0 and len(rows) == 3 and all("https://example.org/a?b=1" in r[2] for r in rows), listed
    assert [float(r[1]) for r in rows] == sorted((float(r[1]) for r in rows), reverse=True)


def test_sampling_is_seeded_and_differs_from_search(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    lines = toy_corpus(20, seed=3)[0]
    first = translator.search(lines, DecodeOptions(sampling=Sampling(temperature=1.5, seed=7)))
    again = translator.search(lines, DecodeOptions(sampling=Sampling(temperature=1.5, seed=7)))
    other = translator.search(lines, DecodeOptions(sampling=Sampling(temperature=1.5, seed=8)))
    assert first == again
    assert first != other
    nucleus = translator.search(lines, DecodeOptions(sampling=Sampling(top_k=1, seed=9)))
    greedy = Translator.load(trained_experiment, trained_experiment.load_config())
    greedy.decode_cfg.beam = 1
    assert [h[0][0] for h in nucleus] == greedy.translate(lines)  # top-k 1 is greedy


def test_a_sampled_stream_draws_anew_for_each_buffer_and_repeats_with_its_seed(trained_experiment):
    """Was: the generator seeded again for every buffer, so --buffer 1 gave one line's draws for all."""
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    line = toy_corpus(1, seed=4)[0][0]
    options = DecodeOptions(sampling=Sampling(temperature=1.5, seed=7))

    def sampled() -> list[str]:
        out: list[str] = []
        stream(translator, [line] * 8, out.append, buffer=1, options=options)
        return out

    first = sampled()
    assert len(set(first)) > 1 and sampled() == first


def test_a_translator_from_plain_parts_equals_the_loaded_one(trained_experiment):
    # Translator holds plain objects: the loaded model and tokenizers under other decoding options.
    cfg = trained_experiment.load_config()
    loaded = Translator.load(trained_experiment, cfg)
    assert loaded.checkpoint_path == loaded.checkpoint_paths[0] and loaded.checkpoint_path.exists()
    greedy = dataclasses.replace(cfg.decode, beam=1)
    plain = Translator(loaded.model, loaded.src_tok, loaded.tgt_tok, greedy)
    assert plain.checkpoint_paths == [] and plain.checkpoint_path is None
    lines = toy_corpus(10, seed=5)[0]
    loaded.decode_cfg.beam = 1
    assert plain.translate(lines) == loaded.translate(lines)


def test_ensemble_of_one_model_twice_equals_the_model(trained_experiment, tmp_path):
    import shutil

    cfg = trained_experiment.load_config()
    lines = toy_corpus(15, seed=4)[0]
    copy = tmp_path / "copy.pt"  # the same weights in another file (one file twice is refused)
    shutil.copy(trained_experiment.checkpoint_path("last"), copy)
    single = Translator.load(trained_experiment, cfg, checkpoint="last").search(lines, DecodeOptions(nbest=2))
    double = Translator.load(trained_experiment, cfg, checkpoint=["last", str(copy)]).search(lines, DecodeOptions(nbest=2))
    assert [[t for t, _ in h] for h in single] == [[t for t, _ in h] for h in double]
    for h1, h2 in zip(single, double):
        for (_, s1), (_, s2) in zip(h1, h2):
            assert abs(s1 - s2) < 1e-4


@pytest.mark.parametrize("precision,quantize", [("bf16", None), ("fp32", "int8")])
def test_fast_modes_translate(trained_experiment, precision, quantize):
    cfg = trained_experiment.load_config()
    lines = toy_corpus(10, seed=6)[0]
    fast = Translator.load(trained_experiment, cfg, precision=precision, quantize=quantize).translate(lines)
    assert len(fast) == len(lines) and all(isinstance(t, str) for t in fast)


def test_bf16_on_the_cpu_bounds_onednn_primitive_cache_unless_the_user_set_it(trained_experiment, monkeypatch):
    from mt.decoding.models import ONEDNN_CACHE

    cfg = trained_experiment.load_config()
    monkeypatch.delenv(ONEDNN_CACHE, raising=False)
    Translator.load(trained_experiment, cfg, precision="fp32")
    assert ONEDNN_CACHE not in os.environ  # fp32 does not go through oneDNN's bf16 kernels
    monkeypatch.setenv(ONEDNN_CACHE, "")
    monkeypatch.delenv(ONEDNN_CACHE)  # absent, and put back as it was after the test
    Translator.load(trained_experiment, cfg, precision="bf16")
    assert os.environ[ONEDNN_CACHE] == "16"
    monkeypatch.setenv(ONEDNN_CACHE, "256")
    Translator.load(trained_experiment, cfg, precision="bf16")
    assert os.environ[ONEDNN_CACHE] == "256"


def test_length_groups_keep_each_padded_batch_within_the_budget():
    lengths = [5, 1, 9, 3, 3, 30, 2]
    # sorted by length; (longest + 1) * rows <= 20; the over-long source (31 > 20) runs alone
    assert length_groups(lengths, 20) == [[1, 6, 3, 4], [0, 2], [5]]
    assert length_groups([], 20) == []


@pytest.mark.parametrize("options, flag", [(dict(temperature=0.0), "--temperature"),
                                           (dict(temperature=float("nan")), "--temperature"),
                                           (dict(top_k=-1), "--top-k"), (dict(top_p=0.0), "--top-p"),
                                           (dict(top_p=1.5), "--top-p")])
def test_sampling_options_out_of_range_are_refused(options, flag):
    with pytest.raises(ConfigError, match=flag):
        Sampling(**options)


def test_an_nbest_list_widens_a_narrower_beam(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    translator.decode_cfg.beam = 1  # greedy, unless n-best lists are asked for
    lines = toy_corpus(5, seed=8)[0]
    assert all(len(hyps) == 1 for hyps in translator.search(lines))
    assert all(len(hyps) == 3 for hyps in translator.search(lines, DecodeOptions(nbest=3)))


def test_batches_searched_side_by_side_give_what_one_at_a_time_gives(trained_experiment):
    """decode.workers 2 on two threads: several batches at once, one thread each, and the same
    n-best translations and scores as one worker on both threads; torch's threads given back."""
    import torch

    lines = toy_corpus(60, seed=7)[0]
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    translator.decode_cfg.max_tokens = 40
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        translator.decode_cfg.workers = 1
        alone = translator.search(lines, DecodeOptions(nbest=2))
        translator.decode_cfg.workers = 2
        side_by_side = translator.search(lines, DecodeOptions(nbest=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert len({len(line.split()) for line in lines}) > 3  # batches of several lengths
    assert [[text for text, _ in hyps] for hyps in side_by_side] == [[text for text, _ in hyps] for hyps in alone]
    assert [score for hyps in side_by_side for _, score in hyps] == pytest.approx(
        [score for hyps in alone for _, score in hyps], abs=1e-4)


def test_a_device_torch_cannot_use_is_a_config_error_from_python_too(trained_experiment):
    """Was: torch's AssertionError ("Torch not compiled with CUDA enabled") or RuntimeError, from
    Translator.load and train; the command line's --device was the only check."""
    import torch

    from mt.training.loop import train

    cfg = trained_experiment.load_config()
    bad = ["tpu", "cuda:x"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in bad:
        with pytest.raises(ConfigError, match=f"^device {device}: "):
            Translator.load(trained_experiment, cfg, device=device)
        with pytest.raises(ConfigError, match=f"^device {device}: "):
            train(trained_experiment, cfg, device=device)
    assert Translator.load(trained_experiment, cfg, device=torch.device("cpu")).device.type == "cpu"  # a device too


def test_input_is_brought_to_the_unicode_form_training_text_was_cleaned_to(trained_experiment, tmp_path):
    """data.normalize cleaned the training text to NFC; with a tokenizer that normalises nothing itself
    (tokenizer.normalization identity) a decomposed "é" at translation time was two unknown pieces."""
    import unicodedata

    from helpers import tiny_model

    from mt.config.schema import DecodeConfig, TokenizerConfig
    from mt.data.train_tokenizer import train_spm
    from mt.tokenizer import Tokenizer, model_path

    assert Translator.load(trained_experiment, trained_experiment.load_config()).unicode_form == "NFC"
    rng = random.Random(0)
    words = ["café", "élan", "naïve", "déjà", "vu", "über", "straße", "œuvre"]
    lines = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(300)]
    train_spm(lines, tmp_path / "spm", TokenizerConfig(vocab_size=30, byte_fallback=False, normalization="identity"))
    tok = Tokenizer.load(model_path(tmp_path / "spm"))
    translator = Translator(tiny_model(vocab=tok.vocab_size), tok, tok, DecodeConfig())
    text = "café déjà vu"
    decomposed = unicodedata.normalize("NFD", text)
    assert translator.encode_lines([decomposed])[1] != translator.encode_lines([text])[1]  # the tokenizer: as is
    translator.unicode_form = "NFC"
    assert translator.encode_lines([decomposed])[1] == translator.encode_lines([text])[1]


def test_output_dash_is_stdout_as_input_dash_is_stdin(trained_experiment, tmp_path, capsys, monkeypatch):
    """Was: a file named "-" in the working directory, and nothing on stdout."""
    monkeypatch.chdir(tmp_path)
    exp = ("translate", "--exp", trained_experiment.root, "--threads", "1")
    code, plain, err = mt(capsys, monkeypatch, *exp, stdin="Der Hund.\n")
    assert code == 0 and plain != "", err
    code, out, err = mt(capsys, monkeypatch, *exp, "--output", "-", stdin="Der Hund.\n")
    assert code == 0 and out == plain, err
    assert not (tmp_path / "-").exists()
    (tmp_path / "-").write_text("a file named -\n")  # refused as an --output that exists (was)
    code, out, err = mt(capsys, monkeypatch, *exp, "--output", "-", "--input", "-", stdin="Der Hund.\n")
    assert code == 0 and out == plain, err
    assert (tmp_path / "-").read_text() == "a file named -\n"


def test_the_input_is_never_its_own_output_even_with_force(trained_experiment, tmp_path):
    """In line mode `--input X --output X --force` replaced the text with its translation."""
    source = tmp_path / "text.de"
    source.write_text("Der Hund.\n", encoding="utf-8")
    for flags in ((), ("--scores",)):
        done = mt_translate(trained_experiment, "", "--input", str(source), "--output", str(source), "--force", *flags)
        assert done.returncode == 2 and b"is the input" in done.stderr, done.stderr
    assert source.read_text(encoding="utf-8") == "Der Hund.\n"


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, said", [("SIGTERM", 143, "terminated"), ("SIGINT", 130, "interrupted")])
def test_a_signal_leaves_no_temporary_output_and_says_why_it_stopped(trained_experiment, tmp_path, sig, code, said):
    """SIGTERM killed the process where it was: --output's temporary file stayed beside it; and Ctrl-C's
    exit said nothing (typer turns it into exit code 130 before mt sees it). Started with the signals
    blocked, as a parent's mask may leave them (this suite's worker did, at times): it ran to its end,
    exit 0, the signal pending."""
    import signal
    import time

    out = tmp_path / "out.txt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mt", "translate", "--exp", str(trained_experiment.root), "--output", str(out)],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}))
    assert process.stdin is not None
    process.stdin.write(b"Ein Hund.\n")
    process.stdin.flush()  # and the input left open: it waits for more
    deadline = time.time() + 120
    while not list(tmp_path.glob("*.tmp")):
        assert process.poll() is None and time.time() < deadline, "the output's temporary never appeared"
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(getattr(signal, sig))
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err.decode()
    assert err.decode().strip().splitlines()[-1] == said and "Traceback" not in err.decode()
    assert sorted(tmp_path.iterdir()) == []  # no temporary, and no output: nothing was finished


def test_input_from_a_fifo_and_results_in_utf8_whatever_the_locale(trained_experiment, tmp_path):
    """`--input <(...)` and a FIFO were "no such input file"; under a latin-1 locale the first
    character it lacks was a traceback (results are UTF-8, as --output files are)."""
    import threading

    lines = toy_corpus(6, seed=11)[0]
    fifo = tmp_path / "in.de"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=("\n".join(lines) + "\n",), daemon=True)
    writer.start()
    done = mt_translate(trained_experiment, "", "--input", str(fifo))
    expected = translate_text(Translator.load(trained_experiment, trained_experiment.load_config()), lines)
    assert done.returncode == 0 and done.stdout.decode().splitlines() == expected, done.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "latin-1"}
    text = "東京大学の図書館はとても大きい。\n"  # unreadable to the model: copied as it is, not in latin-1
    latin = subprocess.run([sys.executable, "-m", "mt", "translate", "--exp", str(trained_experiment.root),
                            "--threads", "1"], input=text.encode("utf-8"), capture_output=True, env=env, timeout=300)
    assert latin.returncode == 0 and b"Traceback" not in latin.stderr, latin.stderr
    assert latin.stdout == text.encode("utf-8")  # copied as it is, in UTF-8


def test_a_reader_that_leaves_ends_mt_as_it_ends_unix_tools(trained_experiment):
    """`mt translate | head -1`: stop quietly with SIGPIPE's 141, as `yes | head` ends `yes` (it was 1, the
    code of a failure the input caused)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "mt", "translate", "--exp", str(trained_experiment.root),
                                "--threads", "1", "--buffer", "4"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    process.stdout.close()  # the reader gone before the first translation
    _, err = process.communicate(("Ein Mann.\n" * 400).encode(), timeout=300)
    assert process.returncode == 141 and b"error" not in err and b"Traceback" not in err, err


def test_an_ensemble_of_one_model_twice_is_refused(trained_experiment):
    """`--checkpoint last --checkpoint best` without best.pt (best falls back to last) decoded an
    ensemble of last.pt with itself: twice the search, recorded as two models."""
    last = trained_experiment.checkpoint_path("last")
    cfg = trained_experiment.load_config()
    with pytest.raises(ConfigError, match=r"--checkpoint last and .*last\.pt are the same file"):
        Translator.load(trained_experiment, cfg, checkpoint=["last", str(last)])
    with pytest.raises(ConfigError, match="--checkpoint last given twice"):
        Translator.load(trained_experiment, cfg, checkpoint=["last", "last"])


def test_a_closed_stdin_is_one_line_and_a_long_piped_line_arrives_whole(trained_experiment):
    """`mt translate <&-` was an AttributeError traceback; a line arriving in many blocks through a
    pipe is one line (its blocks are no longer scanned again for a line break each time)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-m", "mt", "translate", "--exp", str(trained_experiment.root), "--threads", "1"]
    done = subprocess.run(args, capture_output=True, env=env, timeout=300, preexec_fn=lambda: os.close(0))
    assert done.returncode == 1 and b"Traceback" not in done.stderr and b"stdin is closed" in done.stderr
    long = ("Der Hund läuft. " * 20_000).strip()  # 320,000 characters, five 64 KiB blocks
    piped = subprocess.run(args + ["--alignments"], input=f"{long}\nDer Hund.\n".encode(), capture_output=True,
                           env=env, timeout=300)
    assert piped.returncode == 0 and piped.stdout.count(b"\n") == 2, piped.stderr
