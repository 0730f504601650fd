"""mt.training.token_budget's arithmetic: the budget that fits a GPU's memory, and the lr and warmup
for a batch other than the reference one (train.lr_scaling)."""

from __future__ import annotations

import math

import pytest

from mt.config.schema import TrainConfig, from_dict
from mt.errors import ConfigError
from mt.training.token_budget import HEADROOM, MAX_AUTO_TOKENS, ROUND, lr_scaling, tokens_that_fit

GIB = 2**30


def test_the_budget_is_the_line_through_two_probes_within_the_headroom():
    # 2 GiB fixed (weights, gradients, workspaces) and 100 KiB a token, measured at 4k and 8k tokens.
    probes = [(4096, 2 * GIB + 4096 * 100 * 1024), (8192, 2 * GIB + 8192 * 100 * 1024)]
    usable, extra = 10 * GIB, 1 * GIB  # extra: Adam's moments, made at the first update
    tokens = tokens_that_fit(usable, extra, probes)
    assert tokens % ROUND == 0
    exact = (usable * HEADROOM - extra - 2 * GIB) / (100 * 1024)
    assert exact - ROUND < tokens <= exact


def test_the_budget_is_capped_and_can_be_too_small():
    probes = [(4096, GIB), (8192, GIB + 4096 * 1024)]  # 1 KiB a token: millions of tokens would fit
    assert tokens_that_fit(140 * GIB, 0, probes) == MAX_AUTO_TOKENS
    assert tokens_that_fit(1.2 * GIB, 0, probes) < ROUND  # 0.8 of it is under the fixed part: refused by the caller
    # Two probes of the same peak (all of it fixed): one byte a token, never a division by zero.
    assert tokens_that_fit(2 * GIB, 0, [(4096, GIB), (8192, GIB)]) == MAX_AUTO_TOKENS


def test_lr_scaling_is_off_unless_asked_and_follows_its_rule():
    tcfg = TrainConfig(warmup_steps=4000, lr_reference_tokens=25000)
    assert lr_scaling(tcfg, 25000 * 4, world_size=1) == (1.0, 4000)  # lr_scaling: none
    tcfg.lr_scaling = "sqrt"
    assert lr_scaling(tcfg, 25000, world_size=4) == (2.0, 1000)  # 4x the batch: 2x the lr, a quarter the warmup
    tcfg.lr_scaling = "linear"
    assert lr_scaling(tcfg, 25000, world_size=4) == (4.0, 1000)
    tcfg.update_freq = 2
    factor, warmup = lr_scaling(tcfg, 3125, world_size=1)  # 6,250 tokens: a quarter of the reference
    assert math.isclose(factor, 0.25) and warmup == 16000
    tcfg.lr_scaling, tcfg.warmup_steps = "sqrt", 1
    assert lr_scaling(tcfg, 25000, world_size=8)[1] == 1  # at least one warmup update


def test_lr_scaling_needs_its_reference_and_max_tokens_takes_a_number_or_auto():
    with pytest.raises(ConfigError, match="train.lr_scaling sqrt needs train.lr_reference_tokens"):
        from_dict({"train": {"lr_scaling": "sqrt"}}, "recipe.yaml")
    with pytest.raises(ConfigError, match="train.lr_reference_tokens must be at least 1"):
        from_dict({"train": {"lr_reference_tokens": 0}}, "recipe.yaml")
    assert from_dict({"train": {"lr_reference_tokens": "25000"}}, "recipe.yaml").train.lr_reference_tokens == 25000
    assert from_dict({"train": {"max_tokens": "auto"}}, "recipe.yaml").train.max_tokens == "auto"
    assert from_dict({"train": {"max_tokens": "8192"}}, "recipe.yaml").train.max_tokens == 8192
    with pytest.raises(ConfigError, match=r"^recipe.yaml: train.max_tokens must be an integer or auto, not 'lots'$"):
        from_dict({"train": {"max_tokens": "lots"}}, "recipe.yaml")
