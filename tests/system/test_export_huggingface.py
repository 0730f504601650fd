"""`mt export --format huggingface`: transformers, and ONNX Runtime through Optimum, compute and
translate as mt does.

Levels as for CTranslate2 (tests/system/test_export.py): every token's log-probability equals mt's for
random tiny models of each layout (tied or not, joint or separate vocabularies), reloaded from the
written files; a trained tiny model's greedy output equals mt's token for token through
`generate()` and through ONNX Runtime, and beam 5 agrees under the parity settings; the tokenizer
gives mt's ids; and the command line: the files, their modes, the model card, the refusals, --force.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch
from helpers import REPO, one_thread, tiny_experiment, toy_corpus

from mt.apps.export.directory import export
from mt.apps.export.huggingface import channel_order, self_check, to_marian
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.checkpoint_file import load_checkpoint, save_checkpoint
from mt.model.transformer import Transformer
from mt.search.beam import beam_search
from mt.search.single_path import greedy_search
from mt.search.steps import max_lengths
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID

transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[huggingface]'")

SENTENCES = 300


# -- the network: every weight mapped ----------------------------------------------------------------------
def _random_model(tie: bool, shared: bool, src_vocab: int, tgt_vocab: int) -> Transformer:
    torch.manual_seed(7)
    model = Transformer(src_vocab, tgt_vocab, d_model=16, d_ff=32, n_heads=4, enc_layers=2, dec_layers=3,
                        dropout=0.1, tie_embeddings=tie, shared_vocab=shared, max_positions=64)
    with torch.no_grad():
        for param in model.parameters():  # every parameter off its initial value: LayerNorm gains, biases
            param.add_(torch.randn_like(param) * 0.2)
    return model.eval()


def test_the_channel_order_turns_mt_sinusoids_into_marians():
    order = channel_order(6)
    assert order.tolist() == [0, 2, 4, 1, 3, 5]


@pytest.mark.parametrize("tie, shared, sizes", [(True, True, (40, 40)), (False, True, (40, 40)),
                                                (True, False, (36, 44)), (False, False, (44, 36))])
def test_every_token_scores_as_in_mt_after_a_reload(tmp_path, single_thread, tie, shared, sizes):
    model = _random_model(tie, shared, *sizes)
    marian = to_marian(model)
    assert self_check(model, marian) < 1e-4  # the check every export runs before writing
    marian.save_pretrained(str(tmp_path), safe_serialization=True)
    marian = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path)).eval()
    assert type(marian).__name__ == "MarianMTModel"
    gen = torch.Generator().manual_seed(1)
    lengths = [(int(torch.randint(1, 30, (1,), generator=gen)), int(torch.randint(1, 30, (1,), generator=gen)))
               for _ in range(8)]
    src = torch.full((len(lengths), 31), PAD_ID)
    tgt = torch.full((len(lengths), 31), PAD_ID)
    for row, (n, m) in enumerate(lengths):  # right-padded, each its own length: the masks must be right too
        src[row, :n] = torch.randint(4, sizes[0], (n,), generator=gen)
        src[row, n] = EOS_ID
        tgt[row, 0] = BOS_ID
        tgt[row, 1:m + 1] = torch.randint(4, sizes[1], (m,), generator=gen)
    with torch.no_grad():
        mine = model(src, tgt).log_softmax(-1)
        theirs = marian(input_ids=src, attention_mask=src != PAD_ID, decoder_input_ids=tgt).logits.log_softmax(-1)
    assert theirs.size(-1) == max(sizes)  # both sides padded to the larger vocabulary, never generated
    for row, (_, m) in enumerate(lengths):
        assert torch.allclose(theirs[row, :m + 1, :sizes[1]], mine[row, :m + 1], atol=1e-4), (tie, shared)
        assert (theirs[row, :m + 1, sizes[1]:] < -1000).all()


def test_a_tensor_the_mapping_does_not_know_is_refused():
    model = _random_model(True, True, 40, 40)
    model.register_parameter("gate", torch.nn.Parameter(torch.ones(16)))  # e.g. a later mt's new weight
    with pytest.raises(MtError, match="does not map gate"):
        to_marian(model)


# -- a trained model: translations ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The paper's layout (post-norm, one joint vocabulary, three-way tied embeddings), exported."""
    root = tmp_path_factory.mktemp("hf")
    exp, cfg = tiny_experiment(
        root, {"train": 800, "valid": 20, "test": 20}, model=dict(enc_layers=2, dec_layers=2, dropout=0.0),
        train=dict(max_steps=250, max_tokens=1000, lr_peak=3e-3, warmup_steps=20, log_every=50,
                   valid_every=10_000, save_every=10_000),
        decode=dict(max_len_b=10))
    from mt.training.loop import train

    with one_thread():
        train(exp, cfg)
        export(exp, cfg, root / "hf", fmt="huggingface")
    return exp


def _load_hf(directory: Path):
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(directory)).eval()
    return model, transformers.AutoTokenizer.from_pretrained(str(directory))


def _generated(model, input_ids: torch.Tensor, **options) -> list[list[int]]:
    """generate()'s tokens per row, without the decoder's start token and from </s> on."""
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=input_ids != PAD_ID, **options)
    rows = []
    for row in out.tolist():
        row = row[1:]
        rows.append(row[:row.index(EOS_ID)] if EOS_ID in row else row)
    return rows


def _both(exp, lines: list[str], search, **options):
    """(mt's tokens, whether mt ended before its length limit, generate()'s tokens) per line. Sources of one
    length go together, so that generate()'s one max_new_tokens is each sentence's own limit."""
    cfg = exp.load_config()
    mt = Translator.load(exp, cfg)
    model, _ = _load_hf(exp.root.parent / "hf")
    encoded = mt.src_tok.encode(lines)
    a, b = cfg.decode.max_len_a, cfg.decode.max_len_b
    results = [None] * len(lines)
    for length in sorted({len(ids) for ids in encoded}):
        group = [i for i, ids in enumerate(encoded) if len(ids) == length]
        src_ids = torch.tensor([encoded[i] + [EOS_ID] for i in group])
        limit = int(max_lengths(src_ids, a, b, mt.model.max_positions - 1)[0])
        ours = search(mt.model, src_ids, a, b)
        theirs = _generated(model, src_ids, max_new_tokens=limit, **options)
        for i, hyp, tokens in zip(group, ours, theirs):
            results[i] = (hyp.tokens, len(hyp.tokens) + 1 < limit, tokens)
    return results, mt


def _check_same(results, share: float) -> list:
    ended = [(ours, theirs) for ours, before_limit, theirs in results if before_limit]
    assert len(ended) >= 0.8 * len(results), "most outputs must end before the length limit for the test to mean anything"
    assert len({tuple(ours) for ours, _ in ended}) >= 0.5 * len(ended), "the model must tell inputs apart"
    differing = [k for k, (ours, theirs) in enumerate(ended) if ours != theirs]
    assert len(differing) <= (1 - share) * len(ended), \
        f"{len(differing)} of {len(ended)} outputs differ, e.g. {ended[differing[0]]}"
    return ended


def test_greedy_output_equals_mt_token_for_token(trained):
    lines = toy_corpus(SENTENCES, seed=123)[0]
    with one_thread():
        results, _ = _both(trained, lines, greedy_search, num_beams=1, do_sample=False)
    _check_same(results, 1.0)


def test_beam_5_under_the_parity_settings(trained):
    """mt's `--length-penalty length` is generate()'s length_penalty: both divide by |Y|^alpha, </s> counted."""
    src, refs = toy_corpus(SENTENCES, seed=123)

    def mt_beam(model, src_ids, a, b):
        return [hyps[0] for hyps in beam_search(model, src_ids, 5, 0.6, "length", a, b, stop="early")]

    with one_thread():
        results, mt = _both(trained, src, mt_beam, num_beams=5, length_penalty=0.6, early_stopping=True)
    _check_same(results, 0.98)
    kept = [(ours, theirs, ref) for (ours, before_limit, theirs), ref in zip(results, refs) if before_limit]
    references = [[ref for _, _, ref in kept]]
    bleu = sacrebleu.corpus_bleu(mt.tgt_tok.decode([ours for ours, _, _ in kept]), references).score
    assert abs(bleu - sacrebleu.corpus_bleu(mt.tgt_tok.decode([t for _, t, _ in kept]), references).score) <= 0.1
    assert bleu > 5, "the model must have learned something"


def test_the_written_generation_config_is_mts_search(trained):
    """generate() with no options: the experiment's beam and alpha, <pad> and <s> never produced."""
    model, tokenizer = _load_hf(trained.root.parent / "hf")
    cfg = trained.load_config()
    config = model.generation_config
    assert (config.num_beams, config.length_penalty, config.decoder_start_token_id) == \
        (cfg.decode.beam, cfg.decode.alpha, BOS_ID)
    assert set(config.suppress_tokens) == {PAD_ID, BOS_ID} and config.forced_eos_token_id == EOS_ID
    lines = toy_corpus(6, seed=9)[0]
    with one_thread(), torch.no_grad():
        out = model.generate(**tokenizer(lines, return_tensors="pt", padding=True))
    assert (out[:, 1:] != BOS_ID).all() and all(EOS_ID in row for row in out.tolist())
    for row in out.tolist():  # <pad> only after </s>
        assert PAD_ID not in row[1:row.index(EOS_ID)]
    texts = tokenizer.batch_decode(out, skip_special_tokens=True)
    assert len(texts) == 6 and all(text.strip() for text in texts)
    # transformers' translation pipeline set its own num_beams=4 over it: the task's parameters say mt's
    from transformers import pipeline

    translate = pipeline("translation", model=model, tokenizer=tokenizer)
    assert translate.model.config.task_specific_params["translation"]["num_beams"] == cfg.decode.beam
    with one_thread():
        assert [t["translation_text"] for t in translate(lines)] == texts


def _real_lines() -> list[str]:
    """Real text: the lines of mt's docs, and lines of what byte fallback encodes (emoji, CJK, scripts
    the tokenizer never saw), mt's special pieces written as text, odd whitespace."""
    docs = REPO / "docs"
    lines = [line for path in sorted(docs.glob("*.md")) for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    return lines[:500] + ["Der Hund läuft im Park.", "Ein Mann spielt 😀 im 公园.", "Ελληνικά και русский текст",
                          "a literal </s> and <s> and <pad> in text", "  two  spaces  ", "Tab\tseparated",
                          "ÄÖÜ ß é ñ ﬁ", "<unk>", "not a >>de<< tag in the middle", "🙂🙃"]


@pytest.mark.parametrize("joint", [True, False])
def test_the_tokenizer_gives_mts_ids(tmp_path, joint):
    """MarianTokenizer over mt's SentencePiece models: mt's ids and </s>, for sources and targets, byte
    fallback included."""
    from types import SimpleNamespace

    from mt.apps.export.exported import Exported
    from mt.apps.export.huggingface import write_tokenizer
    from mt.config.schema import ExperimentConfig, TokenizerConfig
    from mt.data.train_tokenizer import train_spm
    from mt.tokenizer import Tokenizer, model_path

    lines = _real_lines()
    assert len(lines) >= 300
    tokenizers = []
    for name, size, corpus in (("src", 600, lines[::2]), ("tgt", 500, lines[1::2]))[:1 if joint else 2]:
        train_spm(corpus, tmp_path / name, TokenizerConfig(vocab_size=size, byte_fallback=True))
        tokenizers.append(Tokenizer.load(model_path(tmp_path / name)))
    src_tok, tgt_tok = tokenizers[0], tokenizers[-1]
    model = SimpleNamespace(max_positions=1024)
    write_tokenizer(tmp_path, Exported(None, ExperimentConfig(), tmp_path, {}, model, src_tok, tgt_tok))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    src_ids = src_tok.encode(lines)
    assert any(src_tok.pieces(ids).count("<0xF0>") for ids in src_ids), "byte fallback must be exercised"
    assert tokenizer(lines)["input_ids"] == [ids + [EOS_ID] for ids in src_ids]
    assert tokenizer(text_target=lines)["input_ids"] == [ids + [EOS_ID] for ids in tgt_tok.encode(lines)]
    assert tokenizer.batch_decode(src_ids[:50] if joint else tgt_tok.encode(lines[:50]), skip_special_tokens=True) \
        == tgt_tok.decode(src_ids[:50] if joint else tgt_tok.encode(lines[:50]))


# -- ONNX, through Optimum ----------------------------------------------------------------------------------
def test_onnx_runtime_translates_as_mt_does(trained, tmp_path):
    pytest.importorskip("optimum.onnxruntime", reason="optimum-onnx is not installed: pip install -e '.[onnx]'")
    from optimum.exporters.onnx import main_export
    from optimum.onnxruntime import ORTModelForSeq2SeqLM

    with one_thread():
        main_export(str(trained.root.parent / "hf"), output=str(tmp_path), task="text2text-generation-with-past")
    assert {"encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"} <= \
        {p.name for p in tmp_path.iterdir()} or (tmp_path / "decoder_model_merged.onnx").is_file()
    ort = ORTModelForSeq2SeqLM.from_pretrained(str(tmp_path))
    cfg = trained.load_config()
    mt = Translator.load(trained, cfg)
    lines = toy_corpus(60, seed=321)[0]
    encoded = mt.src_tok.encode(lines)
    same = ended = 0
    for ids in encoded:
        src_ids = torch.tensor([ids + [EOS_ID]])
        limit = int(max_lengths(src_ids, cfg.decode.max_len_a, cfg.decode.max_len_b, mt.model.max_positions - 1)[0])
        ours = greedy_search(mt.model, src_ids, cfg.decode.max_len_a, cfg.decode.max_len_b)[0].tokens
        if len(ours) + 1 < limit:
            ended += 1
            same += _generated(ort, src_ids, max_new_tokens=limit, num_beams=1, do_sample=False)[0] == ours
    assert ended >= 48 and same == ended


# -- refusals and the command line ----------------------------------------------------------------------
def test_a_pre_norm_model_is_refused_in_one_line_and_nothing_is_written(trained, tmp_path):
    state = load_checkpoint(trained.find_checkpoint("last"))
    state["model_config"]["pre_norm"] = True
    save_checkpoint(tmp_path / "pre.pt", state)
    with pytest.raises(MtError, match="model.pre_norm is true") as refused:
        export(trained, trained.load_config(), tmp_path / "out", fmt="huggingface", checkpoint=str(tmp_path / "pre.pt"))
    assert "\n" not in str(refused.value) and "--format ctranslate2" in str(refused.value)
    assert [p.name for p in tmp_path.iterdir()] == ["pre.pt"]
    with pytest.raises(ConfigError, match="--quantize is for --format ctranslate2"):
        export(trained, trained.load_config(), tmp_path / "out", fmt="huggingface", quantize="int8")
    with pytest.raises(ConfigError, match="--license 'MIT License'"):
        export(trained, trained.load_config(), tmp_path / "out", fmt="huggingface", license="MIT License")


def test_a_greedy_experiment_exports_a_greedy_search(trained, tmp_path):
    cfg = trained.load_config()
    cfg.decode.beam = 1
    export(trained, cfg, tmp_path / "hf", fmt="huggingface")
    config = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert config.get("num_beams", 1) == 1 and "length_penalty" not in config and "early_stopping" not in config  # 1: the default, not written
    assert transformers.GenerationConfig.from_pretrained(str(tmp_path / "hf")).num_beams == 1
    card = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")  # it said early_stopping and a penalty
    search = card.split("## Translating as mt does")[1].split("## Results")[0]
    assert "greedy (`num_beams=1`)" in search and "early_stopping" not in search and "length_penalty" not in search


def _mt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    env.pop("MT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, env=env, timeout=300)


def test_cli_writes_a_model_card_and_readable_files(trained, tmp_path):
    out, exp = tmp_path / "hf", str(trained.root)
    done = _mt("export", "--exp", exp, "--format", "huggingface", "--output", str(out), "--license", "cc-by-4.0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}\n"
    names = sorted(p.name for p in out.iterdir())
    for name in ("README.md", "config.json", "generation_config.json", "model.safetensors", "source.spm",
                 "target.spm", "tokenizer_config.json", "vocab.json"):
        assert name in names, names
    umask = os.umask(0)
    os.umask(umask)
    assert (out.stat().st_mode & 0o777) == 0o777 & ~umask
    assert all((out / name).stat().st_mode & 0o777 == 0o666 & ~umask for name in names)
    card = (out / "README.md").read_text(encoding="utf-8")
    header = card.split("---\n")[1]
    assert "license: cc-by-4.0" in header and "- de\n- en" in header and "pipeline_tag: translation" in header
    assert "AutoModelForSeq2SeqLM" in card and "optimum-cli export onnx" in card
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["MarianMTModel"] and config.get("forced_eos_token_id") is None

    refused = _mt("export", "--exp", exp, "--format", "huggingface", "--output", str(out))
    assert refused.returncode == 1 and "--force" in refused.stderr and "Traceback" not in refused.stderr
    done = _mt("export", "--exp", exp, "--format", "ctranslate2", "--output", str(out), "--force")
    assert done.returncode == 0, done.stderr  # an earlier export of either format may be replaced
    assert (out / "model.bin").is_file() and not (out / "model.safetensors").exists()
    refused = _mt("export", "--exp", exp, "--format", "huggingface", "--output", str(tmp_path / "x"), "--quantize", "int8")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--quantize" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"], "no temporary directory left beside it"


def test_the_model_card_of_the_papers_schedule_gives_its_peak(trained):
    """train.lr_peak unset (the default: lr from d_model and the warm-up, Sec. 5.3) has a peak too."""
    from mt.apps.export.directory import load_exported
    from mt.apps.export.huggingface import check_model
    from mt.apps.export.model_card import model_card
    from mt.training.schedule import peak_lr

    cfg = trained.load_config()
    cfg.train.lr_peak = None
    card = model_card(load_exported(trained, cfg, None, check_model), "unknown", 0.0)
    peak = peak_lr(None, cfg.train.lr_scale, cfg.train.warmup_steps, cfg.model.d_model)
    assert f"peak learning rate {peak:.3g} (the paper's schedule)" in card


def test_the_model_card_does_not_give_scores_of_earlier_weights_as_the_models(trained, tmp_path):
    """Was: update 3's BLEU in the card (and the Hub's model-index) of a checkpoint trained on to update 6."""
    import shutil

    from mt.apps.evaluate import evaluate_split
    from mt.apps.export.directory import load_exported
    from mt.apps.export.huggingface import check_model
    from mt.apps.export.model_card import model_card
    from mt.experiment.paths import Experiment

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained.root, exp.root)
    cfg = exp.load_config()
    cfg.decode.checkpoint = "last"
    cfg.decode.length_penalty = "length"  # a search transformers' generate() makes as mt does
    evaluate_split(exp, cfg, "test")
    fresh = model_card(load_exported(exp, cfg, "last", check_model), "unknown", 0.0)
    assert "model-index" in fresh and "| last.pt |" in fresh
    later = exp.score_path("test").stat().st_mtime + 10
    os.utime(exp.checkpoint_path("last"), (later, later))  # saved again after the scores
    stale = model_card(load_exported(exp, cfg, "last", check_model), "unknown", 0.0)
    assert "model-index" not in stale and "| last.pt before its last save |" in stale


def test_the_model_card_does_not_give_int8_or_another_searchs_scores_as_the_models(trained, tmp_path):
    """Was: scores of `mt evaluate --quantize int8` (or `--beam 1`) in the model-index of the float32 export."""
    import copy
    import shutil

    from mt.apps.evaluate import evaluate_split
    from mt.apps.export.directory import load_exported
    from mt.apps.export.huggingface import check_model
    from mt.apps.export.model_card import model_card
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained.root, exp.root)
    cfg = exp.load_config()
    cfg.decode.checkpoint = "last"
    cfg.decode.length_penalty = "length"  # a search transformers' generate() makes as mt does
    evaluate_split(exp, cfg, "test", translator=Translator.load(exp, cfg, quantize="int8"))
    card = model_card(load_exported(exp, cfg, "last", check_model), "unknown", 0.0)
    assert "model-index" not in card and ", int8 |" in card and "the header the Hub indexes leaves them out" in card
    other = copy.deepcopy(cfg)
    other.decode.beam = cfg.decode.beam + 1
    evaluate_split(exp, other, "test")
    card = model_card(load_exported(exp, cfg, "last", check_model), "unknown", 0.0)
    assert "model-index" not in card and f"| beam {cfg.decode.beam + 1}," in card
    evaluate_split(exp, cfg, "test")  # the export's own search, float32: the model's scores
    card = model_card(load_exported(exp, cfg, "last", check_model), "unknown", 0.0)
    assert "model-index" in card and "leaves them out" not in card
    # The GNMT penalty, which generate() does not have (it ranks by |Y|^alpha): not the export's scores
    gnmt = copy.deepcopy(cfg)
    gnmt.decode.length_penalty = "gnmt"
    evaluate_split(exp, gnmt, "test")
    card = model_card(load_exported(exp, gnmt, "last", check_model), "unknown", 0.0)
    assert "model-index" not in card and "GNMT length penalty transformers does not have" in card
    # ... but the search the export writes for a GNMT experiment, |Y|^alpha, is: scores of `mt evaluate
    # --length-penalty length` (as the docs say) were refused; and an experiment decoded with its shortlist
    # exports the whole vocabulary, whose scores are `--no-shortlist`'s (both: never in the header)
    evaluate_split(exp, cfg, "test")
    card = model_card(load_exported(exp, gnmt, "last", check_model), "unknown", 0.0)
    assert "model-index" in card
    listed = copy.deepcopy(cfg)
    listed.decode.shortlist = True
    card = model_card(load_exported(exp, listed, "last", check_model), "unknown", 0.0)
    assert "model-index" in card and "as `mt translate --no-shortlist`" in card
    # the card is published: corpora by their file names, not where they lay here
    local = [spec for spec in [*cfg.data.train, *cfg.data.test] if "/" in spec]
    assert local and not any(spec in card for spec in local) and str(tmp_path) not in card
    # A search the record leaves out when it is off: a score of --no-repeat-ngram was taken for the
    # model's own (the export's generation_config writes none)
    guarded = copy.deepcopy(cfg)
    guarded.decode.no_repeat_ngram = 3
    evaluate_split(exp, guarded, "test")
    card = model_card(load_exported(exp, cfg, "last", check_model), "unknown", 0.0)
    assert "model-index" not in card


def test_the_model_card_describes_the_checkpoints_model_and_says_one_from_elsewhere(trained, tmp_path):
    """The card's model line came from the experiment's config, and its data and training lines said
    nothing of a --checkpoint from another experiment (a student sharing the tokenizer, say)."""
    import shutil

    from mt.apps.export.directory import load_exported
    from mt.apps.export.huggingface import check_model
    from mt.apps.export.model_card import model_card

    cfg = trained.load_config()
    elsewhere = tmp_path / "student.pt"
    shutil.copy(trained.checkpoint_path("last"), elsewhere)
    source = load_exported(trained, cfg, str(elsewhere), check_model)
    heads = source.state["model_config"]["n_heads"]
    source.state["model_config"] = {**source.state["model_config"], "n_heads": heads * 2, "pre_norm": True}
    card = model_card(source, "unknown", 0.0)
    assert f"{heads * 2} heads, pre-norm" in card and "student.pt, comes from outside this experiment" in card
    own = model_card(load_exported(trained, cfg, "last", check_model), "unknown", 0.0)
    assert f"{cfg.model.n_heads} heads, post-norm" in own and "outside this experiment" not in own
