"""mt.training.schedule: the learning rate by hand (Sec. 5.3), the cooldown, and late dropout."""

from __future__ import annotations

import dataclasses

import pytest

from mt.training.schedule import Schedule, cooldown_factor, inverse_sqrt_lr, peak_lr

# -- Sec. 5.3: the learning-rate schedule ------------------------------------------------------------


@pytest.mark.parametrize("d_model, warmup", [(512, 4000), (256, 1000)])
def test_schedule_is_the_papers_formula(d_model, warmup):
    peak = peak_lr(None, 1.0, warmup, d_model)
    for step in (1, warmup // 2, warmup, 4 * warmup, 10 * warmup):
        paper = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert inverse_sqrt_lr(step, warmup, peak) == pytest.approx(paper, rel=1e-9)
    assert peak == pytest.approx(d_model**-0.5 * warmup**-0.5, rel=1e-9)
    scaled = peak_lr(None, 2.0, warmup, d_model)
    assert scaled == pytest.approx(2 * peak)


def test_schedule_with_a_peak_lr():
    peak = peak_lr(7e-4, 1.0, 4000, 512)
    assert peak == 7e-4
    assert inverse_sqrt_lr(4000, 4000, peak) == pytest.approx(7e-4)
    assert inverse_sqrt_lr(16000, 4000, peak) == pytest.approx(3.5e-4)
    assert inverse_sqrt_lr(2000, 4000, peak) == pytest.approx(3.5e-4)  # linear warmup
    assert inverse_sqrt_lr(1, 4000, peak) == pytest.approx(7e-4 / 4000)


# -- the cooldown --------------------------------------------------------------------------------------


def test_cooldown_factor():
    assert cooldown_factor(0.5, 0.0) is None
    assert cooldown_factor(0.7, 0.25) is None
    assert cooldown_factor(0.75, 0.25) == 1.0
    assert cooldown_factor(0.875, 0.25) == 0.5
    assert cooldown_factor(1.0, 0.25) == 0.0
    assert cooldown_factor(1.5, 0.25) == 0.0
    # 1 - sqrt of the cooldown's elapsed share: half the lr a quarter of the way in, 0 at the end.
    assert cooldown_factor(0.7, 0.25, "1-sqrt") is None
    assert cooldown_factor(0.75, 0.25, "1-sqrt") == 1.0
    assert cooldown_factor(0.8125, 0.25, "1-sqrt") == pytest.approx(0.5)
    assert cooldown_factor(0.875, 0.25, "1-sqrt") == pytest.approx(1 - 0.5**0.5)
    assert cooldown_factor(1.0, 0.25, "1-sqrt") == 0.0


def lrs_over(schedule: Schedule, steps_and_elapsed) -> tuple[list[float], float | None]:
    """The lr of each (update, elapsed seconds), the cooldown's start carried from one to the next."""
    lrs, cooldown_from = [], None
    for step, elapsed in steps_and_elapsed:
        lr, cooldown_from = schedule.lr(step, schedule.progress(step, elapsed), cooldown_from)
        lrs.append(lr)
    return lrs, cooldown_from


def test_updates_tried_again_after_skipped_ones_take_the_budgets_last_rate():
    """The schedules count tried updates, the budget made ones: after k skipped (fp16's overflows, a
    non-finite loss) the last k updates of a run with a cooldown had an lr of 0 and changed nothing."""
    schedule = Schedule(peak_lr=1e-3, warmup_steps=4, max_steps=100, cooldown=0.2)
    last, _ = schedule.lr(100, schedule.progress(100, 0.0), 5e-4)
    assert last > 0
    for tried in (101, 103):
        assert schedule.lr(tried, schedule.progress(tried, 0.0), 5e-4) == (last, 5e-4)


def test_cooldown_by_time():
    schedule = Schedule(peak_lr=1e-3, warmup_steps=4, max_steps=100_000, max_time=100.0, cooldown=0.2)
    expected, cooldown_from = lrs_over(schedule, ((1, 0.0), (2, 50.0), (10, 79.0), (11, 80.0), (12, 90.0),
                                                  (13, 95.0), (14, 100.0)))
    start = inverse_sqrt_lr(11, 4, 1e-3)
    assert expected[:3] == [inverse_sqrt_lr(s, 4, 1e-3) for s in (1, 2, 10)]
    assert expected[3:] == pytest.approx([start, start * 0.5, start * 0.25, 0.0], rel=1e-12)
    assert cooldown_from == start  # saved: a resumed run decays from the same value

    schedule = dataclasses.replace(schedule, cooldown_shape="1-sqrt")
    lrs, _ = lrs_over(schedule, ((10, 79.0), (11, 80.0), (12, 85.0), (13, 95.0)))
    assert lrs == pytest.approx([inverse_sqrt_lr(10, 4, 1e-3), start, start * 0.5, start * (1 - 0.75**0.5)], rel=1e-12)


def test_with_a_time_budget_max_steps_cools_down_too_when_it_comes_first():
    """Was: with max_time set the progress counted time only, while max_steps still stops the run: a
    machine fast enough to reach max_steps first stopped before the cooldown, its last.pt at a high lr."""
    schedule = Schedule(peak_lr=1e-3, warmup_steps=4, max_steps=100, max_time=3600.0, cooldown=0.2)
    assert schedule.progress(81, 10.0) == pytest.approx(0.8)  # steps first: 80 of 100 done, 10 s of 3600
    assert schedule.progress(2, 3240.0) == pytest.approx(0.9)  # time first
    lrs, _ = lrs_over(schedule, ((81, 10.0), (91, 11.0), (100, 12.0)))
    assert lrs[1] == pytest.approx(lrs[0] * 0.5) and lrs[2] == pytest.approx(lrs[0] * 0.05)  # its last update


def test_the_schedule_is_pure():
    """The same arguments give the same lr: what the cooldown carries is an argument, not a side effect."""
    schedule = Schedule(peak_lr=1e-3, warmup_steps=2, max_steps=8, cooldown=0.25)
    progress = schedule.progress(8, 0.0)
    assert progress == 7 / 8
    assert schedule.lr(8, progress, None) == schedule.lr(8, progress, None) == (inverse_sqrt_lr(8, 2, 1e-3) * 0.5,
                                                                                inverse_sqrt_lr(8, 2, 1e-3))
    assert schedule.lr(8, progress, 1e-4) == (0.5e-4, 1e-4)
    assert schedule.lr(3, schedule.progress(3, 0.0), 1e-4) == (inverse_sqrt_lr(3, 2, 1e-3), None)  # before it


# -- late dropout (train.early_dropout) ---------------------------------------------------------------


def test_early_dropout_by_time_and_off_by_default():
    schedule = Schedule(peak_lr=1e-3, warmup_steps=4, max_steps=10, max_time=100.0, model_dropout=0.3,
                        early_dropout=0.1, early_dropout_until=0.4)
    assert [schedule.dropout(schedule.progress(1, elapsed)) for elapsed in (0.0, 39.9, 40.0, 99.0)] == [0.1, 0.1, 0.3, 0.3]
    off = dataclasses.replace(schedule, early_dropout=None)
    assert off.dropout(0.0) == 0.3


def test_max_time_0_leaves_the_budget_to_max_steps():
    off = Schedule(peak_lr=1e-3, warmup_steps=4, max_steps=10, max_time=0.0, cooldown=0.2)
    assert off.progress(6, 1e6) == dataclasses.replace(off, max_time=None).progress(6, 1e6) == 0.5


def test_constant_schedule_warms_up_then_holds_the_peak_until_the_cooldown():
    schedule = Schedule(peak_lr=1e-4, warmup_steps=4, max_steps=10, cooldown=0.2, shape="constant")
    lrs, _ = lrs_over(schedule, ((step, 0.0) for step in range(1, 11)))
    assert lrs == pytest.approx([2.5e-5, 5e-5, 7.5e-5, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 5e-5], rel=1e-12)
