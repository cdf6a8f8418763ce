"""A named DCQCN parameter set with some of its values changed: ``dcqcn:hpcc-ns3,min_rate_bps=1e8``
(p4cc.hostcc.dcqcn_params.split_set_name), in the controller, the simulator and a spec."""

from __future__ import annotations

import pytest

from p4cc.errors import ConfigError
from p4cc.experiment.spec import parse_spec
from p4cc.hostcc.cc import make_controller
from p4cc.hostcc.dcqcn_params import dcqcn_params, split_set_name
from p4cc.scale import get_scale
from p4cc.sim.cc import make_hook


def test_changes_are_parsed_by_field_type() -> None:
    base, changed = split_set_name("hpcc-ns3, min_rate_bps=1e8,byte_counter_bytes=none,"
                                   "hai_grows=true,fast_recovery_stages=5,g=0.01")
    assert base == "hpcc-ns3"
    assert changed == {"min_rate_bps": 1e8, "byte_counter_bytes": None, "hai_grows": True,
                       "fast_recovery_stages": 5, "g": 0.01}
    assert split_set_name("nvidia") == ("nvidia", {})


@pytest.mark.parametrize("name, words", [
    ("hpcc-ns4,g=0.1", "unknown DCQCN parameter set 'hpcc-ns4'"),
    ("hpcc-ns3,line_rate_bps=1e9", "key one of"),
    ("hpcc-ns3,min_rate", "write key=value"),
    ("hpcc-ns3,g=fast", "'g=fast'"),
    ("hpcc-ns3,fast_recovery_stages=1.5", "not a whole number"),
    ("hpcc-ns3,hai_grows=maybe", "not a boolean"),
    ("hpcc-ns3,min_rate_bps=-5", "min_rate_bps"),  # the set's own validation
])
def test_bad_changes_name_the_cause(name: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        dcqcn_params(name, 25e9)


def test_changes_are_paper_values_scaled_like_the_set() -> None:
    """At testbed scale a changed floor is scaled by the rate factor, exactly as the
    set's own floor is."""
    sc = get_scale("testbed")
    plain = dcqcn_params("hpcc-ns3", sc.link_rate_bps, sc)
    low = dcqcn_params("hpcc-ns3,min_rate_bps=1e8", sc.link_rate_bps, sc)
    assert low.min_rate_bps == pytest.approx(plain.min_rate_bps / 10)
    assert low.rai_bps == plain.rai_bps and low.name == "hpcc-ns3,min_rate_bps=1e8"


def test_the_host_controller_and_the_simulator_take_the_changed_set() -> None:
    sc = get_scale("paper")  # (25 Gb/s: paper values as they are)
    ctl = make_controller("dcqcn:hpcc-ns3,min_rate_bps=1e8", sc)
    assert ctl.params.min_rate_bps == 1e8  # type: ignore[attr-defined]
    hook = make_hook("dcqcn", sc, "hpcc-ns3,min_rate_bps=1e8")
    assert hook.params.min_rate_bps == 1e8  # type: ignore[attr-defined]


def test_a_spec_takes_the_changed_set_and_refuses_a_bad_one() -> None:
    doc = {"name": "floor", "topology": "star,hosts=3", "duration_s": 2.0,
           "workloads": [{"type": "websearch", "load": 0.3}]}
    spec = parse_spec({**doc, "host_cc": "dcqcn:hpcc-ns3,min_rate_bps=1e8"})
    assert spec.host_cc == "dcqcn:hpcc-ns3,min_rate_bps=1e8"
    with pytest.raises(ConfigError, match=r"host_cc.*min_rate"):
        parse_spec({**doc, "host_cc": "dcqcn:hpcc-ns3,min_rate=1e8"})
