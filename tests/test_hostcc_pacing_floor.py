"""The HTB ceiling floor of p4cc.hostcc.pacing (no root: the netlink thread is not
started; ``set_rate`` only records what the thread would apply)."""

from __future__ import annotations

import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc.pacing import HtbPacer, PacerConfig
from p4cc.hostcc.sender_config import SenderConfig


def pacer(**kw: float) -> HtbPacer:
    p = HtbPacer(PacerConfig(dev="veth0", **kw))
    p._classes[30000] = 0xCC0100  # what add_flow records for the flow's UDP port
    return p


def test_floor_is_the_larger_of_the_two_minimums() -> None:
    assert pacer().floor_bps == 8e3
    assert pacer(ceil_floor_bps=8e5).floor_bps == 8e5
    assert pacer(min_rate_bps=1e6, ceil_floor_bps=8e5).floor_bps == 1e6


def test_rates_below_the_floor_are_clamped_and_repeats_cost_nothing() -> None:
    p = pacer(ceil_floor_bps=8e5)
    p.set_rate(30000, 2.6e3)
    assert p._pending == {0xCC0100: 8e5}
    p._pending.clear()  # as if the thread had applied it
    for bps in (1e3, 5e5, 7.9e5):  # all below the floor: the class stays at 800 kb/s
        p.set_rate(30000, bps)
    assert p._pending == {} and p.stats.unchanged == 3 and p.stats.requested == 4
    p.set_rate(30000, 4e6)
    assert p._pending == {0xCC0100: 4e6}


def test_bad_floors_are_refused() -> None:
    with pytest.raises(ConfigError, match="ceil_floor_bps"):
        PacerConfig(dev="veth0", ceil_floor_bps=-1.0)
    with pytest.raises(ConfigError, match="max_token_debt_s"):
        SenderConfig(max_token_debt_s=float("inf"))
    with pytest.raises(ConfigError, match="max_token_debt_s"):
        SenderConfig(max_token_debt_s=-0.01)


def test_a_failed_rate_change_is_retried_when_asked_again() -> None:
    """A rate the kernel refused is not in force: asking for it again is not skipped as
    'unchanged'."""
    p = pacer(ceil_floor_bps=8e5)

    def refuse(cmd: str, classid: int, bps: float) -> None:
        raise OSError("netlink: busy")

    p._class = refuse  # type: ignore[method-assign]
    p.set_rate(30000, 4e6)
    p._apply_pending()
    assert p.stats.errors == 1
    p.set_rate(30000, 4e6)
    assert p._pending == {0xCC0100: 4e6} and p.stats.unchanged == 0
