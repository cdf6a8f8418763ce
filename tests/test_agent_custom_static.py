"""``static:KMIN,KMAX,PMAX``: a static setting of your own, scaled like the paper's."""

from __future__ import annotations

import pytest

from p4cc.controlplane.agents.static import StaticAgent, make_agent
from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.errors import ConfigError
from p4cc.scale import get_scale


def test_custom_static_scales_like_the_paper_settings() -> None:
    for scale in ("paper", "testbed", "testbed-5m"):
        sc = get_scale(scale)
        own = make_agent("static:5000,200000,0.01", sc)
        assert isinstance(own, StaticAgent)
        assert own.setting == static_setting("SECN1", sc)  # SECN1's own numbers
    a = make_agent("static:80000,160000,0.75", get_scale("paper"))
    assert isinstance(a, StaticAgent) and a.name == "static:80000,160000,0.75"
    assert a.setting == EcnConfig(80_000, 160_000, 0.75)
    assert a.act({1: None, 2: None}) == {1: a.setting, 2: a.setting}  # type: ignore[dict-item]
    assert a.act({1: None}) == {}  # type: ignore[dict-item]


@pytest.mark.parametrize("name, cause", [
    ("static", "needs static:KMIN,KMAX,PMAX"),
    ("static:1000,2000", "needs static:KMIN,KMAX,PMAX"),
    ("static:a,2000,0.5", "must be numbers"),
    ("static:0,2000,0.5", "must be > 0"),
    ("static:5000,2000,0.5", "must be <="),
    ("static:5000,2000000,0.5", "exceeds the port buffer"),
    ("static:5000,20000,1.5", r"pmax must be in \(0, 1\]"),
    ("static:5000,20000,0", r"pmax must be in \(0, 1\]"),
])
def test_custom_static_bad_input_names_the_cause(name: str, cause: str) -> None:
    with pytest.raises(ConfigError, match=cause):
        make_agent(name, get_scale("paper"))
