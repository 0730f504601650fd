"""Searches in processes of their own (decode.parallel: processes, mt.decoding.processes) with
conftest's tiny trained experiment: the same translations as in this process, the processes kept for
the next search, a process that dies is an error and not a hang, and the flag from the command line."""

from __future__ import annotations

import pytest
from helpers import mt, toy_corpus

from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError

LINES = toy_corpus(60, seed=41)[0]


def same(found: list[list[tuple]], expected: list[list[tuple]]) -> bool:
    """The same translations, their scores equal up to float noise: a sentence batched with others
    (padded otherwise, in another process's kernels) may differ in the last bits on some CPUs."""
    texts = [[(h[0], *h[2:]) for h in hyps] for hyps in found] == [[(h[0], *h[2:]) for h in hyps] for hyps in expected]
    scores = [h[1] for hyps in found for h in hyps] == pytest.approx([h[1] for hyps in expected for h in hyps], abs=1e-4)
    return texts and scores


@pytest.fixture(scope="module")
def translator(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    yield translator
    translator.close()


def test_processes_translate_as_this_process_does_and_are_kept(translator):
    small = DecodeOptions(max_tokens=60)  # several batches
    alone = translator.search(LINES, small)
    assert same(translator.search(LINES, DecodeOptions(max_tokens=60, workers=2, parallel="processes")), alone)
    processes = translator._processes
    assert processes is not None and processes.count == 2 and all(p.is_alive() for p in processes.processes)
    assert same(translator.search(LINES[:7], DecodeOptions(max_tokens=60, workers=2, parallel="processes")), alone[:7])
    assert translator._processes is processes  # the same processes, not started again
    one_batch = translator.search(LINES[:9], DecodeOptions(workers=2, parallel="processes"))  # cut in halves
    assert same(one_batch, translator.search(LINES[:9]))
    translator.close()
    assert translator._processes is None and not any(p.is_alive() for p in processes.processes)


def test_one_worker_stays_in_this_process_and_alignments_come_out_as_searched_alone(translator):
    """Searched by two processes or two threads, each batch's hypotheses are aligned here, one pass at
    a time (their attention captured in this thread): the same lines as one worker's."""
    translator.close()  # none kept from a test before
    translator.search(LINES[:3], DecodeOptions(workers=1, parallel="processes"))
    assert translator._processes is None
    alone = translator.search(LINES, DecodeOptions(max_tokens=60, alignment_layer=0, nbest=2, workers=1))
    assert any(h[2] for hyps in alone for h in hyps)
    for parallel in ("processes", "threads"):
        options = DecodeOptions(max_tokens=60, alignment_layer=0, nbest=2, workers=2, parallel=parallel)
        assert same(translator.search(LINES, options), alone)
    assert translator._processes is not None
    translator.close()


def test_a_failed_alignment_pass_stops_the_search_workers_at_once(translator, monkeypatch):
    """The passes run in the calling thread between the workers' batches: one that fails ends the
    workers' pool there and then (their share of the threads given back), not when the failure's
    traceback is collected."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:

        def fail(*args, **kwargs):
            raise RuntimeError("the pass failed")

        monkeypatch.setattr(translator, "_aligned", fail)
        kept = None
        try:
            translator.search(LINES, DecodeOptions(max_tokens=60, alignment_layer=0, workers=2))
        except RuntimeError as exc:
            kept = exc  # with its traceback, as mt serve keeps a failed batch's error for its requests
        assert kept is not None and str(kept) == "the pass failed"
        assert torch.get_num_threads() == 2  # set to 1 a worker while the pool ran
    finally:
        torch.set_num_threads(threads)


def test_a_process_that_dies_fails_the_search_in_one_line(translator):
    options = DecodeOptions(max_tokens=60, workers=2, parallel="processes")
    translator.search(LINES[:4], options)
    for process in translator._processes.processes:  # none left to search: the batches would wait for ever
        process.kill()
        process.join()
    with pytest.raises(MtError) as exc:
        translator.search(LINES, options)
    assert "a search process stopped" in str(exc.value) and "\n" not in str(exc.value)
    translator.close()
    assert same(translator.search(LINES[:4], options), translator.search(LINES[:4], DecodeOptions(max_tokens=60)))


def test_ctrl_c_at_a_terminal_is_left_to_the_process_that_started_them(translator):
    """Ctrl-C reaches every process of the terminal's group: the search processes ignore it (each
    printed a KeyboardInterrupt traceback of its own, and died), and the caller's own stays as it was."""
    import os
    import signal
    import time

    options = DecodeOptions(max_tokens=60, workers=2, parallel="processes")
    translator.close()  # none kept from a test before: these start here
    before = signal.getsignal(signal.SIGINT)
    translator.search(LINES[:4], options)
    assert signal.getsignal(signal.SIGINT) is before
    processes = translator._processes.processes
    for process in processes:
        os.kill(process.pid, signal.SIGINT)
    time.sleep(1.0)
    assert all(process.is_alive() for process in processes)
    assert same(translator.search(LINES[:4], options), translator.search(LINES[:4], DecodeOptions(max_tokens=60)))
    translator.close()


def test_threads_sharing_a_translator_take_turns_with_its_processes(translator):
    """Was: each call dropped the other's answers as an earlier call's, and both waited for ever."""
    from concurrent.futures import ThreadPoolExecutor

    options = DecodeOptions(max_tokens=60, workers=2, parallel="processes")
    halves = (LINES[:30], LINES[30:])
    expected = [translator.search(lines, DecodeOptions(max_tokens=60)) for lines in halves]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(lambda lines: [translator.search(lines, options) for _ in range(3)], lines)
                   for lines in halves]
        for future, alone in zip(futures, expected):
            assert all(same(found, alone) for found in future.result(timeout=120))
        # a thread asking for another count of processes waits for the set in use (it was closed under
        # the other thread's call, which failed: "the Translator was closed")
        more = DecodeOptions(max_tokens=60, workers=3, parallel="processes")
        first = pool.submit(lambda: [translator.search(LINES, options) for _ in range(2)])
        second = pool.submit(lambda: translator.search(LINES[:5], more))
        assert all(same(found, expected[0] + expected[1]) for found in first.result(timeout=120))
        assert same(second.result(timeout=120), expected[0][:5])
    translator.close()


def test_processes_stop_with_their_translator_however_it_ends(trained_experiment, tmp_path):
    """A context manager, a Translator collected unclosed, and evaluate_split's own Translator: none
    leaves its search processes running (was: until the program's end, a copy of the model each)."""
    import gc
    import multiprocessing
    import shutil

    from mt.apps.evaluate import evaluate_split
    from mt.experiment.paths import Experiment

    cfg = trained_experiment.load_config()
    options = DecodeOptions(max_tokens=60, workers=2, parallel="processes")
    with Translator.load(trained_experiment, cfg) as translator:
        translator.search(LINES[:6], options)
        processes = translator._processes.processes
    assert not any(p.is_alive() for p in processes)
    dropped = Translator.load(trained_experiment, cfg)
    dropped.search(LINES[:6], options)
    processes = dropped._processes.processes
    del dropped
    gc.collect()
    assert not any(p.is_alive() for p in processes)
    cfg.decode.parallel, cfg.decode.workers = "processes", 2
    copy = Experiment(tmp_path / "exp")  # evaluate writes its scores there
    shutil.copytree(trained_experiment.root, copy.root)
    evaluate_split(copy, cfg, "test")
    assert not [p for p in multiprocessing.active_children() if p.name == "mt-search"]


def test_a_search_given_up_midway_lets_go_of_the_processes_at_once(translator):
    """A search whose caller stops reading (its progress callback raised; the traceback kept, as a notebook
    keeps it) held the processes, and the next search waited for ever; closing then waited for every
    queued batch (5 s a process)."""
    import threading
    import time

    options = DecodeOptions(max_tokens=20, workers=2, parallel="processes")

    def given_up(done: int) -> None:
        raise ValueError("given up")

    with pytest.raises(ValueError) as kept:  # `kept` holds the traceback, and its frames
        translator.search(LINES, options, progress=given_up)
    answered = []
    thread = threading.Thread(target=lambda: answered.append(translator.search(LINES[:4], options)), daemon=True)
    thread.start()
    thread.join(60)
    assert answered == [translator.search(LINES[:4], DecodeOptions(max_tokens=20))], "the next search waited"
    assert kept.value is not None
    processes = translator.search_processes(2)
    calls = processes.map([([ids], DecodeOptions(max_tokens=20).resolved(translator.decode_cfg))
                           for ids in translator.src_tok.encode(LINES * 4)])
    next(calls)  # many batches still queued
    start = time.perf_counter()
    translator.close()
    assert time.perf_counter() - start < 8.0  # (waiting for the queue: 10 s and more; a loaded CI machine took 4.9)


def test_parallel_is_checked_as_the_other_options():
    with pytest.raises(ConfigError, match="--parallel"):
        DecodeOptions(parallel="fibers")


def test_mt_translate_parallel_processes(trained_experiment, tmp_path, capsys, monkeypatch, translator):
    source = tmp_path / "in.de"
    source.write_text("\n".join(LINES[:20]) + "\n", encoding="utf-8")
    code, out, err = mt(
        capsys,
        monkeypatch,
        "translate",
        "--exp",
        trained_experiment.root,
        "--input",
        source,
        "--workers",
        "2",
        "--parallel",
        "processes",
        "--max-tokens",
        "60",
        "--threads",
        "2",
    )
    assert code == 0, err
    assert out.splitlines() == translator.translate(LINES[:20])
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--parallel", "fibers")
    assert code != 0 and "--parallel" in err


def test_the_processes_end_when_the_process_that_started_them_is_killed(trained_experiment, tmp_path):
    """A parent killed with SIGKILL cannot tell its search processes to stop: they notice it is gone."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import time\n"
        "from mt.decoding.options import DecodeOptions\n"
        "from mt.decoding.translator import Translator\n"
        "from mt.experiment.paths import Experiment\n"
        "if __name__ == '__main__':\n"
        f"    exp = Experiment({str(trained_experiment.root)!r})\n"
        "    translator = Translator.load(exp, exp.load_config())\n"
        "    processes = translator.search_processes(2, 1)\n"
        "    list(processes.map([([[5, 6, 7]], DecodeOptions(beam=1).resolved(translator.decode_cfg))]))\n"
        "    print(' '.join(str(p.pid) for p in processes.processes), flush=True)\n"
        "    time.sleep(600)\n",
        encoding="utf-8",
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        children = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(children) == 2
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 20
    try:
        while any(_state(pid) == "running" for pid in children):
            assert time.monotonic() < deadline, "the search processes outlived their parent"
            time.sleep(0.1)
    finally:  # a failure leaves none behind
        for pid in children:
            if _state(pid) == "running":
                os.kill(pid, signal.SIGKILL)


def _state(pid: int) -> str:
    """"running", or "gone" (no such process, or a zombie that only waits for its parent to read it)."""
    try:
        status = open(f"/proc/{pid}/status", encoding="ascii").read()
    except OSError:
        return "gone"
    return "gone" if "\nState:\tZ" in status else "running"


def test_a_call_that_failed_leaves_no_answer_for_the_next(translator):
    """A call whose first batch fails raised at once; the answers of its other batches stayed queued
    and the next call took them for its own (another sentence's translation, silently)."""
    import time

    options = DecodeOptions().resolved(translator.decode_cfg)
    _, encoded, _ = translator.encode_lines(LINES[:3])
    processes = translator.search_processes(2, 1)
    with pytest.raises(MtError, match="a search process failed"):
        list(processes.map([([encoded[0]], "not options"), ([encoded[1]], options), ([encoded[2]], options)]))
    time.sleep(1.0)  # the failed call's other answers arrive meanwhile
    again = list(processes.map([([encoded[0]], options)] * 3))
    assert again[0] == again[1] == again[2] == translator.search_batch(translator.pad_sources([encoded[0]]), options)
    translator.close()


def test_processes_refuse_a_checkpoint_saved_again_since_this_model_was_read(trained_experiment, tmp_path):
    """They loaded `last` by name again: a training run that saved last.pt meanwhile gave them other
    weights than this process's (which aligns and constrains), one output from two models."""
    import os
    import shutil

    from mt.experiment.paths import Experiment

    shutil.copytree(trained_experiment.root, tmp_path / "exp")
    exp = Experiment(tmp_path / "exp")
    options = DecodeOptions(max_tokens=60, workers=2, parallel="processes")
    with Translator.load(exp, exp.load_config(), checkpoint="last") as translator:
        last = exp.checkpoint_path("last")
        shutil.copy(exp.step_checkpoints()[0], last)  # training saved it again
        os.utime(last, ns=(last.stat().st_atime_ns, last.stat().st_mtime_ns + 10**9))
        with pytest.raises(MtError) as exc:
            translator.search(LINES[:4], options)
        assert "saved again since the caller loaded it" in str(exc.value) and "\n" not in str(exc.value)


def test_a_batch_cut_in_halves_keeps_the_whole_batchs_shortlist(trained_experiment, tmp_path):
    """With --shortlist each batch's candidates are its sources'; a lone batch cut in halves for two
    processes took each half's own, so processes translated otherwise than threads."""
    import shutil

    from mt.data.shortlist import build_shortlist
    from mt.experiment.paths import Experiment

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    cfg = exp.load_config()
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 2, 3  # few candidates: the halves' differ
    translator = Translator.load(exp, cfg)
    try:
        build_shortlist(exp, cfg, translator.src_tok.vocab_size, translator.tgt_tok.vocab_size)
        threads = translator.search(LINES[:12], DecodeOptions(shortlist=True, workers=2))
        assert same(translator.search(LINES[:12], DecodeOptions(shortlist=True, workers=2, parallel="processes")), threads)
    finally:
        translator.close()
