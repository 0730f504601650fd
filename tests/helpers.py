"""The tests' shared helpers (plain functions and classes; the fixtures are in conftest.py). Import them
as `from helpers import ...`: tests/ is on sys.path (pythonpath in pyproject.toml's [tool.pytest.ini_options]).

- paths: TESTS (tests/), REPO (the repository), FIXTURES (tests/fixtures);
- a toy German-English(-French) corpus and tiny experiments: toy_corpus, toy_multiway, tiny_experiment,
  tiny_config, build_experiment, copy_experiment, one_thread;
- tiny models and tensors: tiny_model, sources, params, assert_params_close, assert_same;
- the command line: mt (`mt ARGS` in this process), mt_process (`python -m mt ARGS` in another), one_line;
- the Ding dictionary: DING_SAMPLE, write, write_big_ding;
- `mt serve`: LINES, load, Served (uvicorn in a thread on a loopback port), call, ok, Hook.

The toy pairs are word-for-word (a word list in each language, same order), so even a model of a few
thousand parameters learns something in seconds.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest
import torch

from cli import main as cli
from mt.atomic_files import write_text_atomic
from mt.config.schema import ExperimentConfig, save_yaml
from mt.data.binarize import binarize
from mt.data.train_tokenizer import train_tokenizer
from mt.experiment import Experiment
from mt.model.transformer import Transformer
from mt.tokenizer import EOS_ID, PAD_ID
from mt.translate import Translator

TESTS = Path(__file__).resolve().parent  # tests/, where conftest.py and this module are
REPO = TESTS.parent  # the repository: recipes/, docs/, tools/, bench/, data/
FIXTURES = TESTS / "fixtures"  # the experiment written by an earlier mt (integration/test_saved_experiment.py)

WORDS_DE = "der die das ein eine mann frau hund katze läuft spielt sitzt auf im park haus rot blau groß klein".split()
WORDS_EN = "the the the a a man woman dog cat runs plays sits on in park house red blue big small".split()


def toy_corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    """n sentence pairs of 3-9 words, German and English."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        idx = [rng.randrange(len(WORDS_DE)) for _ in range(rng.randint(3, 9))]
        src.append(" ".join(WORDS_DE[i] for i in idx).capitalize() + ".")
        tgt.append(" ".join(WORDS_EN[i] for i in idx).capitalize() + ".")
    return src, tgt


WORDS_FR = "le la le un une homme femme chien chat court joue assis sur dans parc maison rouge bleu grand petit".split()
WORDS = {"de": WORDS_DE, "en": WORDS_EN, "fr": WORDS_FR}


def toy_multiway(n: int, seed: int, langs: tuple[str, ...] = ("en", "de", "fr")) -> dict[str, list[str]]:
    """n sentences in each of `langs`, word for word the same (a multi-way parallel toy corpus, as
    Multi30k is): lang -> lines."""
    rng = random.Random(seed)
    lines: dict[str, list[str]] = {lang: [] for lang in langs}
    for _ in range(n):
        idx = [rng.randrange(len(WORDS_DE)) for _ in range(rng.randint(3, 9))]
        for lang in langs:
            lines[lang].append(" ".join(WORDS[lang][i] for i in idx).capitalize() + ".")
    return lines


def tiny_experiment(root: Path, sizes: dict[str, int], model: dict, train: dict, decode: dict,
                    tokenizer: dict | None = None) -> tuple[Experiment, ExperimentConfig]:
    """root/{split}.de|en toy files, and root/exp with its config, tokenizer (vocabulary 100 unless
    `tokenizer` changes it) and binarized data."""
    cfg = ExperimentConfig()
    for split, n in sizes.items():
        src, tgt = toy_corpus(n, seed=len(split))
        (root / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (root / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
        setattr(cfg.data, split, [f"files:{root / split}"])
    cfg.tokenizer.vocab_size, cfg.tokenizer.byte_fallback = 100, False
    cfg.tokenizer.__dict__.update(tokenizer or {})
    cfg.model.__dict__.update(d_model=32, d_ff=64, n_heads=2, **model)
    cfg.train.precision = "fp32"  # the same numbers on every CPU (the default, auto, differs by CPU)
    cfg.train.__dict__.update(train)
    cfg.decode.__dict__.update(decode)
    exp = Experiment(root / "exp")
    write_text_atomic(exp.config_path, save_yaml(cfg))
    train_tokenizer(exp, cfg)
    binarize(exp, cfg)
    return exp, cfg


def tiny_config(corpus_dir: Path, splits: tuple[str, ...] = ("train", "valid", "test")) -> ExperimentConfig:
    """A 1+1-layer d_model 32 config over corpus_dir/{split}.de|en, 10 updates of 300 tokens."""
    cfg = ExperimentConfig()
    for split in splits:
        setattr(cfg.data, split, [f"files:{corpus_dir / split}"])
    cfg.tokenizer.vocab_size, cfg.tokenizer.byte_fallback = 100, False
    cfg.model.__dict__.update(enc_layers=1, dec_layers=1, d_model=32, d_ff=64, n_heads=2, dropout=0.1)
    cfg.train.__dict__.update(max_steps=10, max_tokens=300, lr_peak=3e-3, warmup_steps=10, log_every=5,
                              valid_every=1000, save_every=1000, precision="fp32")  # as tiny_experiment's
    cfg.decode.max_len_b = 10
    return cfg


class one_thread:
    """Train on one thread (the other core may be busy), then restore torch's setting."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)


# -- tiny models and tensors ----------------------------------------------------------------------


def tiny_model(vocab: int = 32, seed: int = 0, **kwargs) -> Transformer:
    """The tests' tiny Transformer, in eval mode: d_model 16, d_ff 32, 4 heads, 2+2 layers, dropout
    0.1, 64 positions, `vocab` tokens on each side; `kwargs` change any of these."""
    torch.manual_seed(seed)
    args = dict(d_model=16, d_ff=32, n_heads=4, enc_layers=2, dec_layers=2, dropout=0.1, max_positions=64)
    args.update(kwargs)
    return Transformer(vocab, vocab, **args).eval()


def sources(lengths: list[int], vocab: int = 32, seed: int = 0) -> torch.Tensor:
    """Right-padded sources of real tokens ending in EOS."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(4, vocab, (n,), generator=gen)
        ids[row, n] = EOS_ID
    return ids


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def assert_params_close(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=0, msg=lambda m: f"{name}: {m}")


def assert_same(a, b, where: str = "") -> None:
    """Equal down to the last bit: tensors with torch.equal, containers item by item."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


# -- a tiny experiment built through the library (no checkpoints) ---------------------------------


def build_experiment(root: Path) -> Experiment:
    """Corpus files under root, then root/exp with its tokenizer and binarized data (no checkpoints)."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("valid", 40), ("test", 20)):
        src, tgt = toy_corpus(n, seed=len(split))
        if split == "valid":
            src[3] = ""  # binarize drops this pair: valid.lines.npy is then not 0..n-1
        (root / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (root / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    exp = Experiment(root / "exp")
    cfg = tiny_config(root)
    write_text_atomic(exp.config_path, save_yaml(cfg))
    train_tokenizer(exp, cfg)
    binarize(exp, cfg)
    return exp


def copy_experiment(exp: Experiment, root: Path, **train_fields) -> tuple[Experiment, ExperimentConfig]:
    """A fresh copy of exp's config, tokenizer and data (no checkpoints), with train fields changed
    (`model__dropout=0.0` changes a model field)."""
    new = Experiment(root)
    root.mkdir(parents=True)
    for name in ("tokenizer", "data"):
        shutil.copytree(exp.root / name, root / name)
    cfg = copy.deepcopy(exp.load_config())
    for key, value in train_fields.items():
        section, _, name = key.rpartition("__")
        setattr(getattr(cfg, section or "train"), name, value)
    write_text_atomic(new.config_path, save_yaml(cfg))
    return new, cfg


# -- the command line -----------------------------------------------------------------------------


def mt(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """`mt ARGS` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["mt", *map(str, args)])
    monkeypatch.delenv("MT_DEBUG", raising=False)
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def mt_process(*args: str) -> subprocess.CompletedProcess:
    """`python -m mt ARGS` in a process of its own, on one thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, env=env, timeout=300)


def one_line(exc: pytest.ExceptionInfo, *needles: str) -> str:
    """The message of an error caught by pytest.raises: one short line holding each of `needles`."""
    message = str(exc.value)
    assert "\n" not in message and len(message) < 400, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


# -- the Ding dictionary --------------------------------------------------------------------------


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


# Lines in the shapes of Debian's trans-de-en (GPL-2+; a few lines quoted, some shortened), plus
# crafted ones for duplicates, unaligned variants and a second translation of one sentence.
DING_SAMPLE = """\
# Version :: devel 2023-01-30
# License :: GPL Version 2 or later; GNU General Public License
Aalleiter {f}; Aaltreppe {f}; Aalpass {m} (Wasserbau) | Aalleitern {pl}; Aaltreppen {pl}; Aalpässe {pl} :: eel ladder (water engineering) | eel ladders
Aalmolche {pl}; Fischmolche {pl} (Amphiuma) (zoologische Gattung) [zool.] <Aalmolch> :: amphiuma salamanders; amphiumas; congo eels [coll.]; congo snakes [coll.] (zoological genus)
Gütertrennung {f} [jur.] | Die Ehegatten leben in Gütertrennung.; Es besteht Gütertrennung. :: (regime of) separation of property (between spouses) | The spouses are living under the regime of separation of property.
Lebenserwartung {f} [biol.] | Männer haben eine geringere Lebenserwartung als Frauen. :: lifespan; lifetime | Man have a shorter lifespan than women.
nichts dafürkönnen {vi} (es nicht bewusst steuern können) [psych.] | Er kann nichts dafür. Er ist von Natur aus so. :: cannot help it | He can’t help it. It’s in his nature.
rundweg; entschieden {adv} | etw. rundweg leugnen | Sie leugnete rundweg. :: flatly | to deny sth. flatly | She flatly denied.
Ach ja?; Ah ja? {interj} (Ausdruck von Zweifel) | „Das müsste leicht zu eruieren sein.“ :: Oh yes? (used to express doubt) | 'It should be easy to find out.'
Medikament {n} | Nehmen Sie (irgendwelche) Medikamente? :: medicine | Are you taking any medication?
Schnee {m} [meteo.] | Es hat geschneit, aber der Schnee ist nicht liegengeblieben. :: snow | We had some snow, but it didn’t settle [Br.].
Kontonummer {f} /Kto.-Nr./ [fin.] | Kontonummern {pl} :: account number /acct. no./ | account numbers
Aalfang {m} :: eel fishing
Aalfang {m} :: eel fishing
Aalsuppe {f} [cook.] | Aalsuppen {pl} | Das ist eine Suppe. :: eel soup | eel soups
Lebenserwartung {f} | Männer haben eine geringere Lebenserwartung als Frauen. :: life expectancy | Men have a shorter life expectancy than women.
Lebensdauer {f} :: lifespan
leugnen {vt} | Sie leugnete rundweg.; Sie stritt es ab. :: to deny | She denied it; She flatly denied it.
"""


def write_big_ding(path: Path, sentences: int = 1200, phrases: int = 30) -> Path:
    """A synthetic Ding file with more sentence pairs than the 2 * HELD_OUT that valid and test hold
    out: line i is "Das ist Satz Nummer i hier. :: This is sentence number i here.", then phrase lines
    "Wort i {n} :: word i" (unit/test_ding.py and unit/test_corpus.py)."""
    lines = ["# Version :: synthetic"]
    lines += [f"Das ist Satz Nummer {i} hier. :: This is sentence number {i} here." for i in range(sentences)]
    lines += [f"Wort {i} {{n}} :: word {i}" for i in range(phrases)]
    return write(path, "\n".join(lines) + "\n")


# -- mt serve -------------------------------------------------------------------------------------


LINES = toy_corpus(24, seed=7)[0]


def load(experiment) -> Translator:
    """The experiment's translator, its output capped at 16 tokens (keeps the cut 1200-token line quick)."""
    translator = Translator.load(experiment, experiment.load_config())
    translator.decode_cfg.max_len_a, translator.decode_cfg.max_len_b = 0.0, 16
    return translator


class Served:
    """uvicorn serving `app` in a thread of this process, on a free loopback port."""

    def __init__(self, app):
        from mt.serve.app import bind, uvicorn_server  # here: only the tests that serve import the server

        self.app = app
        self.sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn_server(app)  # as `mt serve` runs it
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def call(url: str, body=None, *, form=None, raw: bytes | None = None, headers: dict | None = None,
         timeout: float = 120):
    """(status, headers, parsed JSON) of a GET, or of a POST of `body` as JSON, `form` URL-encoded or `raw`."""
    head, data = dict(headers or {}), raw
    if body is not None:
        data, head["Content-Type"] = json.dumps(body).encode(), "application/json"
    elif form is not None:
        data, head["Content-Type"] = urlencode(form, doseq=True).encode(), "application/x-www-form-urlencoded"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, head), timeout=timeout) as response:
            return response.status, response.headers, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read())


def ok(url: str, body=None, **kwargs) -> dict:
    status, _, data = call(url, body, **kwargs)
    assert status == 200, (status, data)
    return data


class Hook:
    """Around the model's `decode`, which every search calls each step: a gate that holds the worker
    inside a search, and a switch that makes the next step raise, a RuntimeError (True) or the
    exception given (plain Python around our own code; torch is left alone)."""

    def __init__(self, translator: Translator):
        self.decode = translator.model.decode
        self.gate, self.entered = threading.Event(), threading.Event()
        self.gate.set()
        self.fail = False
        translator.model.decode = self

    def __call__(self, *args, **kwargs):
        self.entered.set()
        assert self.gate.wait(60)
        if self.fail:
            fail, self.fail = self.fail, False
            raise fail if isinstance(fail, BaseException) else RuntimeError("injected failure")
        return self.decode(*args, **kwargs)
