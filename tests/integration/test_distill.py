"""mt distill: the teacher's training sources translated into the student experiment in chunks, a
SIGKILL resumed without a chunk lost or written twice, ensembles of teachers that share a tokenizer,
and the student set up to binarize and train on the result.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mt.apps.chunked import chunk_paths as chunk_files
from mt.apps.distill import distill, distill_dir
from mt.config.recipes import MODEL_PRESETS
from mt.config.schema import save_yaml
from mt.config.sources import parse_source
from mt.data.corpus import load_split
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment


def chunk_paths(student: Experiment, index: int):
    return chunk_files(distill_dir(student), index)


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
pytestmark = pytest.mark.usefixtures("single_thread")


def mt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, env=ENV, timeout=300)


def student_data(student_dir, teacher_cfg) -> str:
    """A student recipe's data section: the teacher's languages and splits, the distilled corpus to train on."""
    return (f"data:\n  src_lang: {teacher_cfg.data.src_lang}\n  tgt_lang: {teacher_cfg.data.tgt_lang}\n"
            f"  train: [files:{student_dir}/distill/train]\n  valid: {teacher_cfg.data.valid}\n"
            f"  test: {teacher_cfg.data.test}\n")


def teacher_sources(teacher: Experiment) -> list[str]:
    return load_split(teacher.load_config().data.sources("train"))[0]


@pytest.mark.slow
def test_distill_translates_every_training_source_with_the_teachers_search(trained_experiment, tmp_path):
    teacher = trained_experiment
    student = Experiment(tmp_path / "student")
    manifest = distill([teacher], student, DecodeOptions(beam=2), chunk_lines=70)
    sources = teacher_sources(teacher)
    cfg = student.load_config()
    src_lang, tgt_lang = cfg.data.src_lang, cfg.data.tgt_lang
    out = (tmp_path / "student" / "distill")
    assert (out / f"train.{src_lang}").read_text(encoding="utf-8").splitlines() == sources
    distilled = (out / f"train.{tgt_lang}").read_text(encoding="utf-8").splitlines()
    teacher_cfg = teacher.load_config()
    teacher_cfg.decode.beam = 2
    assert distilled == Translator.load(teacher, teacher_cfg).translate(sources)  # the teacher's own search
    assert manifest["lines"] == len(sources) and manifest["chunks"] == -(-len(sources) // 70)
    assert manifest["decode"]["beam"] == 2 and manifest["teachers"][0].endswith(".pt")
    assert cfg.data.train == [f"files:{out / 'train'}"] and cfg.data.test == teacher_cfg.data.test
    assert (student.tokenizer_dir / "spm.model").read_bytes() == (teacher.tokenizer_dir / "spm.model").read_bytes()
    # The student binarizes with the teacher's tokenizer and trains as a student preset.
    done = mt("binarize", "--exp", str(student.root))
    assert done.returncode == 0, done.stderr
    done = mt("train", "--exp", str(student.root), "--preset", "student-tiny", "--set", "model.d_model=32",
              "--set", "model.d_ff=64", "--max-steps", "2")
    assert done.returncode == 0, done.stderr
    assert student.load_config().model.enc_layers == MODEL_PRESETS["student-tiny"]["enc_layers"] == 6
    assert student.load_config().model.dec_layers == 1


@pytest.mark.slow
def test_a_killed_distill_resumes_without_losing_or_repeating_a_chunk(trained_experiment, tmp_path):
    teacher = str(trained_experiment.root)
    straight = Experiment(tmp_path / "straight")
    done = mt("distill", "--teacher", teacher, "--exp", str(straight.root), "--chunk-lines", "20", "--beam", "2")
    assert done.returncode == 0, done.stderr
    killed = Experiment(tmp_path / "killed")
    process = subprocess.Popen([sys.executable, "-m", "mt", "distill", "--teacher", teacher, "--exp", str(killed.root),
                                "--chunk-lines", "20", "--beam", "2"], env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not chunk_paths(killed, 1)[1].exists():
        assert process.poll() is None and time.time() < deadline, "the second chunk never appeared"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed.root / "distill" / "manifest.json").exists()
    resumed = mt("distill", "--teacher", teacher, "--exp", str(killed.root), "--chunk-lines", "20", "--beam", "2")
    assert resumed.returncode == 0, resumed.stderr
    assert "done already" in resumed.stderr and " 0 done already" not in resumed.stderr
    lang = killed.load_config().data.tgt_lang
    for name in (f"train.{lang}", f"train.{killed.load_config().data.src_lang}"):
        assert (killed.root / "distill" / name).read_bytes() == (straight.root / "distill" / name).read_bytes()
    assert not list((killed.root / "distill" / "chunks").glob("*.tmp*"))


@pytest.mark.slow
def test_two_teachers_decode_as_an_ensemble_and_must_share_a_tokenizer(trained_experiment, tmp_path):
    second = Experiment(tmp_path / "second")
    shutil.copytree(trained_experiment.root, second.root)
    student = Experiment(tmp_path / "student")
    manifest = distill([trained_experiment, second], student, chunk_lines=1000)
    assert len(manifest["teachers"]) == 2
    other = Experiment(tmp_path / "other-tokenizer")
    shutil.copytree(trained_experiment.root, other.root)
    model = other.tokenizer_dir / "spm.model"
    model.write_bytes(model.read_bytes() + b"\n")  # another tokenizer, as far as hashes go
    refused = mt("distill", "--teacher", str(trained_experiment.root), "--teacher", str(other.root),
                 "--exp", str(tmp_path / "s2"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "tokenizer" in refused.stderr.strip().splitlines()[-1]
    # a teacher of the other direction (a reverse model sharing the tokenizer) was ensembled in, unsaid
    reverse = Experiment(tmp_path / "reverse")
    shutil.copytree(trained_experiment.root, reverse.root)
    config = reverse.config_path.read_text(encoding="utf-8")
    src, tgt = trained_experiment.load_config().data.src_lang, trained_experiment.load_config().data.tgt_lang
    reverse.config_path.write_text(config.replace(f"src_lang: {src}", "src_lang: X").replace(
        f"tgt_lang: {tgt}", f"tgt_lang: {src}").replace("src_lang: X", f"src_lang: {tgt}"), encoding="utf-8")
    assert reverse.load_config().data.pairs() == [(tgt, src)]
    refused = mt("distill", "--teacher", str(trained_experiment.root), "--teacher", str(reverse.root),
                 "--exp", str(tmp_path / "s3"))
    assert refused.returncode != 0 and f"it translates {tgt}-{src}" in refused.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_bad_teachers_and_flags_are_one_line_errors(trained_experiment, tmp_path):
    missing = mt("distill", "--teacher", str(tmp_path / "nothing"), "--exp", str(tmp_path / "s"))
    assert missing.returncode != 0 and "no experiment there" in missing.stderr.strip().splitlines()[-1]
    chunk = mt("distill", "--teacher", str(trained_experiment.root), "--exp", str(tmp_path / "s"), "--chunk-lines", "0")
    assert chunk.returncode != 0 and "--chunk-lines 0" in chunk.stderr
    beam = mt("distill", "--teacher", str(trained_experiment.root), "--exp", str(tmp_path / "s"), "--beam", "0")
    assert beam.returncode != 0 and "decode.beam" in beam.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_student_recipe_distills_its_teacher_then_trains_and_skips_what_is_done(trained_experiment, tmp_path):
    teacher_cfg = trained_experiment.load_config()
    student_dir = tmp_path / "student"
    recipe = tmp_path / "student.yaml"
    recipe.write_text(f"""
exp: {student_dir}
teacher: {trained_experiment.root}
steps: [distill, binarize, train, evaluate]
{student_data(student_dir, teacher_cfg)}model: {{enc_layers: 2, dec_layers: 1, d_model: 32, d_ff: 64, n_heads: 2}}
train: {{max_steps: 3, max_tokens: 300, warmup_steps: 2, valid_every: 3, save_every: 3}}
decode: {{beam: 2, checkpoint: last, max_len_b: 10}}
""", encoding="utf-8")
    done = mt("run", str(recipe))
    assert done.returncode == 0, done.stderr
    assert "[distill]" not in done.stderr and "distill:" in done.stderr and "test: BLEU" in done.stdout
    student = Experiment(student_dir)
    assert (student_dir / "distill" / "manifest.json").exists() and student.checkpoint_path("last").exists()
    again = mt("run", str(recipe))
    assert again.returncode == 0 and "distill: done already" in again.stderr
    # Without `steps:`, a recipe that names a teacher distills (was: the teacher ignored, then "no such
    # file" for the corpus it names)
    stepless = tmp_path / "stepless.yaml"
    stepless.write_text(recipe.read_text(encoding="utf-8").replace("steps: [distill, binarize, train, evaluate]\n", "")
                        .replace(str(student_dir), str(tmp_path / "stepless")), encoding="utf-8")
    dry = mt("run", str(stepless), "--dry-run")
    assert dry.returncode == 0 and "distill to run" in dry.stderr, dry.stderr
    # mt info and mt report set the teacher beside the student.
    info = mt("info", "--exp", str(student_dir), "--json")
    assert info.returncode == 0, info.stderr
    student_row, teacher_row = json.loads(info.stdout)["student_and_teachers"]
    assert (student_row["role"], student_row["experiment"]) == ("student", str(student_dir))
    assert (teacher_row["role"], teacher_row["experiment"]) == ("teacher", str(trained_experiment.root))
    assert "bleu" in student_row and student_row["decoding"] == "beam 2, fp32" and student_row["sent_per_s"] > 0
    assert all(row["params_m"] > 0 and row["size_mb"] > 0 for row in (student_row, teacher_row))
    text = mt("info", "--exp", str(student_dir))
    assert text.returncode == 0 and "student and teachers" in text.stdout and "sent/s" in text.stdout
    report = mt("report", "--exp", str(student_dir), "--output", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr
    assert "Student and teachers" in (tmp_path / "report.html").read_text(encoding="utf-8")
    # Elsewhere (--exp), the recipe's data.train still reads the first student's corpus: refused before
    # the teacher runs (was: teacher and distillation first, then "no such file" at binarize).
    elsewhere = mt("run", str(recipe), "--exp", str(tmp_path / "other"))
    assert elsewhere.returncode == 2 and "the step distill writes" in elsewhere.stderr, elsewhere.stderr
    assert not (tmp_path / "other" / "distill").exists()


@pytest.mark.slow
def test_a_distill_step_without_a_teacher_is_refused(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("exp: x\nsteps: [distill, train]\n", encoding="utf-8")
    done = mt("run", str(recipe))
    assert done.returncode != 0 and "the step distill needs `teacher:`" in done.stderr


@pytest.mark.slow
def test_a_resume_keeps_the_chunk_size_it_started_with_and_a_finished_distill_is_done(trained_experiment, tmp_path,
                                                                                       capsys):
    student = Experiment(tmp_path / "student")
    out = student.root / "distill"
    distill([trained_experiment], student, DecodeOptions(beam=1), chunk_lines=150)
    lang = student.load_config().data.tgt_lang, student.load_config().data.src_lang
    straight = {name: (out / f"train.{name}").read_bytes() for name in lang}
    n_chunks = -(-len(teacher_sources(trained_experiment)) // 150)
    assert n_chunks >= 3 and json.loads((out / "manifest.json").read_text())["chunk_lines"] == 150
    # A finished distill is done, whatever --chunk-lines says now; nothing is rewritten.
    capsys.readouterr()
    assert distill([trained_experiment], student, chunk_lines=100)["chunk_lines"] == 150
    assert "distill: done already" in capsys.readouterr().err
    assert {name: (out / f"train.{name}").read_bytes() for name in lang} == straight
    # ... and stays done when its teacher is removed (to save disk: was "--teacher ...: no experiment there")
    gone = Experiment(tmp_path / "gone")
    shutil.copytree(trained_experiment.root, gone.root)
    other = Experiment(tmp_path / "other-student")
    made = distill([gone], other, DecodeOptions(beam=1), chunk_lines=1000)
    shutil.rmtree(gone.root)
    assert distill([gone], other, DecodeOptions(beam=1)) == made
    assert "its teachers are gone" in capsys.readouterr().err
    # ... but not when the teacher's training text has changed (was: "done already", a line short)
    train_files = [Path(p) for p in parse_source(str(trained_experiment.load_config().data.train[0]), "train",
                                                  ("de", "en")).paths]
    changed = Experiment(tmp_path / "changed")
    shutil.copytree(trained_experiment.root, changed.root)
    cfg = changed.load_config()
    for path in train_files:
        copy = tmp_path / "changed-data" / path.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
    cfg.data.train = [f"files:{tmp_path / 'changed-data' / train_files[0].stem}"]
    changed.config_path.write_text(save_yaml(cfg), encoding="utf-8")
    third = Experiment(tmp_path / "third-student")
    distill([changed], third, DecodeOptions(beam=1), chunk_lines=1000)
    for path in (tmp_path / "changed-data").iterdir():
        path.write_text(path.read_text(encoding="utf-8") + "Noch eins.\n", encoding="utf-8")
    with pytest.raises(MtError, match="a training file of the teacher, has other lines since it was distilled"):
        distill([changed], third, DecodeOptions(beam=1))

    def kill_after_first_chunk():  # what a SIGKILL after the first chunk leaves
        for path in [out / "manifest.json", *(out / f"train.{name}" for name in lang)]:
            path.unlink(missing_ok=True)
        for index in range(1, n_chunks):
            for path in chunk_paths(student, index):
                path.unlink()

    kill_after_first_chunk()
    refused = mt("distill", "--teacher", str(trained_experiment.root), "--exp", str(student.root), "--beam", "1",
                 "--chunk-lines", "100")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--chunk-lines 100" in refused.stderr and "--chunk-lines 150" in refused.stderr.strip().splitlines()[-1]
    assert not list(out.glob("train.*")) and not chunk_paths(student, 1)[1].exists()
    # Nor does it resume with another search: the chunks done were decoded at beam 1.
    with pytest.raises(ConfigError, match=r"translated with decode\.beam 1 \(now 2\)"):
        distill([trained_experiment], student, DecodeOptions(beam=2))
    assert not chunk_paths(student, 1)[1].exists()
    # Without the flag it resumes at the size it started with: the same corpus as the straight run.
    manifest = distill([trained_experiment], student, DecodeOptions(beam=1))
    assert manifest["chunk_lines"] == 150 and manifest["chunks"] == n_chunks
    assert {name: (out / f"train.{name}").read_bytes() for name in lang} == straight
    # Chunks from before the size was recorded: those that do not line up are refused before any translation.
    kill_after_first_chunk()
    (out / "chunks" / "state.json").unlink()
    with pytest.raises(MtError, match=r"000000\.src: not the teacher's source lines 1-100 \(chunks of --chunk-lines 100\)"):
        distill([trained_experiment], student, DecodeOptions(beam=1), chunk_lines=100)
    assert not list(out.glob("train.*")) and not chunk_paths(student, 1)[1].exists()


def test_a_carriage_return_inside_a_source_line_stays_in_its_chunk(tmp_path):
    from mt.apps.chunked import check_done_chunks

    student = Experiment(tmp_path / "student")
    lines = ["ein\rSatz", "zwei"]  # corpus readers keep a \r inside a line; only a trailing one goes
    src, tgt = chunk_paths(student, 0)
    src.parent.mkdir(parents=True)
    src.write_bytes("ein\rSatz\nzwei\n".encode())
    tgt.write_bytes(b"a\rsentence\ntwo\n")
    whose = "the teacher's source lines"
    check_done_chunks(distill_dir(student), [(0, ("de", "en"), lines)], 2, whose)  # these lines: no refusal
    with pytest.raises(MtError, match="not the teacher's source lines"):
        check_done_chunks(distill_dir(student), [(0, ("de", "en"), ["ein Satz", "zwei"])], 2, whose)


def one_line_error(done: subprocess.CompletedProcess, code: int, *words: str) -> str:
    """The CLI refused with `code` and one line (no traceback) holding each of `words`; returns it."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


@pytest.mark.slow
def test_damaged_bookkeeping_files_are_one_line_errors_naming_them(trained_experiment, tmp_path):
    teacher, student = str(trained_experiment.root), Experiment(tmp_path / "student")
    out = distill_dir(student)
    state = out / "chunks" / "state.json"
    state.parent.mkdir(parents=True)
    for damage, what in ((b"{bad", "not valid JSON (line 1"), (b"\xff", "not UTF-8 text (byte 1)"),
                         (b"[]", "a JSON list, not an object"), (b'{"chunk_lines": "x"}', "chunk_lines 'x'")):
        state.write_bytes(damage)
        line = one_line_error(mt("distill", "--teacher", teacher, "--exp", str(student.root)), 1, str(state), what)
        assert f"remove {state.parent} to start over" in line
        assert state.read_bytes() == damage and not student.has_config()  # refused before the student was made
    state.unlink()
    manifest = out / "manifest.json"
    for damage, what in ((b"{bad", "not valid JSON"), (b"{}", "no 'teachers'"), (b"\xfe", "not UTF-8 text")):
        manifest.write_bytes(damage)
        line = one_line_error(mt("distill", "--teacher", teacher, "--exp", str(student.root)), 1, str(manifest), what)
        assert "remove it and rerun `mt distill`" in line and manifest.read_bytes() == damage
    manifest.unlink()
    # A chunk's translations damaged on disk (one chunk holding every source: nothing to translate).
    src, tgt = chunk_paths(student, 0)
    src.write_text("".join(line + "\n" for line in teacher_sources(trained_experiment)), encoding="utf-8")
    tgt.write_bytes(b"ok\n\xffbad\n")
    line = one_line_error(mt("distill", "--teacher", teacher, "--exp", str(student.root), "--chunk-lines", "100000"),
                          1, str(tgt), "not UTF-8 text (byte 4)")
    assert "remove 000000.src and 000000.tgt to translate that chunk again" in line
    assert tgt.read_bytes() == b"ok\n\xffbad\n" and not manifest.exists() and not student.has_config()
    tgt.write_text("one line\n", encoding="utf-8")
    with pytest.raises(MtError, match=f"{tgt}: 1 lines for {len(teacher_sources(trained_experiment))} inputs"):
        distill([trained_experiment], student, chunk_lines=100000)


@pytest.mark.slow
def test_a_teacher_that_does_not_load_leaves_no_student_behind(trained_experiment, tmp_path):
    truncated = tmp_path / "truncated.pt"
    whole = trained_experiment.checkpoint_path("last").read_bytes()
    truncated.write_bytes(whole[:len(whole) // 2])
    teacher = str(trained_experiment.root)
    fresh = tmp_path / "fresh"
    done = mt("distill", "--teacher", teacher, "--exp", str(fresh), "--checkpoint", str(truncated))
    one_line_error(done, 1, str(truncated), "truncated")
    assert not fresh.exists()  # no config, tokenizer or chunk state: a retry starts clean
    # A state recorded with no chunk done (so an earlier run left it) binds no chunk size.
    student = Experiment(tmp_path / "student")
    state = distill_dir(student) / "chunks" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text('{"chunk_lines": 2000, "how": {}, "seconds": 0.0}\n', encoding="utf-8")
    done = mt("distill", "--teacher", teacher, "--exp", str(student.root), "--checkpoint", str(truncated),
              "--chunk-lines", "100")
    one_line_error(done, 1, str(truncated), "truncated")
    assert not student.has_config() and not student.has_tokenizer()
    assert json.loads(state.read_text(encoding="utf-8"))["chunk_lines"] == 2000  # not rewritten


@pytest.mark.slow
def test_a_teacher_cannot_be_its_own_student(trained_experiment, tmp_path):
    teacher = tmp_path / "teacher"
    shutil.copytree(trained_experiment.root, teacher)
    before = sorted(path.relative_to(teacher) for path in teacher.rglob("*"))
    done = mt("distill", "--teacher", str(teacher), "--exp", f"{teacher}/../teacher")
    one_line_error(done, 2, "the same directory as --teacher", "distill into a new --exp")
    with pytest.raises(ConfigError, match="same directory"):
        distill([trained_experiment, Experiment(teacher)], Experiment(teacher))  # the second teacher too
    assert sorted(path.relative_to(teacher) for path in teacher.rglob("*")) == before


def test_a_resume_whose_teacher_changed_at_the_same_path_is_refused(trained_experiment, tmp_path):
    """Was accepted: the chunks done came from the old weights, the rest from the new ones."""
    teacher = Experiment(tmp_path / "teacher")
    shutil.copytree(trained_experiment.root, teacher.root)
    student = Experiment(tmp_path / "student")
    distill([teacher], student, DecodeOptions(beam=2), checkpoint="last", chunk_lines=200)
    (student.root / "distill" / "manifest.json").unlink()  # as if killed after its chunks
    step = teacher.checkpoints_dir / "step_0000020.pt"
    shutil.copyfile(step, teacher.checkpoint_path("last"))  # trained on, averaged again...: another model
    with pytest.raises(ConfigError, match="teacher_sha256"):
        distill([teacher], student, DecodeOptions(beam=2), checkpoint="last", chunk_lines=200)


def test_a_student_with_a_config_of_its_own_gets_the_distilled_corpus_added(trained_experiment, tmp_path):
    """Was: the files written, the student's data.train unchanged (it trained on its own corpus) and
    --mix-original ignored. Now added as mt backtranslate adds its corpus; refused once data is made."""
    import dataclasses

    from mt.atomic_files import write_text_atomic
    from mt.config.schema import save_yaml

    teacher_cfg = trained_experiment.load_config()
    own = dataclasses.replace(teacher_cfg, data=dataclasses.replace(teacher_cfg.data, train=[]))
    student, mixed = Experiment(tmp_path / "student"), Experiment(tmp_path / "mixed")
    for exp in (student, mixed):
        exp.root.mkdir()
        write_text_atomic(exp.config_path, save_yaml(own))
    distill([trained_experiment], student, chunk_lines=400)
    corpus = f"files:{(student.root / 'distill' / 'train').resolve()}"
    assert student.load_config().data.train == [corpus]
    sources, _ = load_split(student.load_config().data.sources("train"))
    assert sources == teacher_sources(trained_experiment)
    late = Experiment(tmp_path / "late")  # binarized before: the data would not hold the distilled pairs
    shutil.copytree(student.root, late.root, ignore=shutil.ignore_patterns("distill"))
    write_text_atomic(late.config_path, save_yaml(own))
    late.data_dir.mkdir()  # binarize renames data/ into place when done, its manifest inside: there is data
    late.manifest_path.write_text("{}")
    with pytest.raises(ConfigError, match="binarized data made without the distilled corpus"):
        distill([trained_experiment], late, chunk_lines=400)
    assert late.load_config().data.train == []
    distill([trained_experiment], mixed, chunk_lines=400, mix_original=True)
    mixed_corpus = f"files:{(mixed.root / 'distill' / 'train').resolve()}"
    assert mixed.load_config().data.train == [mixed_corpus, *teacher_cfg.data.train]


def test_a_student_recipe_without_a_training_corpus_binarizes_the_distilled_one(trained_experiment, tmp_path):
    teacher_cfg = trained_experiment.load_config()
    student = Experiment(tmp_path / "student")
    recipe = tmp_path / "student.yaml"
    recipe.write_text(f"""
exp: {student.root}
teacher: {trained_experiment.root}
steps: [distill, binarize]
data: {{src_lang: {teacher_cfg.data.src_lang}, tgt_lang: {teacher_cfg.data.tgt_lang}, valid: {teacher_cfg.data.valid}}}
""", encoding="utf-8")
    done = mt("run", str(recipe))
    assert done.returncode == 0, done.stderr
    assert student.load_config().data.train == [f"files:{(student.root / 'distill' / 'train').resolve()}"]
    distilled = [(src, tgt) for src, tgt in zip(*(
        (student.root / "distill" / f"train.{lang}").read_text(encoding="utf-8").splitlines()
        for lang in (teacher_cfg.data.src_lang, teacher_cfg.data.tgt_lang)))]
    assert len(distilled) == len(teacher_sources(trained_experiment))
    kept = sum(bool(src.strip() and tgt.strip()) for src, tgt in distilled)  # an empty translation is dropped
    assert f"train: kept {kept} of {len(distilled)} pairs" in done.stderr, done.stderr


def test_a_student_recipe_takes_its_teachers_tokenizer_fields_or_is_refused_before_the_copy(trained_experiment,
                                                                                           tmp_path):
    """Was: the student's config kept the defaults (vocab_size 8000 beside a tokenizer of 100, in `mt
    info` and the model card), and `joint: false` left it stuck: binarize wanted two models, the one
    copied could not be replaced and the field could not change."""
    teacher_cfg = trained_experiment.load_config()
    student = Experiment(tmp_path / "student")
    recipe = tmp_path / "student.yaml"
    body = f"""
exp: {student.root}
teacher: {trained_experiment.root}
steps: [distill, binarize]
data: {{src_lang: {teacher_cfg.data.src_lang}, tgt_lang: {teacher_cfg.data.tgt_lang}, valid: {teacher_cfg.data.valid}}}
"""
    recipe.write_text(body + "tokenizer: {joint: false}\n", encoding="utf-8")
    done = mt("run", str(recipe))
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
        f"error: tokenizer.joint False: the teacher's tokenizer ({trained_experiment.tokenizer_dir}), which a "
        "student shares, has True; leave it out"), done.stderr
    assert not student.tokenizer_dir.exists()
    recipe.write_text(body, encoding="utf-8")  # as the message says: then it runs
    done = mt("run", str(recipe))
    assert done.returncode == 0, done.stderr
    assert student.load_config().tokenizer == teacher_cfg.tokenizer and teacher_cfg.tokenizer.vocab_size == 100
    # `mt distill` into a student with a config of its own: the defaults it holds are no one's choice
    from mt.atomic_files import write_text_atomic
    from mt.config.schema import ExperimentConfig, save_yaml

    own = Experiment(tmp_path / "own")
    cfg = ExperimentConfig()
    cfg.data.src_lang, cfg.data.tgt_lang = teacher_cfg.data.src_lang, teacher_cfg.data.tgt_lang
    own.root.mkdir()
    write_text_atomic(own.config_path, save_yaml(cfg))
    done = mt("distill", "--teacher", str(trained_experiment.root), "--exp", str(own.root), "--quiet")
    assert done.returncode == 0, done.stderr
    assert own.load_config().tokenizer.vocab_size == 100


def test_a_changed_chunk_of_a_later_direction_names_its_own_lines(tmp_path):
    """Chunks are numbered on through the directions and a direction's last one may be short: chunk 4
    holds en-fr's lines 3-4 (was named lines 9-10, as if all chunks were full and of one direction)."""
    from mt.apps.chunked import check_done_chunks, cut_chunks
    from mt.atomic_files import write_text_atomic

    lines = [f"Zeile {i}." for i in range(1, 6)]
    chunks = cut_chunks([(("en", "de"), lines), (("en", "fr"), lines)], 2)
    assert [(index, pair[1], len(part)) for index, pair, part in chunks][3:5] == [(3, "fr", 2), (4, "fr", 2)]
    src_path, tgt_path = chunk_files(tmp_path, 4)
    write_text_atomic(src_path, "Eine andere.\nZeile.\n")  # the input changed since
    write_text_atomic(tgt_path, "Another.\nLine.\n")
    with pytest.raises(MtError, match=r"not the teacher's source lines 3-4 of en-fr \(chunks of --chunk-lines 2\)"):
        check_done_chunks(tmp_path, chunks, 2, "the teacher's source lines")


@pytest.mark.slow
def test_the_teachers_back_translated_sources_are_skipped_unless_kept(trained_experiment, tmp_path):
    """Was: the noised synthetic sources of bt: specs were distilled, without the <BT> tag the teacher saw."""
    from mt.config.schema import save_yaml

    teacher = Experiment(tmp_path / "teacher")
    shutil.copytree(trained_experiment.root, teacher.root)
    cfg = teacher.load_config()
    real = teacher_sources(teacher)
    noised = ["<blank> Hund der", "Katze <blank> die", "schläft Haus das"]
    synthetic = tmp_path / "synthetic"
    for lang, lines in ((cfg.data.src_lang, noised), (cfg.data.tgt_lang, ["a", "b", "c"])):
        synthetic.with_name(f"synthetic.{lang}").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    cfg.data.train = [*cfg.data.train, f"bt:files:{synthetic}*2"]
    teacher.config_path.write_text(save_yaml(cfg), encoding="utf-8")
    for student, flags, want in (("skipped", [], real), ("kept", ["--keep-bt"], real + noised)):
        done = mt("distill", "--teacher", str(teacher.root), "--exp", str(tmp_path / student), *flags)
        assert done.returncode == 0, done.stderr
        distilled = (tmp_path / student / "distill" / f"train.{cfg.data.src_lang}").read_text(encoding="utf-8")
        assert distilled.splitlines() == want
        manifest = json.loads((tmp_path / student / "distill" / "manifest.json").read_text())
        assert manifest["skipped_bt_lines"] == (0 if flags else 3) and manifest["lines"] == len(want)
        assert manifest["invalid_pairs_skipped"] == 0
        said = "skipped 3 lines of the teacher's back-translated sources" in done.stderr
        assert said != bool(flags) and (flags or f"bt:files:{synthetic}*2" in done.stderr), done.stderr
    cfg.data.train = [f"bt:files:{synthetic}"]
    teacher.config_path.write_text(save_yaml(cfg), encoding="utf-8")
    one_line_error(mt("distill", "--teacher", str(teacher.root), "--exp", str(tmp_path / "none"), "--quiet"), 1,
                   "all back-translated (bt:)", "--keep-bt")


def test_an_input_holding_a_line_break_is_one_line_of_each_side(tmp_path):
    """A corpus value with a line break (jsonl, Hugging Face) is one input: joined with a space, it is
    one line of the chunk files and of the joined corpus, which then counts a line for each input
    (it was a refusal after the whole corpus was translated, and again at every resume)."""
    from mt.apps.chunked import joined, plan_chunks, translate_chunks

    inputs = ["one", "two\nthree", "four\r\nfive", "six"]
    for attempt in range(2):  # and a resume finds the chunks done with the same inputs
        plan = plan_chunks(tmp_path, [(("de", "en"), inputs)], 2, {"how": 1}, "the teacher's source lines")
        chunks, _ = translate_chunks(tmp_path, plan, lambda index, pair, lines, first: [s.upper() for s in lines], "test")
        assert len(plan.todo) == (2 if attempt == 0 else 0)
        assert joined(tmp_path, chunks, 0) == "one\ntwo three\nfour five\nsix\n"
        assert joined(tmp_path, chunks, 1) == "ONE\nTWO THREE\nFOUR FIVE\nSIX\n"


def test_a_warning_names_the_line_among_all_of_its_direction_not_within_its_chunk(trained_experiment, tmp_path,
                                                                                  capsys):
    """A line cut to the model's positions is named by its place among the teacher's source lines of its
    direction (was: its place within its chunk, "input line 1" for the 5th line here); chunked.first_lines
    counts each direction on its own."""
    from mt.apps.chunked import plan_chunks, translate_chunks
    from mt.apps.distill import teacher_translator
    from mt.decoding.options import DecodeOptions

    cfg = trained_experiment.load_config()
    translate = teacher_translator(trained_experiment, cfg, [str(trained_experiment.checkpoint_path("last"))],
                                   DecodeOptions().resolved(cfg.decode), "cpu", "fp32", None, threads=1)
    inputs = ["ein Haus", "ein Hund", "eine Katze", "ein Mann", " ".join(["Haus"] * 600), "ein Baum"]
    plan = plan_chunks(tmp_path, [(("de", "en"), inputs)], 2, {"beam": 5}, "the lines")
    translate_chunks(tmp_path, plan, translate, "test")
    warnings = [line for line in capsys.readouterr().err.splitlines() if "cut to" in line]
    assert len(warnings) == 1 and "input line 5: " in warnings[0], warnings
    # Where the lines were read (distill's teacher_sources gives it): the file's line, past a line left out
    from mt.data.corpus import LineOrigins

    read = LineOrigins()
    read.add("train.de", "line", [0, 1, 2, 3, 5, 6])  # the file's 5th line (an invalid one) left out
    translate = teacher_translator(trained_experiment, cfg, [str(trained_experiment.checkpoint_path("last"))],
                                   DecodeOptions().resolved(cfg.decode), "cpu", "fp32", None, threads=1,
                                   origins={("de", "en"): read})
    plan = plan_chunks(tmp_path / "named", [(("de", "en"), inputs)], 2, {"beam": 5}, "the lines")
    translate_chunks(tmp_path / "named", plan, translate, "test")
    warnings = [line for line in capsys.readouterr().err.splitlines() if "cut to" in line]
    assert len(warnings) == 1 and "train.de:6: " in warnings[0], warnings
    from mt.apps.chunked import first_lines

    chunks = [(0, ("de", "en"), ["a", "b"]), (1, ("de", "en"), ["c"]), (2, ("en", "de"), ["d", "e"]),
              (3, ("en", "de"), ["f"])]
    assert first_lines(chunks) == {0: 0, 1: 2, 2: 0, 3: 2}


def test_two_runs_translating_into_one_chunks_directory_do_not_mix(tmp_path):
    """The chunks are translated under a lock: a second run meanwhile is refused in one line, and a
    run that planned before another wrote chunks otherwise is refused, not mixed with them."""
    import dataclasses

    from mt.apps.chunked import joined, plan_chunks, translate_chunks
    from mt.experiment.lock import directory_lock

    inputs = [("de", "en"), ["one", "two", "three", "four"]]
    upper = lambda index, pair, lines, first: [s.upper() for s in lines]  # noqa: E731
    plan = plan_chunks(tmp_path, [inputs], 2, {"beam": 1}, "the lines")
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    with directory_lock(chunks, chunks / "translate.lock", "translated"):  # another run, translating now
        with pytest.raises(MtError) as exc:
            translate_chunks(tmp_path, plan, upper, "test")
    assert "is already being translated by process" in str(exc.value) and "\n" not in str(exc.value)
    assert not list(chunks.glob("*.tgt"))
    other = plan_chunks(tmp_path, [inputs], 2, {"beam": 2}, "the lines")  # all three planned at once
    smaller = plan_chunks(tmp_path, [inputs], 1, {"beam": 2}, "the lines")
    translate_chunks(tmp_path, other, lambda index, pair, lines, first: [s.title() for s in lines], "test")
    with pytest.raises(ConfigError) as exc:
        translate_chunks(tmp_path, plan, upper, "test")
    assert "beam 2 (now 1)" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        translate_chunks(tmp_path, smaller, upper, "test")
    assert "chunks of 2 lines meanwhile (this one: 1)" in str(exc.value)
    # planned on other input, as the same way: its chunks would have been joined with the other's lines
    elsewhere = plan_chunks(tmp_path / "b", [(("de", "en"), ["five", "six", "seven", "eight"])], 2, {"beam": 2},
                            "the lines")
    shutil.copytree(chunks, tmp_path / "b" / "chunks")  # another run's, written since this one planned
    with pytest.raises(MtError, match="not the lines test was given 1-2"):
        translate_chunks(tmp_path / "b", dataclasses.replace(elsewhere, todo=elsewhere.chunks), upper, "test")
    assert joined(tmp_path, other.chunks, 1) == "One\nTwo\nThree\nFour\n"
    assert not (chunks / "translate.lock").exists()


def test_a_done_distill_from_other_teachers_is_refused(trained_experiment, tmp_path):
    """Done is done whatever the search flags say, but not for another teacher (a recipe edited): it
    said "done already" and the student trained on the old teacher's corpus."""
    student = Experiment(tmp_path / "student")
    distill([trained_experiment], student, DecodeOptions(beam=1), chunk_lines=1000)
    other = Experiment(tmp_path / "other")
    shutil.copytree(trained_experiment.root, other.root)
    with pytest.raises(MtError, match=r"distilled from .*, not .*other"):
        distill([other], student, DecodeOptions(beam=1))
    assert distill([trained_experiment], student, DecodeOptions(beam=2))["lines"]  # the same teacher: done
    retrained = Experiment(tmp_path / "retrained")  # a teacher trained again at its path: another teacher
    shutil.copytree(trained_experiment.root, retrained.root)
    distill([retrained], Experiment(tmp_path / "student2"), DecodeOptions(beam=1), chunk_lines=1000)
    best = retrained.find_checkpoint(retrained.load_config().decode.checkpoint)
    best.write_bytes(best.read_bytes() + b"\0")  # other bytes at the same path
    with pytest.raises(MtError, match=r"distilled from an earlier .* \(saved again since\)"):
        distill([retrained], Experiment(tmp_path / "student2"), DecodeOptions(beam=1))
    # --mix-original asked once the distillation is done: added while nothing is made from the config
    # (was ignored, "done"), refused once data is
    distill([trained_experiment], student, mix_original=True)
    assert student.load_config().data.train[1:] == trained_experiment.load_config().data.train
    late = Experiment(tmp_path / "late")
    shutil.copytree(student.root, late.root)
    from mt.atomic_files import write_text_atomic
    from mt.config.schema import save_yaml

    cfg = late.load_config()
    cfg.data.train = cfg.data.train[:1]
    write_text_atomic(late.config_path, save_yaml(cfg))
    late.data_dir.mkdir()
    late.manifest_path.write_text("{}")
    with pytest.raises(ConfigError, match="binarized data made without the distilled corpus"):
        distill([trained_experiment], late, mix_original=True)


def test_joining_refuses_a_file_mt_did_not_write_from_the_chunks(tmp_path):
    """A file a user put where the joined corpus goes was overwritten; one holding the joined text
    (a run stopped before its manifest wrote it) is written again."""
    from mt.apps.chunked import write_joined

    mine, theirs = tmp_path / "train.en", tmp_path / "train.de"
    theirs.write_text("my own corpus\n", encoding="utf-8")
    texts = {mine: "a\nb\n", theirs: "ein\nzwei\n"}
    with pytest.raises(MtError, match=r"train\.de: already there and not what .* joins to .*move it out"):
        write_joined(tmp_path, texts, "mt distill")
    assert theirs.read_text(encoding="utf-8") == "my own corpus\n" and not mine.exists()  # nothing written
    theirs.write_text("ein\nzwei\n", encoding="utf-8")
    write_joined(tmp_path, texts, "mt distill")
    assert mine.read_text(encoding="utf-8") == "a\nb\n"


@pytest.mark.slow
def test_a_distill_keeps_a_users_file_in_its_folder_and_joins_once_it_is_moved(trained_experiment, tmp_path):
    teacher, student = str(trained_experiment.root), Experiment(tmp_path / "student")
    src_lang = trained_experiment.load_config().data.src_lang
    users = tmp_path / "student" / "distill" / f"train.{src_lang}"
    users.parent.mkdir(parents=True)
    users.write_text("kept\n", encoding="utf-8")
    done = mt("distill", "--teacher", teacher, "--exp", str(student.root), "--beam", "1")
    last = done.stderr.strip().splitlines()[-1]  # after the chunks' progress lines
    assert done.returncode == 1 and "Traceback" not in done.stderr and str(users) in last and "move it out" in last
    assert users.read_text(encoding="utf-8") == "kept\n" and not (users.parent / "manifest.json").exists()
    users.rename(tmp_path / "moved")
    done = mt("distill", "--teacher", teacher, "--exp", str(student.root), "--beam", "1")
    assert done.returncode == 0 and "done already" in done.stderr, done.stderr
    assert users.read_text(encoding="utf-8").splitlines() == teacher_sources(trained_experiment)


@pytest.mark.slow
def test_a_teacher_recipe_s_results_go_to_stderr_under_its_name(trained_experiment, tmp_path, capsys):
    """A student recipe whose teacher is a recipe: the teacher's `valid:`/`test:` lines are logged under
    its name, and the results (stdout in the CLI) are the student's only (the teacher's came first)."""
    from mt.apps.run import run_recipe

    teacher_dir = tmp_path / "teacher"
    shutil.copytree(trained_experiment.root, teacher_dir)
    (teacher_recipe := tmp_path / "teacher.yaml").write_text(f"exp: {teacher_dir}\nsteps: [evaluate]\n", encoding="utf-8")
    teacher_cfg = trained_experiment.load_config()
    student_dir = tmp_path / "student"
    (recipe := tmp_path / "student.yaml").write_text(f"""
exp: {student_dir}
teacher: {teacher_recipe}
steps: [distill]
{student_data(student_dir, teacher_cfg)}decode: {{beam: 1, max_len_b: 10}}
""", encoding="utf-8")
    results: list[str] = []
    run_recipe(recipe, None, {}, print_result=results.append)
    assert (student_dir / "distill" / "manifest.json").exists()
    assert not any(line.startswith(("valid:", "test:")) for line in results)
    logged = " ".join(capsys.readouterr().err.split())
    assert f"teacher {teacher_recipe}: valid: BLEU" in logged and f"teacher {teacher_recipe}: test: BLEU" in logged


def test_a_training_pair_the_teachers_binarize_left_out_is_left_out_of_distill_too(trained_experiment, tmp_path, capsys):
    """The teacher trained with data.clean on: its binarize skipped a line of invalid UTF-8, and distill
    of that teacher stopped on it."""
    from helpers import toy_corpus

    from mt.apps.distill import teacher_sources as sources_of

    cfg = trained_experiment.load_config()
    src, tgt = toy_corpus(3, seed=9)
    src[0] = f"  {src[0]}  mit  Leerzeichen "  # every other line as it is written: a resume compares them
    (tmp_path / "t.de").write_bytes("\n".join(src[:1]).encode() + b"\n\xff kaputt\n" + src[2].encode() + b"\n")
    (tmp_path / "t.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    cfg.data.src_lang, cfg.data.tgt_lang = "de", "en"
    cfg.data.train = [f"files:{tmp_path / 't'}"]
    assert cfg.data.clean
    parts, _, invalid = sources_of(cfg, keep_bt=False)
    assert parts == [(("de", "en"), [src[0], src[2]])] and invalid == 1
    assert "distill: 1 pairs of the teacher's training data are not text and are left out" in " ".join(capsys.readouterr().err.split())


def test_a_models_row_shows_scores_only_of_its_own_checkpoint(trained_experiment, tmp_path):
    """The student-and-teachers row named best.pt beside the BLEU of whatever scores/test.json held (of
    step_N.pt, say), never said stale."""
    import json

    from mt.apps.distill import _model_row
    from mt.apps.evaluate import evaluate_split

    exp = Experiment(tmp_path / "teacher")
    shutil.copytree(trained_experiment.root, exp.root)
    record = evaluate_split(exp, exp.load_config(), "test")
    own = exp.checkpoints_dir / record["checkpoint"]
    row = _model_row("teacher", exp, own)
    assert row["bleu"] == round(record["bleu"], 2) and "stale" not in row and "scores_of" not in row
    other = exp.step_checkpoints()[0]
    row = _model_row("teacher", exp, other)
    assert "bleu" not in row and row["scores_of"] == record["checkpoint"]
    exp.score_path("test").write_text(json.dumps({**record, "data_sha256": "0"}))  # the test split changed
    assert _model_row("teacher", exp, own)["stale"] == ["the test split's lines changed since"]


def test_a_student_whose_data_the_teachers_tokenizer_cannot_read_is_refused_before_distilling(trained_experiment,
                                                                                               tmp_path):
    """A student recipe reading back-translated pairs (bt:, which need <BT>) under a teacher whose tokenizer
    has none distilled for hours, then binarize refused it, and a student cannot train another tokenizer;
    one reading the distilled corpus by another name failed the same way ("no such file")."""
    from mt.apps.distill import corpus_specs

    student = Experiment(tmp_path / "student")
    student.root.mkdir()
    cfg = trained_experiment.load_config()
    cfg.data.train = [*corpus_specs(cfg, student), f"bt:files:{tmp_path / 'mono'}"]
    student.config_path.write_text(save_yaml(cfg), encoding="utf-8")
    with pytest.raises(ConfigError, match="its data needs <BT>, <blank>, which the teacher's tokenizer"):
        distill([trained_experiment], student, DecodeOptions(beam=1))
    assert not (student.root / "distill" / "chunks").exists() or not list((student.root / "distill" / "chunks").glob("*.tgt"))
    cfg.data.train = [f"files:{(student.root / 'distill').resolve()}/train.de-en"]
    student.config_path.write_text(save_yaml(cfg), encoding="utf-8")
    with pytest.raises(ConfigError, match="which is not the distilled corpus: it is files:"):
        distill([trained_experiment], student, DecodeOptions(beam=1))
    # the corpus read with a weight, or marked bt:, is the corpus: not added a second time
    cfg.data.train = [f"{corpus_specs(cfg, student)[0]} *2"]
    student.config_path.write_text(save_yaml(cfg), encoding="utf-8")
    distill([trained_experiment], student, DecodeOptions(beam=1), chunk_lines=1000)
    assert student.load_config().data.train == cfg.data.train
