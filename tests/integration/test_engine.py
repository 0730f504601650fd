"""decode.engine (mt.decoding.engine): CTranslate2 decoding through the model mt builds in the
experiment gives mt's translations and scores; it is built once and again only when what it was built
from changed; auto falls back to mt's search and says why; ctranslate2 refuses what it cannot decode in
one line; the flag on `mt translate` and `mt serve`."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace

import pytest
from helpers import mt, one_line, one_thread, toy_corpus
from helpers.serve import Served, call, ok

from mt.decoding.engine import refused as engine_refused
from mt.decoding.options import DecodeOptions, Sampling
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment

pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install -e '.[test,export]'")

LINES = toy_corpus(80, seed=52)[0]


@pytest.fixture(scope="module")
def experiment(trained_experiment, tmp_path_factory) -> Experiment:
    """A copy of conftest's trained experiment (the engine writes EXP/engines/ into it)."""
    exp = Experiment(tmp_path_factory.mktemp("engine") / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    return exp


@pytest.fixture(scope="module")
def translator(experiment):
    return Translator.load(experiment, experiment.load_config())


def _engine_dirs(exp: Experiment) -> list:
    return sorted(p for p in (exp.root / "engines").glob("ctranslate2-*"))


@pytest.mark.parametrize("beam, penalty", [(1, "gnmt"), (4, "length"), (4, "none")])
def test_ctranslate2_translates_and_scores_as_mt_does(translator, beam, penalty):
    nbest = 1 if penalty == "none" else min(beam, 2)  # n-best without a penalty: mt's search only (below)
    options = dict(beam=beam, length_penalty=penalty, alpha=0.8, nbest=nbest, max_tokens=100)
    with one_thread():
        ours = translator.search(LINES, DecodeOptions(**options))
        theirs = translator.search(LINES, DecodeOptions(engine="ctranslate2", **options))
    assert translator.engine is not None and translator.engine.inter == 1
    assert len({hyps[0][0] for hyps in ours}) >= 20, "the model must tell its inputs apart"
    same = [a[0][0] == b[0][0] for a, b in zip(ours, theirs)]
    assert sum(same) >= 0.97 * len(LINES), f"{len(LINES) - sum(same)} of {len(LINES)} translations differ"
    assert [len(hyps) for hyps in theirs] == [len(hyps) for hyps in ours]
    # CTranslate2 leaves <pad> and <s> out of its softmax (mt.model.ctranslate2_spec): scores a little
    # higher; a translation cut at the length limit ends with mt's forced </s> and its log-probability,
    # where CTranslate2 stops without one (docs/exporting.md), so its score differs: a tiny model runs
    # a few of these lines on to the limit
    gaps = [b[0][1] - a[0][1] for a, b, s in zip(ours, theirs, same) if s]
    close = [gap for gap in gaps if -1e-3 < gap < 0.2]
    assert len(close) >= 0.8 * len(gaps), sorted(gaps, key=abs)[-5:]


def test_a_call_of_blank_lines_only_gives_blank_lines(experiment, translator, tmp_path, capsys, monkeypatch):
    """Nothing to search (every line blank): no batch at all, and the lines come back empty with n-best
    lists and alignments too (these skip the sentence splitter, which sets blank lines aside)."""
    assert translator.search_encoded([], DecodeOptions(engine="ctranslate2", length_penalty="length")) == []
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n", encoding="utf-8")
    for flags in (["--alignments"], ["--nbest", "2"]):
        code, out, err = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "--engine", "ctranslate2",
                            "--input", str(blank), "--length-penalty", "length", *flags)
        assert code == 0 and "Traceback" not in err, err
        assert len(out.splitlines()) == 2, out  # a line each (n-best: its one empty hypothesis)


def test_the_repetition_guard_and_a_multi_batch_two_worker_call_too(translator):
    options = dict(beam=1, no_repeat_ngram=2, max_tokens=60)
    ours = translator.search(LINES, DecodeOptions(**options))
    theirs = translator.search(LINES, DecodeOptions(engine="ctranslate2", workers=2, **options))
    assert translator.engine.inter == 2
    assert [h[0][0] for h in theirs] == [h[0][0] for h in ours]
    greedy = DecodeOptions(engine="ctranslate2", beam=1)
    assert translator.search(["", LINES[0], " "], greedy) == [
        [("", 0.0)],
        translator.search([LINES[0]], greedy)[0],
        [("", 0.0)],
    ]


def test_on_a_cpu_a_large_budget_is_decoded_in_small_batches_in_order(translator):
    from mt.decoding import engine as engines

    lines = LINES * 2
    assert sum(len(t.split()) for t in lines) > 2 * engines.CPU_BATCH_TOKENS, "the lines must need several batches"
    ours = translator.search(lines, DecodeOptions(beam=1, max_tokens=4000))
    theirs = translator.search(lines, DecodeOptions(engine="ctranslate2", beam=1, max_tokens=4000))
    assert translator.engine.batch_tokens == engines.CPU_BATCH_TOKENS
    assert [h[0][0] for h in theirs] == [h[0][0] for h in ours]


def test_a_call_of_few_batches_is_shared_out_in_runs_within_the_cpu_budget(translator):
    """Few length groups are re-cut so that CTranslate2's two workers end together; a run that would
    take a long sentence with short ones (padded past the CPU's batch budget, though well within
    decode.max_tokens) is not made: every batch CTranslate2 gets stays within CPU_BATCH_TOKENS."""
    from mt.data.batching import length_groups
    from mt.decoding import engine as engines
    from mt.search.parallel import balanced_for

    word = min((line.split()[0] for line in LINES), key=len)
    lines = [word] * 50 + [" ".join(LINES[40:52])]  # one length group of short sentences, and a long one
    lengths = [len(ids) for ids in translator.encode_lines(lines)[1]]
    budget = engines.CPU_BATCH_TOKENS
    loose = balanced_for(length_groups(lengths, budget), lengths, 2, 2000)
    assert any(len(run) * (max(lengths[i] for i in run) + 1) > budget for run in loose), "no run to refuse"
    translator.search(lines[:1], DecodeOptions(engine="ctranslate2", workers=2, beam=1))  # loaded, 2 workers
    model, padded = translator.engine.model, []

    class Counted:  # CTranslate2's own translator, each batch's padded size noted
        def translate_batch(self, sources, **kwargs):
            padded.append(len(sources) * (max(len(s) for s in sources) + 1))
            return model.translate_batch(sources, **kwargs)

    translator.engine.model = Counted()
    try:
        found = translator.search(lines, DecodeOptions(engine="ctranslate2", workers=2, beam=1, max_tokens=2000))
    finally:
        translator.engine.model = model
    assert len(padded) >= 2 and max(padded) <= budget, padded
    assert [h[0][0] for h in found] == [h[0][0] for h in translator.search(lines, DecodeOptions(beam=1))]


def test_auto_falls_back_to_mt_and_says_why_once(experiment, capsys):
    translator = Translator.load(experiment, experiment.load_config())
    capsys.readouterr()
    gnmt = DecodeOptions(engine="auto", beam=4, length_penalty="gnmt")
    assert translator.search(LINES[:5], gnmt) == translator.search(
        LINES[:5], DecodeOptions(beam=4, length_penalty="gnmt")
    )
    translator.search(LINES[5:9], gnmt)
    err = capsys.readouterr().err
    assert err.count("engine: mt's search (CTranslate2 has no gnmt length penalty") == 1
    constrained = [f"{line}\t{line.split()[0]}" for line in LINES[:3]]
    assert translator.search(constrained, DecodeOptions(engine="auto", constraints=True)) == translator.search(
        constrained, DecodeOptions(constraints=True)
    )
    assert "--constraints" in capsys.readouterr().err
    translator.search(LINES[:3], DecodeOptions(engine="auto", beam=4, length_penalty="length"))
    assert "engine: CTranslate2" in capsys.readouterr().err
    # A score records the engine that ran (was "auto" either way, int8 output differing between them)
    from mt.apps.evaluate import evaluate_split

    cfg = experiment.load_config()
    ran = {penalty: evaluate_split(experiment, cfg, "valid", translator,
                                   options=DecodeOptions(engine="auto", beam=2, length_penalty=penalty))["engine"]
           for penalty in ("gnmt", "length")}
    assert ran["gnmt"] == "mt" and ran["length"].startswith("CTranslate2 "), ran


def test_a_cut_hypothesis_is_cut_to_its_own_limit_and_the_n_best_stay_distinct(translator):
    options = dict(beam=4, nbest=4, length_penalty="length", max_len_a=0.0, max_len_b=3, max_tokens=100)
    greedy = dict(options, beam=1, nbest=1)  # greedy: cut back, the tokens mt's forced </s> leaves
    with one_thread():
        ours = translator.search(LINES, DecodeOptions(**greedy))
        theirs = translator.search(LINES, DecodeOptions(engine="ctranslate2", **greedy))
    assert [h[0][0] for h in theirs] == [h[0][0] for h in ours]
    resolved = DecodeOptions(engine="ctranslate2", **options).resolved(translator.decode_cfg)
    with one_thread():
        found = translator.engine.search(translator, translator.encode_lines(LINES)[1], resolved)
    for hyps in found:  # token ids: within the limit of 3 (</s> included, so 2 tokens), none twice
        ids = [tuple(tokens) for tokens, _ in hyps]
        assert len(set(ids)) == len(ids) and all(len(tokens) <= 2 for tokens in ids)


def test_auto_falls_back_when_the_engine_cannot_be_built_and_ctranslate2_says_why(experiment, tmp_path, capsys):
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(experiment.root, exp.root, ignore=shutil.ignore_patterns("engines"))
    (exp.root / "engines").write_text("not a directory")  # where the engine would be built
    translator = Translator.load(exp, exp.load_config())
    options = dict(beam=1, max_tokens=100)
    assert translator.search(LINES[:4], DecodeOptions(engine="auto", **options)) == translator.search(
        LINES[:4], DecodeOptions(**options))
    assert "engine: mt's search (CTranslate2 could not be built or loaded" in capsys.readouterr().err
    translator.search(LINES[:4], DecodeOptions(engine="auto", **options))  # not tried again, not said again
    assert "could not be built" not in capsys.readouterr().err
    with pytest.raises(MtError) as exc:
        Translator.load(exp, exp.load_config()).search(LINES[:2], DecodeOptions(engine="ctranslate2", **options))
    one_line(exc, "--engine ctranslate2:", "engines")


@pytest.mark.parametrize(
    "options, needle",
    [
        (dict(sampling=Sampling()), "--sample"),
        (dict(beam=4, length_penalty="length", stop="exact"), "exact stop rule"),
        (dict(beam=4, length_penalty="gnmt"), "no gnmt length penalty"),
        # its stop rule without a penalty gave other 3rd and 4th best than mt's (2 sources in 300)
        (dict(beam=4, nbest=4, length_penalty="none"), "stops otherwise without a length penalty"),
        (dict(beam=4, nbest=2, length_penalty="length", alpha=0.0), "--alpha 0"),
    ],
)
def test_ctranslate2_refuses_what_it_cannot_decode_as_mt_would(translator, options, needle):
    with pytest.raises(MtError) as exc:
        translator.search(LINES[:2], DecodeOptions(engine="ctranslate2", **options))
    one_line(exc, "--engine ctranslate2", needle, "--engine auto")
    with pytest.raises(ConfigError, match="--engine"):
        DecodeOptions(engine="fast")


def test_alignments_through_ctranslate2_are_mts_own_for_the_same_translations(translator):
    """--alignments with the engine: CTranslate2 searches, and each translation it finds is aligned by
    the same teacher-forced pass of mt's model as after mt's own search, so a translation both find
    gets the same alignment; n-best lists are aligned hypothesis by hypothesis."""
    for options in (dict(beam=1), dict(beam=3, nbest=2, length_penalty="length")):
        with one_thread():
            ours = translator.search(LINES, DecodeOptions(alignment_layer=0, **options))
            theirs = translator.search(LINES, DecodeOptions(engine="ctranslate2", alignment_layer=0, **options))
        # (an n-best list may be shorter where CTranslate2's hypotheses, cut at the length limit, read the same)
        lengths = [len(h) == len(g) for h, g in zip(theirs, ours)]
        assert sum(lengths) >= 0.95 * len(LINES) and all(len(t) == 3 for h in theirs for t in h)
        pairs = [(a, b) for x, y in zip(ours, theirs) for a, b in zip(x, y) if a[0] == b[0]]
        assert len(pairs) >= 0.9 * sum(len(h) for h in ours), f"{len(pairs)} translations in common"
        assert all(a[2] == b[2] for a, b in pairs), [(a, b) for a, b in pairs if a[2] != b[2]][:3]
        assert any(b[2] for _, b in pairs), "the alignments must not all be empty"


def test_a_servers_side_by_side_call_aligns_as_a_whole_file_does_and_keeps_the_engines_threads(experiment):
    """`mt serve`'s engine calls (split False) run the alignment pass on one torch thread, its encoder's
    half while CTranslate2 searches: the same alignments as a call of a whole file. torch's thread count
    is the engine's again afterwards, and a call that leaves the threads unsaid keeps the engine loaded
    for two workers (the count torch reports is the last set in any thread)."""
    import torch

    from mt.decoding.engine import engine

    served = Translator.load(experiment, experiment.load_config())
    options = DecodeOptions(engine="ctranslate2", alignment_layer=0, beam=3, nbest=2, length_penalty="length")
    options = options.resolved(served.decode_cfg)
    loaded = engine(served, replace(options, workers=2), 2)
    _, encoded, _ = served.encode_lines(LINES[:24])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        whole = served.search_encoded(encoded, options)
        side = [served.search_encoded([ids], options, split=False)[0] for ids in encoded]
        assert torch.get_num_threads() == 2 and served.engine is loaded and engine(served, options) is loaded
        torch.set_num_threads(1)  # as another thread's pass may leave it
        assert engine(served, options) is loaded and (loaded.inter, loaded.intra) == (2, 1)
    finally:
        torch.set_num_threads(threads)
    pairs = [(a, b) for x, y in zip(whole, side) for a, b in zip(x, y) if a[0] == b[0]]
    assert len(pairs) >= 0.9 * sum(len(h) for h in whole), f"{len(pairs)} translations in common"
    assert all(a[2] == b[2] for a, b in pairs) and any(a[2] for a, _ in pairs)


def test_built_once_rebuilt_when_the_checkpoint_changes_and_never_over_a_foreign_directory(
    trained_experiment, tmp_path, capsys
):
    experiment = Experiment(tmp_path / "exp")  # its own: it saves the checkpoint "again" (its time)
    shutil.copytree(trained_experiment.root, experiment.root)
    cfg = experiment.load_config()
    first = Translator.load(experiment, cfg)
    options = DecodeOptions(engine="ctranslate2", beam=1)
    first.search(LINES[:2], options)
    capsys.readouterr()
    [built] = _engine_dirs(experiment)
    stamp = (built / "engine.json").stat().st_mtime_ns
    Translator.load(experiment, cfg).search(LINES[:2], options)
    assert (built / "engine.json").stat().st_mtime_ns == stamp and "building" not in capsys.readouterr().err
    checkpoint = experiment.find_checkpoint(cfg.decode.checkpoint)
    os.utime(checkpoint, ns=(stamp + 10**9, stamp + 10**9))  # a checkpoint written again
    for left in (".building-x1", ".old-x2"):  # what a build killed half way leaves: removed by the next one
        (experiment.root / "engines" / left / "engine").mkdir(parents=True)
        (experiment.root / "engines" / left / "engine" / "model.bin").write_bytes(b"half")
    Translator.load(experiment, cfg).search(LINES[:2], options)
    assert "building the CTranslate2 model" in capsys.readouterr().err
    assert json.loads((built / "engine.json").read_text())["checkpoint_stat"][1] == stamp + 10**9
    assert [p.name for p in (experiment.root / "engines").iterdir() if p.name.startswith(".")] == [".build.lock"]
    # A Translator whose checkpoint is saved again after it loaded it: its engine would decode the new
    # weights beside its own model (alignments, auto's fallbacks), so ctranslate2 refuses and auto
    # goes on with mt's search, saying why.
    loaded = Translator.load(experiment, cfg)
    os.utime(checkpoint, ns=(stamp + 2 * 10**9, stamp + 2 * 10**9))
    with pytest.raises(MtError) as exc:
        loaded.search(LINES[:2], options)
    one_line(exc, str(checkpoint.resolve()), "saved again since it was loaded")
    auto = Translator.load(experiment, cfg)
    os.utime(checkpoint, ns=(stamp + 3 * 10**9, stamp + 3 * 10**9))
    ours = auto.search(LINES[:2], replace(options, engine="mt"))
    assert auto.search(LINES[:2], replace(options, engine="auto")) == ours and auto.engine is None
    assert "saved again since it was loaded" in auto.engine_failure
    # Asked for by name after auto's failure, CTranslate2 is refused (was: mt's search, said in a log line).
    with pytest.raises(MtError) as exc:
        auto.search(LINES[:2], options)
    one_line(exc, "--engine ctranslate2", "saved again since it was loaded")
    shutil.rmtree(built)
    built.mkdir()
    (built / "notes.txt").write_text("mine")
    with pytest.raises(MtError) as exc:
        Translator.load(experiment, cfg).search(LINES[:2], options)
    one_line(exc, str(built), "not an engine mt built")
    assert (built / "notes.txt").read_text() == "mine"
    shutil.rmtree(built)


def test_a_second_build_waits_for_the_one_under_way(trained_experiment, tmp_path):
    """One build at a time (a lock in EXP/engines/): a process replacing a stale engine moved it away
    between another's checks, which then took the empty place for a directory mt had not built."""
    import fcntl
    import threading
    import time

    experiment = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, experiment.root)
    translator = Translator.load(experiment, experiment.load_config())
    engines = experiment.root / "engines"
    engines.mkdir()
    done = threading.Event()

    def search() -> None:
        translator.search(LINES[:2], DecodeOptions(engine="ctranslate2", beam=1))
        done.set()

    with open(engines / ".build.lock", "a") as lock:  # another process, building
        fcntl.flock(lock, fcntl.LOCK_EX)
        thread = threading.Thread(target=search)
        thread.start()
        time.sleep(1.0)
        assert not done.is_set() and not list(engines.glob(".building-*")) and not _engine_dirs(experiment)
    thread.join(120)
    assert done.is_set() and len(_engine_dirs(experiment)) == 1


def test_the_shortlist_is_decoded_as_its_vmap(experiment, translator):
    from mt.data.shortlist import build_shortlist

    cfg = experiment.load_config()
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 2, 3
    tok = translator.tgt_tok
    build_shortlist(experiment, cfg, tok.vocab_size, tok.vocab_size)
    fresh = Translator.load(experiment, cfg)
    with one_thread():
        ours = fresh.search(LINES, DecodeOptions(beam=1, shortlist=True, max_tokens=100))
        theirs = fresh.search(LINES, DecodeOptions(beam=1, shortlist=True, engine="ctranslate2", max_tokens=100))
        plain = fresh.search(LINES, DecodeOptions(beam=1, engine="ctranslate2", max_tokens=100))
    assert (fresh.engine.directory / "vmap.txt").exists()
    assert [h[0][0] for h in theirs] == [h[0][0] for h in ours]
    assert [h[0][0] for h in theirs] != [h[0][0] for h in plain], "the vmap must restrict something"
    experiment.shortlist_path.unlink()


def test_the_server_hands_ctranslate2_batches_side_by_side_and_answers_each_request_its_own(experiment):
    from concurrent.futures import ThreadPoolExecutor

    from mt.apps.serve.queue import Batcher

    fresh = Translator.load(experiment, experiment.load_config())
    options = DecodeOptions(engine="ctranslate2", workers=2, beam=2, length_penalty="length").resolved(fresh.decode_cfg)
    with one_thread():
        alone = [fresh.search([line], options)[0][0] for line in LINES]  # each sentence in a batch of its own
    _, encoded, _ = fresh.encode_lines(LINES)
    batcher = Batcher(fresh, max_wait_ms=0, threads=1)
    batcher.start()
    try:
        with ThreadPoolExecutor(16) as clients:
            found = list(clients.map(lambda ids: batcher.submit([ids], options).result(timeout=120)[0][0], encoded))
        mixed = batcher.submit(encoded[:3], DecodeOptions(engine="mt", beam=2).resolved(fresh.decode_cfg))  # waits its turn
        assert [hyps[0][0] for hyps in mixed.result(timeout=120)] == [h[0][0] for h in fresh.search(LINES[:3], DecodeOptions(beam=2))]
    finally:
        batcher.close()
    assert fresh.engine.inter == 2 and batcher.most_beside == 2, batcher.most_beside
    assert [text for text, _ in found] == [text for text, _ in alone]
    assert batcher.sentences == len(LINES) + 3 and batcher.taken == [] and batcher.busy_seconds > 0


def test_the_flag_on_mt_translate_and_mt_serve(experiment, capsys, monkeypatch):
    source = experiment.root.parent / "in.txt"
    source.write_text("\n".join(LINES[:6]) + "\n", encoding="utf-8")
    translate = ("translate", "--exp", experiment.root, "--input", source)
    code, out, err = mt(capsys, monkeypatch, *translate, "--engine", "ctranslate2", "--length-penalty", "length")
    assert code == 0 and "engine: CTranslate2" in err
    code, same, _ = mt(capsys, monkeypatch, *translate, "--length-penalty", "length")
    assert same == out and len(out.splitlines()) == 6
    code, _, err = mt(capsys, monkeypatch, *translate, "--engine", "ctranslate2", "--constraints")
    assert code != 0 and "--engine ctranslate2: --constraints" in err
    # refused before the first line: a line with an address (aligned, so mt's search) was written first;
    # markup is decoded as `auto` decodes it, never refused
    addressed = experiment.root.parent / "addressed.txt"
    addressed.write_text("Siehe www.example.com.\n" + LINES[0] + "\n", encoding="utf-8")
    gnmt = ("translate", "--exp", experiment.root, "--input", addressed, "--engine", "ctranslate2", "--length-penalty",
            "gnmt")
    code, written, err = mt(capsys, monkeypatch, *gnmt)
    assert (code, written) == (2, "") and "--engine ctranslate2: CTranslate2 has no gnmt length penalty" in err
    code, written, err = mt(capsys, monkeypatch, *gnmt, "--format", "html")
    assert code == 0 and len(written.splitlines()) == 2

    from mt.apps.serve import service
    from mt.apps.serve.app import build_app
    from mt.decoding.engine import engine

    asked = []
    monkeypatch.setattr(service, "refused", lambda *args: asked.append(args[1]) or engine_refused(*args))
    served = Translator.load(experiment, experiment.load_config())
    served.decode_cfg.engine, served.decode_cfg.length_penalty = "ctranslate2", "length"
    engine(served, DecodeOptions().resolved(served.decode_cfg), 1)
    engine(served, DecodeOptions(workers=2).resolved(served.decode_cfg), 2)  # two batches side by side
    with Served(build_app(served, threads=2)) as server:
        answer = ok(f"{server.url}/translate", {"q": LINES[:6], "source": "de", "target": "en"})
        many = [ok(f"{server.url}/v1/translate", {"text": line}) for line in LINES[:4]]
        status, _, refusal = call(f"{server.url}/v1/translate", {"text": LINES[0], "length_penalty": "gnmt", "beam": 3})
        again = call(f"{server.url}/v1/translate", {"text": LINES[1], "length_penalty": "gnmt", "beam": 3})
        beside = ok(f"{server.url}/v1/translate", {"text": LINES[1], "length_penalty": "length", "beam": 3})
        health = ok(f"{server.url}/health")
        html = ok(f"{server.url}/translate", {"q": f"<b>{LINES[0]}</b>", "source": "de", "target": "en",
                                               "format": "html"})  # aligned by mt's search: not refused
        after = ok(f"{server.url}/health")  # the helpers run torch on one thread: the engine stays as loaded
    assert [text for text in answer["translatedText"]] == out.splitlines()
    assert [m["translations"][0]["text"] for m in many] == out.splitlines()[:4]
    assert status == 422 and "length_penalty" in refusal["error"] and "gnmt" in refusal["error"]
    assert again[0] == 422 and again[2] == refusal  # asked once per set of options (Service.refusal), kept
    # LibreTranslate's (/translate and its html), the defaults (many), the refused and the beside
    assert len(asked) == len(set(map(id, asked))) == 4
    assert beside["translations"][0]["text"]  # other options, other answer
    assert health["engine"].startswith("ctranslate2: CTranslate2 ") and "2 batches side by side" in health["engine"]
    assert html["translatedText"].startswith("<b>") and html["translatedText"].endswith("</b>")
    assert after["engine"] == health["engine"]


def test_libretranslate_alternatives_that_ctranslate2_cannot_decode_go_to_mts_search(experiment):
    """A server on CTranslate2 at beam 1 with the gnmt penalty (a penalty beam 1 never applies): asked
    for alternatives, LibreTranslate's /translate widens the beam, which CTranslate2 cannot decode as
    mt would, and LibreTranslate's API has no refusal for it: mt's search answers (it was a 500)."""
    from mt.apps.serve.app import build_app

    served = Translator.load(experiment, experiment.load_config())
    served.decode_cfg.engine, served.decode_cfg.beam, served.decode_cfg.length_penalty = "ctranslate2", 1, "gnmt"
    with Served(build_app(served, threads=1)) as server:
        plain = ok(f"{server.url}/translate", {"q": LINES[0], "source": "de", "target": "en"})
        wide = ok(f"{server.url}/translate", {"q": LINES[0], "source": "de", "target": "en", "alternatives": 2})
    ours = served.search([LINES[0]], DecodeOptions(nbest=3, engine="mt").resolved(served.decode_cfg))[0]
    assert plain["translatedText"] and wide["translatedText"] == ours[0][0]
    assert wide["alternatives"] == [text for text, _ in ours[1:] if text != ours[0][0]][:2]


def test_a_free_ctranslate2_worker_starts_at_once_where_mts_search_would_wait_for_company(experiment, monkeypatch):
    """mt.apps.serve.queue: with no --max-wait-ms, a batch for CTranslate2's side-by-side workers
    starts as soon as a worker is free (another batch forms while it runs), where one worker's waits
    WAIT_MS for others to share it; a wait given is every batch's."""
    from mt.apps.serve import queue
    from mt.apps.serve.queue import Batcher, Closed
    from mt.decoding.engine import engine

    monkeypatch.setattr(queue, "WAIT_MS", 600_000.0)  # one worker's wait: ten minutes, were it taken
    fresh = Translator.load(experiment, experiment.load_config())
    options = DecodeOptions(engine="ctranslate2", workers=2, beam=2, length_penalty="length").resolved(fresh.decode_cfg)
    engine(fresh, options, 2)
    _, encoded, _ = fresh.encode_lines(LINES[:2])
    auto = Batcher(fresh, threads=1)
    auto.start()
    try:
        assert auto.submit(encoded[:1], options).result(timeout=120)[0][0]  # not held ten minutes
        assert auto.max_wait == 600.0 and auto.beside_wait == 0.0
    finally:
        auto.close()
    given = Batcher(fresh, max_wait_ms=600_000.0, threads=1)
    given.start()
    try:
        held = given.submit(encoded[:1], options)
        with pytest.raises(TimeoutError):
            held.result(timeout=1.0)  # waiting for company, as asked
        given.stop_waiting()
        with pytest.raises(Closed):
            held.result(timeout=60)
    finally:
        given.close()
    assert given.failure is None  # its wait for company ended with nothing left to take: no batch, no death


def test_a_helper_pool_that_breaks_fails_the_batch_it_was_given_instead_of_holding_it(experiment):
    """mt.apps.serve.queue: a batch handed to CTranslate2's helper threads whose pool broke before any
    helper took it (its initializer failed) fails its requests at once; the worker does not wait for a
    free helper for ever."""
    from concurrent.futures import ThreadPoolExecutor

    from mt.apps.serve.queue import Batcher, WorkerFailed
    from mt.decoding.engine import engine

    fresh = Translator.load(experiment, experiment.load_config())
    options = DecodeOptions(engine="ctranslate2", workers=2, beam=2, length_penalty="length").resolved(fresh.decode_cfg)
    engine(fresh, options, 2)
    _, encoded, _ = fresh.encode_lines(LINES[:2])

    def no_thread() -> None:
        raise RuntimeError("no thread for this helper")

    batcher = Batcher(fresh, threads=1)
    batcher._helpers = ThreadPoolExecutor(2, "mt-engine", initializer=no_thread)
    batcher.start()
    try:
        with pytest.raises(WorkerFailed, match="BrokenThreadPool"):
            batcher.submit(encoded[:1], options).result(timeout=60)
        with pytest.raises(WorkerFailed):  # and every later request, until the server is restarted
            batcher.submit(encoded[1:], options)
    finally:
        batcher.close(timeout=60)
    assert not batcher._thread.is_alive()


def test_an_engine_built_without_a_vocabulary_map_falls_back_under_auto_on_its_first_call(
    trained_experiment, tmp_path, monkeypatch
):
    """A shortlist CTranslate2's map cannot hold (a vocabulary piece with a space: `vocabulary_map` warns
    and writes none) was only found out after the engine's first build: that call failed, under auto
    too ("the experiment has no shortlist"), where mt's search decodes it."""
    import mt.decoding.engine as engine
    from mt.data.shortlist import build_shortlist

    experiment = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, experiment.root)
    cfg = experiment.load_config()
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 2, 3
    translator = Translator.load(experiment, cfg)
    tok = translator.tgt_tok
    build_shortlist(experiment, cfg, tok.vocab_size, tok.vocab_size)
    monkeypatch.setattr(engine, "vocabulary_map", lambda *args: None)  # the map this vocabulary cannot have
    ours = translator.search(LINES[:4], DecodeOptions(beam=1, shortlist=True))
    assert translator.engine is None
    assert translator.search(LINES[:4], DecodeOptions(beam=1, shortlist=True, engine="auto")) == ours
    assert translator.engine is not None and not translator.engine.vmap  # built, and passed over
    fresh = Translator.load(experiment, cfg)
    with pytest.raises(MtError) as exc:
        fresh.search(LINES[:4], DecodeOptions(beam=1, shortlist=True, engine="ctranslate2"))
    one_line(exc, "--engine ctranslate2: --shortlist", "has no vmap.txt", "cannot be written as one")


def test_a_shortlist_built_after_the_engine_falls_back_under_auto_and_a_save_during_the_build_is_refused(
    trained_experiment, tmp_path, monkeypatch
):
    """Was: an engine loaded before `mt shortlist` ran said it could decode --shortlist, then refused it
    (auto too, though mt's search decodes it); and a checkpoint saved again while the engine was built
    from it left an engine.json naming the older file over the newer weights."""
    from mt.data.shortlist import build_shortlist

    experiment = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, experiment.root)
    cfg = experiment.load_config()
    translator = Translator.load(experiment, cfg)
    translator.search(LINES[:2], DecodeOptions(engine="ctranslate2", beam=1))  # built: no shortlist yet
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 2, 3
    tok = translator.tgt_tok
    build_shortlist(experiment, cfg, tok.vocab_size, tok.vocab_size)
    ours = translator.search(LINES[:4], DecodeOptions(beam=1, shortlist=True))
    assert translator.search(LINES[:4], DecodeOptions(beam=1, shortlist=True, engine="auto")) == ours
    with pytest.raises(MtError) as exc:
        translator.search(LINES[:4], DecodeOptions(beam=1, shortlist=True, engine="ctranslate2"))
    one_line(exc, "--shortlist", "has no vmap.txt")
    # saved again (here: its time) between the engine's check and its reading of the weights
    import mt.decoding.engine as engine

    checkpoint = experiment.find_checkpoint(cfg.decode.checkpoint)
    read = engine.load_checkpoint

    def saved_meanwhile(path):
        state = read(path)
        stamp = checkpoint.stat().st_mtime_ns + 10**9
        os.utime(checkpoint, ns=(stamp, stamp))
        return state

    shutil.rmtree(experiment.root / "engines")
    monkeypatch.setattr(engine, "load_checkpoint", saved_meanwhile)
    with pytest.raises(MtError) as exc:
        Translator.load(experiment, cfg).search(LINES[:2], DecodeOptions(engine="ctranslate2", beam=1))
    one_line(exc, str(checkpoint.resolve()), "saved again while the engine was built")
    assert not _engine_dirs(experiment)
