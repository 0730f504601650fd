"""The model(s) a Translator runs: each checkpoint found in the experiment, checked against its
tokenizers and config, built, moved to the device and put in the precision it decodes in.

Precision is settled here, once, for every command that decodes (translate, evaluate, serve,
distill, back-translation, attention): bf16/fp16 casts, int8 dynamic quantization on the CPU, and
one warning where the CPU runs the half precision asked for much slower than fp32.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from mt.config.schema import ExperimentConfig, InferencePrecision, Quantize
from mt.config.values import coerce
from mt.errors import ConfigError
from mt.experiment.checkpoint_file import check_model_config, check_tokenizer, load_checkpoint, model_from_checkpoint
from mt.experiment.paths import Experiment
from mt.hardware import warn_if_slow
from mt.search.ensemble import Ensemble
from mt.tokenizer import Tokenizer

with warnings.catch_warnings():  # torch.ao marks itself deprecated; its dynamic int8 linears still work
    warnings.simplefilter("ignore")
    from torch.ao.nn.quantized.dynamic import Linear as QuantizedLinear

LINEAR_DYNAMIC = torch.ops.quantized.linear_dynamic.default  # the overload itself: no dispatch by arguments

# oneDNN, which runs bf16 matmuls on the CPU, caches a primitive (with the weights packed for it) per
# shape, up to 1,024: decoding's shapes change every step, so the cache kept 100-150 MB of copies of
# a 7.6M-parameter model's weights (peak RSS 685 MB against 533 with 16 kept, same speed: EPYC (Zen 4),
# 2026-12-04). Read when oneDNN first makes one; a value the user set is kept.
ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


class Int8Linear(QuantizedLinear):
    """torch's dynamically quantized linear layer (its int8 weights, its kernel, the same numbers: the
    kernel takes and gives fp32, so torch's cast back to the input's dtype is left out), its kernel
    called without the checks around it, which were a noticeable share of a call at a search's and an
    alignment pass's small sizes (docs/benchmarks.md, "The int8 linears' kernel called directly")."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LINEAR_DYNAMIC(x, self._packed_params._packed_params, True)  # reduce_range, as version 4


def load_models(
    exp: Experiment,
    cfg: ExperimentConfig,
    names: list[str],
    tokenizers: tuple[Tokenizer, Tokenizer],
    device: torch.device,
    precision: str = "fp32",
    quantize: str | None = None,
) -> tuple[torch.nn.Module, list[Path], dict[Path, list[str]], list[tuple[int, int]]]:
    """The checkpoints `names` (best, last, average, step_N or a .pt file; several make an ensemble),
    each checked against the tokenizers and, when it is this experiment's own, its model config; in
    eval mode on `device`, in `precision` or with `quantize`. Returns the model, the files, for
    each file that is an average the checkpoints it averages, and each file's (size, mtime_ns) as
    it was before it was read (one saved again while it loaded is then told from the one loaded)."""
    src_tok, tgt_tok = tokenizers
    expected = {"src": src_tok.sha256, "tgt": tgt_tok.sha256}
    models, paths, averaged, stats = [], [], {}, []
    found = {name: exp.find_checkpoint(name) for name in names}  # best falls back to last without best.pt
    for name, path in found.items():
        same = [other for other, there in found.items() if other != name and there.resolve() == path.resolve()]
        if same:  # an ensemble of a model with itself: twice the search for the same translation
            raise ConfigError(
                f"--checkpoint {name} and {same[0]} are the same file ({path}): an ensemble needs other models"
            )
    if len(set(names)) < len(names):
        raise ConfigError(f"--checkpoint {next(n for n in names if names.count(n) > 1)} given twice")
    for name in names:
        path = found[name]
        stat = path.stat()
        stats.append((stat.st_size, stat.st_mtime_ns))
        state = load_checkpoint(path)
        check_tokenizer(path, state, expected, exp.tokenizer_dir)
        if path.resolve().parent == exp.checkpoints_dir.resolve():  # another experiment's has its own model
            check_model_config(path, state, cfg.model, exp.config_path)
        models.append(model_from_checkpoint(state).to(device).eval())
        paths.append(path)
        if "averaged_from" in state:
            averaged[path] = list(state["averaged_from"])
    model = models[0] if len(models) == 1 else Ensemble(models).eval()
    return set_precision(model, precision, quantize, device), paths, averaged, stats


def set_precision(model: torch.nn.Module, precision: str, quantize: str | None, device: torch.device):
    """The model in bf16/fp16, or with int8 dynamic quantization of its linear layers (CPU); a warning
    where this CPU runs the half precision asked for ~10x or more slower than fp32."""
    coerce(quantize, Quantize, "--quantize")  # one-line errors naming the flag and its choices
    coerce(precision, InferencePrecision, "--precision")
    if quantize == "int8":  # it takes the place of --precision
        if precision != "fp32":  # the layers it does not quantize run in fp32: the precision asked would not be used
            raise ConfigError(f"--quantize int8 goes without --precision {precision}: it runs int8 and fp32")
        if device.type != "cpu":
            raise ConfigError("--quantize int8 runs on the CPU; use --precision bf16 or fp16 on a GPU")
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():  # torch marks its quantized tensors as deprecated; they still work
            warnings.simplefilter("ignore")
            return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, mapping={torch.nn.Linear: Int8Linear})
    if precision == "bf16":
        if device.type == "cpu":
            os.environ.setdefault(ONEDNN_CACHE, "16")  # before the timing's matmul would fix it
        warn_if_slow(precision, device.type)
        return model.to(torch.bfloat16)
    if precision == "fp16":
        if device.type != "cuda":
            raise ConfigError("--precision fp16 needs a GPU; use bf16 on the CPU")
        return model.to(torch.float16)
    return model
