"""Safety nets that can fire on every profile: null windows and monitor.every are sized from grpo.max_steps, an
explicit value under which a net never judges a step is refused naming its keys, and the report says which nets
were armed (rubricrl/train/nets.py)."""

from __future__ import annotations

import itertools

import pytest
from pydantic import ValidationError

from rubricrl.config import (
    GRPOSettings, HackMonitorSettings, Params, RollbackSettings, sized_every, sized_window,
)
from rubricrl.train.nets import NAMES, armed_nets
from rubricrl.train.rollback import SpikeDetector
from rubricrl.train.section import nets_table


@pytest.mark.parametrize("overrides, named", [
    ({"rollback": {"kl_window": 10}}, ["grpo.rollback.kl_window=10", "grpo.max_steps=6", "set it <= 5", "null"]),
    ({"rollback": {"reward_window": 6}}, ["grpo.rollback.reward_window=6", "first: step 7", "grpo.max_steps=6"]),
    ({"monitor": {"every": 7}}, ["grpo.monitor.every=7", "grpo.monitor.window=1", "grpo.max_steps=6",
                                 "set every <= 6"]),
    ({"monitor": {"every": 4, "window": 2, "against_first": False}},
     ["grpo.monitor.every=4", "(against_first: false)", "first compares at step 8", "set every <= 3"]),
    ({"monitor": {"window": 7, "against_first": False}},
     ["grpo.monitor.every=null (sized: 1)", "grpo.monitor.window=7", "set window <= 6"]),
])
def test_a_net_that_cannot_fire_is_refused_with_its_keys_named(overrides, named):
    with pytest.raises(ValidationError) as err:
        GRPOSettings(max_steps=6, **overrides)
    for text in named:
        assert text in str(err.value)


def test_against_the_first_evaluation_the_monitor_fires_from_its_second():
    """Compared with the first evaluation as well, a window longer than the run still leaves the net armed."""
    GRPOSettings(max_steps=6, monitor={"every": 4, "window": 2})
    by = {n.name: n for n in armed_nets(GRPOSettings(max_steps=6, monitor={"every": 4, "window": 2}))}
    net = by["hack_monitor"]
    assert (net.armed, net.first_step, net.checks) == (True, 4, 1)
    assert "judged against the evaluation 2 back and the first" in net.rule
    off = {n.name: n for n in armed_nets(GRPOSettings(max_steps=8, monitor={"every": 4, "window": 2,
                                                                          "against_first": False}))}
    assert (off["hack_monitor"].first_step, off["hack_monitor"].checks) == (8, 1)
    assert "the evaluation 2 back on 16 tasks;" in off["hack_monitor"].rule


def test_switched_off_nets_are_not_checked():
    GRPOSettings(max_steps=6, rollback={"enabled": False, "kl_window": 10}, monitor={"enabled": False, "every": 9})
    GRPOSettings(max_steps=6, rollback={"reward_drop": None, "reward_window": 10})


def test_the_validator_refuses_exactly_the_explicit_values_the_report_calls_unarmed():
    """One arithmetic: settings validate iff no explicit window or monitor.every leaves its net unarmed."""
    for n, window, every, mwin, first in itertools.product((1, 2, 3, 6, 20), (None, 2, 3, 5, 10), (None, 1, 3, 7),
                                                           (1, 2, 3), (True, False)):
        rollback = RollbackSettings(kl_window=window)
        monitor = HackMonitorSettings(every=every, window=mwin, against_first=first)
        nets = {net.name: net for net in armed_nets(  # unvalidated: what the report would say
            GRPOSettings.model_construct(max_steps=n, rollback=rollback, monitor=monitor))}
        explicit_unarmed = ((window is not None and not nets["kl_ratio"].armed)
                            or ((every is not None or mwin > 1) and not nets["hack_monitor"].armed))
        try:
            GRPOSettings(max_steps=n, rollback=rollback, monitor=monitor)
            refused = False
        except ValidationError:
            refused = True
        assert refused == explicit_unarmed, (n, window, every, mwin, first)


@pytest.mark.parametrize("max_steps", [3, 4, 6, 10, 20, 500])
def test_sized_windows_fire_within_max_steps(max_steps):
    """Fed max_steps synthetic values, the detector with the sized windows trips the ratio and the collapse rule."""
    s = GRPOSettings(max_steps=max_steps).sized().rollback
    assert s.kl_window == s.reward_window == sized_window(max_steps) < max_steps
    kl = SpikeDetector(s)
    for step in range(1, max_steps):  # a flat KL of 0.01, then a spike of 10x at the last step
        assert kl.judge(0.01, 1.0) is None
        kl.record(step, 0.01, 1.0)
    assert "recent median" in kl.judge(0.1, 1.0)  # below kl_max 1.0: only the ratio rule can catch it
    reward = SpikeDetector(s)
    for step in range(1, max_steps):
        reward.record(step, None, 4.0)
    assert "collapsed" in reward.judge(None, 1.0)


def test_sized_monitor_compares_at_least_twice():
    for n, window in itertools.product(range(2, 60), (1, 2, 3)):
        if n < 2 * window:
            continue
        every = sized_every(n, window)
        assert len(range(0, n + 1, every)) - window >= 2, (n, window, every)


def test_the_cpu_default_arms_every_net():
    nets = armed_nets(Params().grpo)
    assert [n.name for n in nets] == list(NAMES) and all(n.armed for n in nets)
    by = {n.name: n for n in nets}
    assert (by["kl_ratio"].first_step, by["kl_ratio"].checks) == (3, 2)
    assert (by["reward_collapse"].first_step, by["reward_collapse"].checks) == (3, 2)
    assert (by["hack_monitor"].first_step, by["hack_monitor"].checks) == (2, 2)
    assert "evaluations at steps 0, 2, 4" in by["hack_monitor"].rule and "sized from max_steps" in by["kl_ratio"].rule
    table = nets_table([n.model_dump() for n in nets])
    assert table.splitlines()[0] == "| net | armed | from step | checks | rule |"
    assert "| kl_ratio | yes | 3 | 2 |" in table and "| hack_monitor | yes | 2 | 2 |" in table
    assert "| non_finite | yes | 1 | 4 | skips every non-finite update; 3 in a row roll back (from step 3) |" in table


def test_two_steps_leave_the_windows_unarmed_and_say_why():
    by = {n.name: n for n in armed_nets(GRPOSettings(max_steps=2))}
    assert not by["kl_ratio"].armed and "needs max_steps >= 3" in by["kl_ratio"].rule
    assert by["kl_max"].armed and by["hack_monitor"].checks == 2
    off = {n.name: n for n in armed_nets(GRPOSettings(max_steps=6), monitor_tasks=False)}
    assert not off["hack_monitor"].armed and "no validation tasks" in off["hack_monitor"].rule
