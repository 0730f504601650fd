"""`mt export --format ctranslate2`: the exported model computes and translates as mt does.

Three levels: every token's log-probability equals mt's for random tiny models of each layout
(post-/pre-norm, tied or not, joint or separate vocabularies: the mapping of every weight); greedy
output equals mt's token for token, and beam 5 under the parity settings (docs/exporting.md) gives
the same lines with the same scores, on a few hundred sentences for two trained tiny models; and the
command line: the files, README.txt's recipe, the refusals, --force, int8. The trained models are trained until their outputs differ from
sentence to sentence, so that a wrong mapping cannot pass by producing one sentence everywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch
from helpers import one_thread, tiny_experiment, toy_corpus

from mt.apps.export.directory import export
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.checkpoint_file import load_checkpoint, save_checkpoint
from mt.model.ctranslate2_spec import build_spec
from mt.model.transformer import Transformer
from mt.search.beam import beam_search
from mt.search.single_path import greedy_search
from mt.search.steps import max_lengths
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID

ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install -e '.[test,export]'")

SENTENCES = 300


# -- the network: every weight mapped ----------------------------------------------------------------------
def _random_model(pre_norm: bool, tie: bool, shared: bool, src_vocab: int, tgt_vocab: int) -> Transformer:
    """A tiny model with every parameter (biases, LayerNorm gains included) moved off its initial value."""
    torch.manual_seed(7)
    model = Transformer(src_vocab, tgt_vocab, d_model=16, d_ff=32, n_heads=4, enc_layers=2, dec_layers=3,
                        dropout=0.1, pre_norm=pre_norm, tie_embeddings=tie, shared_vocab=shared, max_positions=64)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return model.eval()


def _vocab(size: int, prefix: str) -> list[str]:
    return ["<pad>", "<unk>", "<s>", "</s>"] + [f"{prefix}{i}" for i in range(4, size)]


def _logprobs(model: Transformer, src: list[int], tgt: list[int]) -> torch.Tensor:
    """mt's log-probability of each token of tgt + EOS given src, with <pad> and <s> out of the softmax
    as the export's bias on them puts them (mt/model/ctranslate2_spec.py): what CTranslate2 should compute."""
    with torch.no_grad():
        logits = model(torch.tensor([src + [EOS_ID]]), torch.tensor([[BOS_ID] + tgt]))[0]
    logits[:, [PAD_ID, BOS_ID]] = -torch.inf
    return logits.log_softmax(-1).gather(1, torch.tensor(tgt + [EOS_ID])[:, None]).squeeze(1)


@pytest.mark.parametrize("pre_norm, tie, shared", [(False, True, True), (True, True, True), (False, False, True),
                                                   (True, True, False), (False, False, False)])
def test_every_token_scores_as_in_mt(tmp_path, single_thread, pre_norm, tie, shared):
    src_size, tgt_size = (40, 40) if shared else (36, 44)
    model = _random_model(pre_norm, tie, shared, src_size, tgt_size)
    src_vocab, tgt_vocab = _vocab(src_size, "s" if not shared else "w"), _vocab(tgt_size, "w")
    spec = build_spec(model, src_vocab, tgt_vocab)
    spec.optimize()
    spec.save(str(tmp_path))
    translator = ctranslate2.Translator(str(tmp_path), device="cpu", intra_threads=1)
    gen = torch.Generator().manual_seed(1)
    pairs = [(torch.randint(4, src_size, (int(torch.randint(1, 30, (1,), generator=gen)),), generator=gen).tolist(),
              torch.randint(4, tgt_size, (int(torch.randint(1, 30, (1,), generator=gen)),), generator=gen).tolist())
             for _ in range(12)]
    scored = translator.score_batch([[src_vocab[i] for i in s] for s, _ in pairs], [[tgt_vocab[i] for i in t] for _, t in pairs])
    for (src, tgt), result in zip(pairs, scored):
        expected = _logprobs(model, src, tgt)
        assert result.tokens == [tgt_vocab[i] for i in tgt] + ["</s>"]
        assert torch.allclose(torch.tensor(result.log_probs), expected, atol=1e-4), (pre_norm, tie, shared)


def test_a_tensor_the_mapping_does_not_know_is_refused():
    model = _random_model(False, True, True, 40, 40)
    model.register_parameter("gate", torch.nn.Parameter(torch.ones(16)))  # e.g. a later mt's new weight
    with pytest.raises(MtError, match="does not map gate"):
        build_spec(model, _vocab(40, "w"), _vocab(40, "w"))


# -- trained models: translations ---------------------------------------------------------------------------
def _trained(root: Path, steps: int, model: dict, tokenizer: dict | None = None):
    exp, cfg = tiny_experiment(
        root, {"train": 800, "valid": 20, "test": 20}, model=dict(enc_layers=2, dec_layers=2, dropout=0.0, **model),
        train=dict(max_steps=steps, max_tokens=1000, lr_peak=3e-3, warmup_steps=20, log_every=50,
                   valid_every=10_000, save_every=10_000),
        decode=dict(max_len_b=10), tokenizer=tokenizer)
    from mt.training.loop import train

    with one_thread():
        train(exp, cfg)
    export(exp, cfg, root / "ct2")
    return exp


@pytest.fixture(scope="module")
def post_norm(tmp_path_factory):
    """The paper's layout: post-norm, one joint vocabulary, three-way tied embeddings."""
    return _trained(tmp_path_factory.mktemp("post_norm"), 250, {})


@pytest.fixture(scope="module")
def pre_norm(tmp_path_factory):
    """Pre-norm with the final LayerNorms, separate vocabularies (output tied to the target embeddings)."""
    return _trained(tmp_path_factory.mktemp("pre_norm"), 250, {"pre_norm": True}, {"joint": False, "vocab_size": 48})


def _both(exp, lines: list[str], beam: int, alpha: float = 0.0):
    """(mt's tokens, whether mt ended before its length limit, CTranslate2's tokens, the score CTranslate2
    should give mt's translation, the score it gives its own) per line. Sources of one length go together,
    so that CTranslate2's one max_decoding_length is each sentence's own limit. The score: log-probability
    without <pad> and <s> in the softmax (the export's bias), divided by |Y|^alpha, |Y| counting EOS."""
    cfg = exp.load_config()
    mt = Translator.load(exp, cfg)
    ct2 = ctranslate2.Translator(str(exp.root.parent / "ct2"), device="cpu", intra_threads=1)
    tgt_ids = {piece: i for i, piece in enumerate(mt.tgt_tok.pieces(list(range(mt.tgt_tok.vocab_size))))}
    encoded = mt.src_tok.encode(lines)
    a, b = cfg.decode.max_len_a, cfg.decode.max_len_b
    results = [None] * len(lines)
    for length in sorted({len(ids) for ids in encoded}):
        group = [i for i, ids in enumerate(encoded) if len(ids) == length]
        src_ids = torch.tensor([encoded[i] + [EOS_ID] for i in group])
        limit = int(max_lengths(src_ids, a, b, mt.model.max_positions - 1)[0])
        if beam == 1:
            ours = greedy_search(mt.model, src_ids, a, b)
        else:
            ours = [hyps[0] for hyps in beam_search(mt.model, src_ids, beam, alpha, "length", a, b, stop="early")]
        theirs = ct2.translate_batch([mt.src_tok.pieces(encoded[i]) for i in group], beam_size=beam, length_penalty=alpha,
                                     return_end_token=True, min_decoding_length=0, max_decoding_length=limit,
                                     max_input_length=mt.model.max_positions, return_scores=True)
        for i, hyp, result in zip(group, ours, theirs):
            ids = [tgt_ids[piece] for piece in result.hypotheses[0]]
            expected = float(_logprobs(mt.model, encoded[i], hyp.tokens).sum()) / (len(hyp.tokens) + 1) ** alpha
            results[i] = (hyp.tokens, len(hyp.tokens) + 1 < limit, ids[:-1] if ids[-1:] == [EOS_ID] else ids,
                          expected, result.scores[0])
    return results, mt


def _check_greedy(exp):
    lines = toy_corpus(SENTENCES, seed=123)[0]
    with one_thread():
        results, _ = _both(exp, lines, beam=1)
    ended = [(ours, theirs) for ours, before_limit, theirs, *_ in results if before_limit]
    assert len(ended) >= 0.8 * SENTENCES, "most outputs must end before the length limit for the test to mean anything"
    assert len({tuple(ours) for ours, _ in ended}) >= 0.5 * len(ended), "the model must tell inputs apart"
    differing = [k for k, (ours, theirs) in enumerate(ended) if ours != theirs]
    assert not differing, f"{len(differing)} of {len(ended)} greedy outputs differ, e.g. {ended[differing[0]]}"
    _check_scores(results)


def _check_scores(results) -> None:
    """Where the translations agree, so do the scores: the same log-probabilities, the same penalty."""
    gaps = [abs(expected - theirs) for ours, before_limit, same, expected, theirs in results if before_limit and ours == same]
    assert max(gaps) < 1e-3, f"scores differ by up to {max(gaps):.4f}"


@pytest.mark.slow
def test_greedy_output_equals_mt_token_for_token(post_norm):
    _check_greedy(post_norm)


@pytest.mark.slow
def test_pre_norm_model_with_separate_vocabularies_too(pre_norm):
    assert sorted(p.name for p in (pre_norm.root.parent / "ct2").glob("*vocabulary.json")) == \
        ["source_vocabulary.json", "target_vocabulary.json"]
    _check_greedy(pre_norm)


def test_beam_5_under_the_parity_settings(post_norm):
    src, refs = toy_corpus(SENTENCES, seed=123)
    with one_thread():
        results, mt = _both(post_norm, src, beam=5, alpha=0.6)
    kept = [(ours, theirs, ref) for (ours, before_limit, theirs, *_), ref in zip(results, refs) if before_limit]
    assert len(kept) >= 0.8 * SENTENCES
    same = sum(ours == theirs for ours, theirs, _ in kept)
    assert same >= 0.98 * len(kept), f"{len(kept) - same} of {len(kept)} beam outputs differ"
    ours_text = mt.tgt_tok.decode([ours for ours, _, _ in kept])
    theirs_text = mt.tgt_tok.decode([theirs for _, theirs, _ in kept])
    references = [[ref for _, _, ref in kept]]
    bleu = sacrebleu.corpus_bleu(ours_text, references).score
    assert abs(bleu - sacrebleu.corpus_bleu(theirs_text, references).score) <= 0.1
    assert bleu > 5, "the model must have learned something"
    _check_scores(results)


def test_the_shortlist_is_exported_as_a_vmap_that_ctranslate2_decodes_as_mt_does(post_norm, tmp_path):
    """vmap.txt is the shortlist: CTranslate2 with use_vmap=True scores the same candidates as mt's
    --shortlist, so greedy search gives the same tokens, sentence for sentence, on batches of one length."""
    from mt.data.shortlist import build_shortlist
    from mt.decoding.options import DecodeOptions
    from mt.experiment.paths import Experiment

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(post_norm.root, exp.root)
    cfg = exp.load_config()
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 2, 3
    tok = exp.load_tokenizers(True)[0]
    build_shortlist(exp, cfg, tok.vocab_size, tok.vocab_size)
    files = export(exp, cfg, tmp_path / "ct2")["files"]
    assert "vmap.txt" in files and "use_vmap=True" in (tmp_path / "ct2" / "README.txt").read_text()
    vmap = (tmp_path / "ct2" / "vmap.txt").read_text(encoding="utf-8").splitlines()
    assert vmap[0].startswith("\t") and len(vmap[0].split()) == 3 and all(len(line.split("\t")) == 2 for line in vmap)
    ours = Translator.load(exp, cfg)
    options = DecodeOptions(beam=1, shortlist=True).resolved(cfg.decode)
    ct2 = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    lines = toy_corpus(120, seed=321)[0]
    encoded = ours.src_tok.encode(lines)
    same = total = 0
    with one_thread():
        for length in sorted({len(ids) for ids in encoded}):
            group = [encoded[i] for i, ids in enumerate(encoded) if len(ids) == length]
            src_ids = ours.pad_sources(group)
            limit = int(max_lengths(src_ids, cfg.decode.max_len_a, cfg.decode.max_len_b, 1023)[0])
            mine = [hyps[0].tokens for hyps in ours.search_batch(src_ids, options)]
            theirs = ct2.translate_batch([ours.src_tok.pieces(ids) for ids in group], beam_size=1, use_vmap=True,
                                         min_decoding_length=0, max_decoding_length=limit, max_input_length=1024)
            for tokens, result in zip(mine, theirs):
                if len(tokens) + 1 < limit:  # ended before the limit, which each runtime applies its own way
                    total += 1
                    same += tokens == ours.tgt_tok.piece_ids(result.hypotheses[0])
    assert total >= 100 and same == total, f"{total - same} of {total} greedy outputs differ"
    plain = ct2.translate_batch([ours.src_tok.pieces(ids) for ids in encoded[:20]], beam_size=1, max_input_length=1024)
    restricted = ct2.translate_batch([ours.src_tok.pieces(ids) for ids in encoded[:20]], beam_size=1, use_vmap=True,
                                     max_input_length=1024)
    assert [r.hypotheses for r in plain] != [r.hypotheses for r in restricted], "the vmap must restrict something"


# -- refusals and the command line ----------------------------------------------------------------------
def test_an_unknown_model_field_is_refused_and_nothing_is_written(post_norm, tmp_path):
    state = load_checkpoint(post_norm.find_checkpoint("last"))
    state["model_config"]["activation"] = "gelu"  # a field this mt does not have: the export cannot know it
    save_checkpoint(tmp_path / "newer.pt", state)
    with pytest.raises(MtError, match="model.activation = 'gelu'"):
        export(post_norm, post_norm.load_config(), tmp_path / "out", checkpoint=str(tmp_path / "newer.pt"))
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["newer.pt"]
    with pytest.raises(ConfigError, match="--quantize 'int4'"):
        export(post_norm, post_norm.load_config(), tmp_path / "out", quantize="int4")
    # float32, the default --help names, may be given (was refused)
    assert export(post_norm, post_norm.load_config(), tmp_path / "f32", quantize="float32")["quantize"] == "float32"


def test_force_replaces_only_the_files_the_earlier_export_wrote(trained_experiment, tmp_path):
    """Was: --force removed everything in --output, a cloned Hub repository's .git/ and notes too."""
    exp, cfg = trained_experiment, trained_experiment.load_config()
    out = tmp_path / "clone"
    written = export(exp, cfg, out)["files"]
    mine = {".git/config": "[core]\n", ".git/objects/ab/cd": "x", ".gitattributes": "*.bin filter=lfs\n",
            "NOTES.md": "my notes\n"}
    for name, text in mine.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    (out / "model.bin").write_bytes(b"an old model")
    assert export(exp, cfg, out, force=True, quantize="int8")["files"] == written
    assert {name: (out / name).read_text() for name in mine} == mine
    assert (out / "model.bin").read_bytes() != b"an old model"
    manifest = json.loads((out / ".mt-export.json").read_text())
    assert manifest == {"format": "ctranslate2", "files": written} and "model.bin" in written
    (out / "spm.src.model").write_bytes(b"an older export's")  # in the manifest, no longer written: removed
    manifest["files"].append("spm.src.model")
    (out / ".mt-export.json").write_text(json.dumps(manifest))
    export(exp, cfg, out, force=True)
    assert {name: (out / name).read_text() for name in mine} == mine and not (out / "spm.src.model").exists()
    assert json.loads((out / ".mt-export.json").read_text())["files"] == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clone"], "no temporary directory left beside it"
    ctranslate2.Translator(str(out), device="cpu", intra_threads=1)  # loads beside .git/ and the notes

    # A file of the same name that the earlier export did not write is refused, and nothing moves.
    manifest = json.loads((out / ".mt-export.json").read_text())
    (out / ".mt-export.json").write_text(json.dumps({**manifest, "files": [f for f in written if f != "README.txt"]}))
    (out / "README.txt").write_text("my own readme\n")
    before = (out / "model.bin").read_bytes()
    with pytest.raises(MtError, match="README.txt would be replaced, and the earlier export did not write it"):
        export(exp, cfg, out, force=True)
    assert (out / "README.txt").read_text() == "my own readme\n" and (out / "model.bin").read_bytes() == before
    # A directory without a manifest is not replaced, even holding only an export's file names: a model
    # converted by hand (ct2-transformers-converter) or saved by transformers has the same (it was deleted).
    (out / "README.txt").write_text("mt's\n")
    (out / ".mt-export.json").unlink()
    for name in (".git", ".gitattributes", "NOTES.md"):
        shutil.rmtree(out / name) if name == ".git" else (out / name).unlink()
    kept = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"config.json", "model.bin", "shared_vocabulary.json"} <= set(kept)
    with pytest.raises(MtError, match=r"no \.mt-export\.json saying which of its files an export wrote"):
        export(exp, cfg, out, force=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == kept
    for path in out.iterdir():
        path.unlink()
    export(exp, cfg, out, force=True)  # an empty directory is replaced
    assert sorted(p.name for p in out.iterdir()) == sorted([".mt-export.json", *written])
    (out / ".mt-export.json").write_text('{"files": ["../outside"]}')
    with pytest.raises(MtError, match="not paths inside"):
        export(exp, cfg, out, force=True)


def _mt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    env.pop("MT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, env=env, timeout=300)


def _one_error_line(done: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert done.returncode == code, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.slow
def test_cli_writes_the_model_and_refuses_to_overwrite(post_norm, tmp_path):
    import sentencepiece as spm

    out = tmp_path / "ct2"
    exp = str(post_norm.root)
    done = _mt("export", "--exp", exp, "--format", "ctranslate2", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}\n" and "exported" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".mt-export.json", "README.txt", "config.json", "model.bin",
                                                     "shared_vocabulary.json", "spm.model"]
    readme = (out / "README.txt").read_text()
    assert "max(int(1 * len(p) + 10) for p in pieces)" in readme  # decode.max_len_a 1, max_len_b 10

    # README.txt's way to run it gives what `mt translate --beam 1` gives.
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    lines = toy_corpus(8, seed=5)[0]
    pieces = sp.encode(lines, out_type=str)
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    results = translator.translate_batch(pieces, beam_size=1, return_end_token=True, min_decoding_length=0,
                                         max_decoding_length=max(int(1 * len(p) + 10) for p in pieces),
                                         max_input_length=1024)
    ours = Translator.load(post_norm, post_norm.load_config())
    ours.decode_cfg.beam = 1
    assert [sp.decode(r.hypotheses[0]).strip() for r in results] == ours.translate(lines)
    before = (out / "model.bin").read_bytes()

    _one_error_line(_mt("export", "--exp", exp, "--output", str(out)), 1, str(out), "exists", "--force")
    _one_error_line(_mt("export", "--exp", exp, "--output", str(out), "--force", "--format", "onnx"), 2, "--format")
    _one_error_line(_mt("export", "--exp", exp, "--output", exp, "--force"), 1, "not an exported model")
    assert (out / "model.bin").read_bytes() == before and (post_norm.root / "config.yaml").is_file()

    done = _mt("export", "--exp", exp, "--output", str(out), "--force", "--quantize", "int8")
    assert done.returncode == 0, done.stderr
    assert (out / "model.bin").stat().st_size < len(before)
    assert [p.name for p in tmp_path.iterdir()] == ["ct2"], "no temporary directory left beside it"
    # int8 weights written by the export are what CTranslate2 makes of the float32 ones itself. (Its int8
    # changes many of this tiny model's translations: docs/exporting.md.)
    int8 = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    own = ctranslate2.Translator(str(post_norm.root.parent / "ct2"), device="cpu", intra_threads=1, compute_type="int8")
    options = dict(beam_size=1, min_decoding_length=0, max_decoding_length=30)
    assert [r.hypotheses for r in int8.translate_batch(pieces, **options)] == \
        [r.hypotheses for r in own.translate_batch(pieces, **options)]


def test_the_repetition_guard_is_written_into_the_search_each_runtime_is_given(trained_experiment):
    """decode.no_repeat_ngram was left out of the exports' search settings: the exported model repeated
    n-grams mt bans. CTranslate2's recipe and transformers' generation_config.json carry it now."""
    from pathlib import Path

    from mt.apps.export.ctranslate2 import readme

    cfg = trained_experiment.load_config()
    cfg.decode.no_repeat_ngram = 2
    text = readme(trained_experiment, cfg, Path("best.pt"), {"step": 1}, None, ["spm.model"], 1024)
    assert "no_repeat_ngram_size=2" in text
    transformers = pytest.importorskip("transformers")
    from mt.apps.export.huggingface import generation_config

    assert transformers and generation_config(cfg, 1024).no_repeat_ngram_size == 2
    cfg.decode.no_repeat_ngram = 0
    assert "no_repeat_ngram_size" not in readme(trained_experiment, cfg, Path("best.pt"), {"step": 1}, None,
                                                ["spm.model"], 1024)
    assert not generation_config(cfg, 1024).no_repeat_ngram_size


def test_an_export_of_a_tokenizer_that_normalizes_nothing_says_what_input_it_needs(trained_experiment, tmp_path,
                                                                                   capsys):
    """mt translate brings input to data.normalize's form before a tokenizer of normalization identity;
    an export does not, and a decomposed character then reads as other pieces: said, once."""
    exp, cfg = trained_experiment, trained_experiment.load_config()
    export(exp, cfg, tmp_path / "plain")
    assert "normalizes nothing" not in capsys.readouterr().err
    cfg.tokenizer.normalization = "identity"
    export(exp, cfg, tmp_path / "identity")
    err = capsys.readouterr().err
    assert "normalizes nothing" in err and "give it NFC text" in err, err


def test_a_damaged_shortlist_is_left_out_of_the_export_with_a_warning(post_norm, tmp_path, capsys):
    """Was: an unreadable shortlist.npz (cut short, an older format) stopped the whole export, although
    vmap.txt is optional; now the model is exported without it, the warning naming the file."""
    exp = post_norm
    exp.shortlist_path.parent.mkdir(parents=True, exist_ok=True)
    exp.shortlist_path.write_bytes(b"PK\x03\x04 cut short")
    try:
        files = export(exp, exp.load_config(), tmp_path / "ct2")["files"]
    finally:
        exp.shortlist_path.unlink()
    assert "model.bin" in files and "vmap.txt" not in files
    err = capsys.readouterr().err
    assert str(exp.shortlist_path) in err and "no vmap.txt" in err


def test_the_readme_recipe_names_pieces_as_the_vmap_does_and_greedy_takes_no_penalty(post_norm, tmp_path):
    """Was: README.txt encoded with out_type=str (a character the vocabulary lacks came out as itself,
    not the <unk> vmap.txt names) and gave a greedy experiment a length penalty (CTranslate2 then
    divides its scores by it: other scores than mt's)."""
    import sentencepiece as spm

    cfg = post_norm.load_config()
    cfg.decode.beam = 1
    export(post_norm, cfg, tmp_path / "ct2")
    readme = (tmp_path / "ct2" / "README.txt").read_text()
    assert "length_penalty=0," in readme
    [line] = [line.strip() for line in readme.splitlines() if line.strip().startswith("pieces = ")]
    src_sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "ct2" / "spm.model"))
    scope = {"src_sp": src_sp, "lines": ["ein Hund 龘"]}
    exec(line, scope)  # the README's own line
    tok = post_norm.load_tokenizers(True)[0]
    assert scope["pieces"] == [tok.pieces(tok.encode(["ein Hund 龘"])[0])]


def test_force_into_a_directory_that_cannot_move_replaces_its_files_and_a_killed_export_is_put_back(
    trained_experiment, tmp_path, monkeypatch
):
    """Was: --force renamed the earlier export's directory away, which a mount point (a container's
    volume) refuses (EBUSY): the export failed. And an export killed between its two renames left no
    --output at all, the earlier export under a hidden name for good."""
    import errno

    import mt.apps.export.directory as directory

    exp, cfg = trained_experiment, trained_experiment.load_config()
    out = tmp_path / "volume"
    export(exp, cfg, out)
    inode = out.stat().st_ino
    rename = os.rename

    def mounted(src, dst):
        if Path(src) == out:
            raise OSError(errno.EBUSY, "Device or resource busy", str(src))
        return rename(src, dst)

    replace = os.replace

    def across(src, dst):  # the new export beside the volume, on another file system than it
        if Path(src).parent.name.startswith(".volume.") or Path(src).parent.parent.name.startswith(".volume."):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return replace(src, dst)

    monkeypatch.setattr(directory.os, "rename", mounted)
    monkeypatch.setattr(directory.os, "replace", across)
    written = export(exp, cfg, out, force=True)["files"]
    monkeypatch.undo()
    assert out.stat().st_ino == inode and sorted(p.name for p in out.iterdir()) == sorted([".mt-export.json", *written])
    # killed between the renames: the earlier export aside, nothing in its place, its process gone
    aside = tmp_path / ".volume.999999999-abcd_123-replaced"
    os.rename(out, aside)
    (tmp_path / ".volume.999999999-defg_456").mkdir()  # the killed one's half-written model
    (tmp_path / ".volume.999999999-defg_456" / ".mt-export-build").touch()
    backup = tmp_path / ".volume.2024-05-01"  # a user's, named alike: not an export's (it was removed)
    backup.mkdir()
    (backup / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(MtError, match="exists; choose another --output or add --force"):
        export(exp, cfg, out)  # put back first: an export, which only --force replaces
    assert (out / ".mt-export.json").is_file() and sorted(p.name for p in tmp_path.iterdir()) == [backup.name, "volume"]
    assert (backup / "notes.txt").read_text(encoding="utf-8") == "mine\n"
