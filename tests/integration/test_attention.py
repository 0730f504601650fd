"""Attention weights, alignments and heatmaps.

The capture path must not change what the model computes, its weights must be distributions that
respect the masks, and the forced decode must see the weights the cached search saw. On a tiny
trained experiment: `mt attention` writes real heatmaps and JSON, refuses to overwrite, and
`mt translate --alignments` writes one line per input line with indices inside both sentences.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import mt as in_process
from helpers import tiny_model, toy_corpus

from mt.apps.report.attention_maps import attention, forced_attention
from mt.decoding.alignment import (
    alignment_weights,
    hard_alignment,
    output_word_index,
    source_word_index,
    word_alignment,
)
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.model.attention import capture_attention
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def batch(seed: int = 1) -> tuple[torch.Tensor, list[list[int]]]:
    """Two sources of different lengths (the second padded) and a target for each."""
    rng = random.Random(seed)
    src = torch.full((2, 7), PAD_ID, dtype=torch.long)
    src[0, :6] = torch.tensor([rng.randrange(4, 64) for _ in range(6)])
    src[0, 6] = EOS_ID
    src[1, :3] = torch.tensor([rng.randrange(4, 64) for _ in range(3)])
    src[1, 3] = EOS_ID
    tokens = [[rng.randrange(4, 64) for _ in range(5)], [rng.randrange(4, 64) for _ in range(2)]]
    return src, tokens


def test_capture_keeps_the_outputs_and_its_weights_are_masked_distributions():
    model = tiny_model(64, n_heads=2, dropout=0.0)
    src, tokens = batch()
    tgt_in = torch.tensor([[BOS_ID, *tokens[0]], [BOS_ID, *tokens[1], PAD_ID, PAD_ID, PAD_ID]])
    with torch.no_grad():
        plain = model(src, tgt_in)
        modules = [m for m in model.modules() if hasattr(m, "store_weights")]
        with capture_attention(modules):
            captured = model(src, tgt_in)
            weights = {id(m): m.weights for m in modules}
    assert torch.allclose(plain, captured, atol=1e-5)
    assert all(not m.store_weights and m.weights is None for m in modules)
    for layer in model.decoder:
        cross = weights[id(layer.cross_attn)]  # (batch, heads, tgt, src)
        assert torch.allclose(cross.sum(-1), torch.ones(cross.shape[:-1]), atol=1e-5)
        assert cross[1, :, :, 4:].abs().max() == 0  # the padded source positions get nothing
        self_attn = weights[id(layer.self_attn)]  # (batch, heads, tgt, tgt)
        assert torch.triu(self_attn[0, 0], diagonal=1).abs().max() == 0  # causal: no future positions
    for layer in model.encoder:
        enc = weights[id(layer.self_attn)]
        assert torch.allclose(enc.sum(-1), torch.ones(enc.shape[:-1]), atol=1e-5)


def test_forced_decode_sees_what_incremental_decoding_saw():
    model = tiny_model(64, n_heads=2, dropout=0.0)
    src, tokens = batch()
    forced = forced_attention(model, src, tokens)
    assert forced[0]["cross"].shape == (2, 2, 6, 7) and forced[1]["cross"].shape == (2, 2, 3, 4)
    assert forced[1]["encoder"].shape == (2, 2, 4, 4)
    # the same sentence decoded one token at a time with the cache, as the search does
    memory, src_mask = model.encode(src[1:])
    cache = model.new_cache()
    steps = []
    with torch.no_grad(), capture_attention([layer.cross_attn for layer in model.decoder]) as modules:
        for token in [BOS_ID, *tokens[1]]:
            model.decode(torch.tensor([[token]]), memory, src_mask, cache)
            steps.append(torch.stack([m.weights[0, :, 0, :4] for m in modules]))  # (layers, heads, src)
    assert torch.allclose(torch.stack(steps, dim=2), forced[1]["cross"], atol=1e-5)
    averaged = alignment_weights(model, src, tokens, layer=-1)
    assert torch.allclose(averaged[1], forced[1]["cross"][-1].mean(0), atol=1e-6)


def test_threads_capturing_the_same_modules_at_once_each_read_their_own_weights():
    """mt serve aligns two batches side by side on one model: each thread's capture keeps its own
    passes' weights, and a thread that does not capture is not slowed into keeping any."""
    import threading

    model = tiny_model(64, n_heads=2, dropout=0.0).eval()
    inputs = [batch(seed) for seed in range(6)]
    alone = [alignment_weights(model, src, tokens, layer=-1) for src, tokens in inputs]
    start, failures = threading.Barrier(3), []

    def align(mine: list[int]) -> None:
        start.wait()
        for _ in range(20):
            for i in mine:
                try:
                    got = alignment_weights(model, *inputs[i], layer=-1)
                except Exception as exc:  # another thread's capture ending under this one's pass
                    failures.append(f"{i}: {type(exc).__name__}")
                    continue
                if not all(torch.equal(a, b) for a, b in zip(got, alone[i])):
                    failures.append(f"{i}: other weights")

    def plain() -> None:
        start.wait()
        with torch.no_grad():
            for _ in range(20):
                model(inputs[0][0], torch.tensor([[BOS_ID, 5, 6], [BOS_ID, 7, PAD_ID]]))

    threads = [threading.Thread(target=align, args=([0, 1, 2],)), threading.Thread(target=align, args=([3, 4, 5],)),
               threading.Thread(target=plain)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, f"passes read another thread's weights: {sorted(set(failures))}"
    modules = [m for m in model.modules() if hasattr(m, "store_weights")]
    assert all(not m.store_weights and m.weights is None and not m._kept for m in modules)


def test_hard_alignment_leaves_out_end_of_sentence_and_words_pair_up_once():
    weights = torch.tensor([[0.1, 0.7, 0.2],   # output token 0 -> source token 1
                            [0.3, 0.1, 0.6],   # output token 1 -> source EOS: left out, best real one is 0
                            [0.0, 0.0, 1.0]])  # output EOS: no alignment
    assert hard_alignment(weights) == [(1, 0), (0, 1)]
    assert hard_alignment(torch.ones(1, 4) / 4) == []
    # source tokens 0,1 form word 0 and token 2 word 1; output tokens 0 and 1 form word 0
    assert word_alignment([(0, 0), (1, 1), (2, 1)], [0, 0, 1], [0, 0]) == "0-0 1-0"


# -- on a tiny trained experiment (conftest's trained_experiment) ---------------------------------
@pytest.fixture
def mt(capsys, monkeypatch):
    """`mt ARGS` in this process, run beside the experiment (its --exp is "exp") with `stdin`: as a
    finished process would say it (the command's output and messages, not the process, are tested)."""

    def run(exp: Experiment, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
        monkeypatch.chdir(exp.root.parent)
        code, out, err = in_process(capsys, monkeypatch, *args, stdin=stdin)
        return subprocess.CompletedProcess(list(args), code, out, err)

    return run


@pytest.mark.slow
def test_attention_writes_heatmaps_and_weights_and_never_overwrites_silently(trained_experiment, tmp_path, capsys):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    out = tmp_path / "att"
    maps, files = attention(translator, "Der hund läuft im park.", out, layer=0, encoder=True, fmt="both")
    names = sorted(p.name for p in files)
    assert names == ["alignment.png", "attention.json", "cross-attention-layer1-heads.png", "cross-attention.png",
                     "encoder-self-attention.png"]
    for path in files:
        if path.suffix == ".png":
            width, height = png_size(path)
            assert width >= 300 and height >= 200 and path.stat().st_size > 5_000, (path, width, height)
    data = json.loads((out / "attention.json").read_text())
    assert data["translation"] == maps.translation == translator.translate(["Der hund läuft im park."])[0]
    cross = torch.tensor(data["cross_attention"])  # (layers, heads, tgt, src)
    assert cross.shape == (2, 2, len(data["tgt_tokens"]), len(data["src_tokens"]))
    assert data["src_tokens"][-1] == data["tgt_tokens"][-1] == "</s>"
    assert torch.allclose(cross.sum(-1), torch.ones(cross.shape[:-1]), atol=1e-3)  # rounded to 5 digits
    encoder = torch.tensor(data["encoder_self_attention"])
    assert torch.allclose(encoder.sum(-1), torch.ones(encoder.shape[:-1]), atol=1e-3)
    assert data["alignment_layer"] == 1
    (text, _, aligned), = translator.search(["Der hund läuft im park."], DecodeOptions(alignment_layer=0))[0]
    assert aligned == maps.word_alignment == data["alignment_words"]  # as `mt translate --alignments`
    assert all(0 <= i < len(data["src_tokens"]) - 1 and 0 <= j < len(data["tgt_tokens"]) - 1 for i, j in data["alignment"])
    before = (out / "alignment.png").read_bytes()
    with pytest.raises(MtError, match="exists.*--force"):
        attention(translator, "Die katze.", out, fmt="png")
    assert (out / "alignment.png").read_bytes() == before
    forced, _ = attention(translator, "Die katze.", out, fmt="json", target="The cat sits.", force=True)
    assert forced.translation == "The cat sits."
    # a directory with another call's files (another layer, the other format) is refused too, and with
    # --force says which files are not this sentence's (they stood beside it without a word)
    other = tmp_path / "other"
    attention(translator, "Die katze.", other, layer=1, fmt="json")
    with pytest.raises(MtError, match="attention.json: exists"):
        attention(translator, "Der hund.", other, layer=0, fmt="png")
    capsys.readouterr()
    attention(translator, "Der hund.", other, layer=0, fmt="png", force=True)
    assert "still holds attention.json of an earlier call, not of this sentence" in " ".join(capsys.readouterr().err.split())


def test_word_indices_follow_the_whitespace_words_of_input_and_output(trained_experiment):
    tok = Translator.load(trained_experiment, trained_experiment.load_config()).src_tok
    # "," and "!" never occur in the corpus: without byte fallback they are unknown tokens,
    # which decode as " ⁇ ", with spaces that the input line did not have
    for line in ["Der hund läuft im park.", "Eine  katze,sitzt   auf dem haus !", "x", "  ,hund"]:
        ids = tok.encode([line])[0]
        for index, text in ((source_word_index(tok.pieces(ids)), line), (output_word_index(tok, ids), tok.decode([ids])[0])):
            assert len(index) == len(ids) and index[0] == 0
            assert index == sorted(index) and index[-1] == len(text.split()) - 1, (text, tok.pieces(ids), index)
    assert "⁇" in tok.decode([tok.encode(["katze,sitzt"])[0]])[0]  # the case above is really there


def test_an_alignment_layer_the_model_lacks_is_refused_before_the_search(trained_experiment):
    """From Python (the command line checks --alignment-layer itself): was an IndexError after the whole
    search, and -1 silently the last layer."""
    translator = Translator.load(trained_experiment, trained_experiment.load_config())  # 2 decoder layers
    for layer in (2, -1):
        with pytest.raises(ConfigError, match=f"^alignment_layer {layer}: the model has 2 decoder layers"):
            translator.search(["Der hund."], DecodeOptions(alignment_layer=layer))
    assert translator.search(["Der hund."], DecodeOptions(alignment_layer=1))[0][0][2] != ""


def test_translate_alignments_one_line_per_input_line(trained_experiment, mt):
    lines = toy_corpus(12, seed=7)[0]
    lines[3] = ""
    lines[8] = "   "
    done = mt(trained_experiment, "translate", "--exp", "exp", "--threads", "1", "--alignments", "--buffer", "5",
              stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    plain = Translator.load(trained_experiment, trained_experiment.load_config()).translate(lines)
    for line, row, translation in zip(lines, out, plain):
        text, alignment = row.split("\t")  # exactly one TAB on every line
        assert text == translation
        if not line.strip():
            assert row == "\t"
            continue
        for pair in alignment.split():
            i, j = map(int, pair.split("-"))
            assert 0 <= i < len(line.split()) and 0 <= j < len(text.split()), (line, row)
        if text:
            targets = {int(p.split("-")[1]) for p in alignment.split()}
            assert targets == set(range(len(text.split()))), row  # every output word is aligned
    scored = mt(trained_experiment, "translate", "--exp", "exp", "--threads", "1", "--alignments", "--scores",
                "--alignment-layer", "1", stdin=lines[0] + "\n")
    assert scored.returncode == 0, scored.stderr
    assert len(scored.stdout.rstrip("\n").split("\t")) == 3


def test_bad_requests_end_in_one_line(trained_experiment, mt):
    done = mt(trained_experiment, "attention", "--exp", "exp", "Der hund.", "--layer", "5")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "error: --layer 5: the model has 2 decoder layers (1-2)"
    done = mt(trained_experiment, "translate", "--exp", "exp", "--alignment-layer", "1", stdin="Der hund.\n")
    assert done.returncode == 2 and done.stderr.strip().endswith("--alignment-layer goes with --alignments")
    done = mt(trained_experiment, "attention", "--exp", "exp", "   ")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "empty" in done.stderr
    long = " ".join(["the dog"] * 1200)  # past the model's positions: its maps were of a shorter text, unsaid
    done = mt(trained_experiment, "attention", "--exp", "exp", "Der hund.", "--target", long, "--json")
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: --target: "), done.stderr
    assert "this model writes at most" in done.stderr
    done = mt(trained_experiment, "attention", "--exp", "exp", "Der hund.", "--engine", "ctranslate2")
    assert done.returncode == 2 and "--engine" in done.stderr  # mt's own search, whose attention it reads
    done = mt(trained_experiment, "attention", "--exp", "exp", "Der hund.", "--json", "--output", "elsewhere")
    assert done.returncode == 2 and done.stdout == ""  # was: exit 0, --output ignored
    assert done.stderr.strip().splitlines()[-1] == (
        "error: --output is for the files mt attention writes; --json prints the weights on stdout")
