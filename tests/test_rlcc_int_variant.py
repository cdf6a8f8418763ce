"""RL-CC's INT variant (issue 11): a policy trained on the INT path-maximum queue depth
(``p4cc train rlcc --set signal=qdepth``) names that input in its file, and the RL-CC
rule -- on the hosts and in the simulator -- feeds it the queue depth, not the RTT."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from p4cc.hostcc import rlcc
from p4cc.hostcc.cc import make_controller, policy_by_name
from p4cc.hostcc.rlcc_policies import (
    MlpPolicy,
    PolicyLoadError,
    data_dir,
    load_policy,
    save_mlp,
)
from p4cc.scale import get_scale

INT_FILE = data_dir() / "rlcc-adpg-mlp-int.npz"
SC = get_scale("paper")


def test_int_checkpoint_names_its_signal_and_was_trained_on_it() -> None:
    pol = load_policy(INT_FILE)
    assert isinstance(pol, MlpPolicy) and pol.signal == "qdepth"
    side = json.loads(INT_FILE.with_suffix(".json").read_text())
    assert side["config"]["signal"] == "qdepth"
    assert "--set signal=qdepth" in side["command"]
    assert load_policy(data_dir() / "rlcc-adpg-mlp.npz").signal == "rtt"
    params = rlcc.RlccParams(SC.link_rate_bps, rlcc.norm_rtt_s(SC))
    for name in ("adpg-mlp-int", "adpg-mlp-int-int8"):
        assert getattr(policy_by_name(name, params), "signal", None) == "qdepth"


def test_signal_round_trips_through_the_policy_file(tmp_path: Path) -> None:
    pol = load_policy(data_dir() / "rlcc-adpg-mlp.npz")
    assert isinstance(pol, MlpPolicy)
    save_mlp(tmp_path / "rtt.npz", pol)
    with np.load(tmp_path / "rtt.npz") as z:
        assert "signal" not in z.files  # RTT files stay as they were
    pol.signal = "qdepth"
    save_mlp(tmp_path / "int.npz", pol)
    assert load_policy(tmp_path / "int.npz").signal == "qdepth"  # type: ignore[attr-defined]
    with np.load(tmp_path / "int.npz") as z:
        bad = {k: z[k] for k in z.files}
    bad["signal"] = np.array("ecn")
    np.savez(tmp_path / "bad.npz", **bad)  # type: ignore[arg-type]
    with pytest.raises(PolicyLoadError, match="signal"):
        load_policy(tmp_path / "bad.npz")


@pytest.mark.parametrize("name", ["adpg-mlp-int", "adpg-mlp"])
def test_host_controller_decides_on_what_the_policy_was_trained_on(name: str) -> None:
    # A sample with no RTT inflation but 60 packets at the path's fullest queue (INT):
    # the INT policy's δ comes from the queue (inflation 1 + 60 kB·8/(8 µs·25 Gb/s) =
    # 3.4, δ < 0), the RTT policy's from the RTT (inflation 1, δ = target).
    ctl = make_controller(f"rlcc:{name}", SC)
    ctl.on_rtt_sample(0.0, rlcc.norm_rtt_s(SC), max_qdepth_pkts=60)
    st = ctl.state  # type: ignore[attr-defined]
    if name == "adpg-mlp-int":
        assert ctl.rule.params.signal == "qdepth"  # type: ignore[attr-defined]
        assert float(st.inflation[0]) == pytest.approx(1 + 60 * SC.pkt_bytes * 8 / (
            rlcc.norm_rtt_s(SC) * SC.link_rate_bps))
        assert float(st.delta[0]) < 0
    else:
        assert float(st.inflation[0]) == pytest.approx(1.0)
        assert float(st.delta[0]) == pytest.approx(rlcc.DEFAULT_TARGET)


def test_int_policy_fixed_point_on_2_to_1() -> None:
    """Both flows of a 2→1 incast within 10 % of half the bottleneck (one starting 10 RTTs
    after the other), the simulator delivering the INT path maximum to the policy."""
    from rlcc_helpers import two_to_one_shares

    share, hook = two_to_one_shares(load_policy(INT_FILE))
    assert hook.uses_int and hook.params.signal == "qdepth"  # from the policy, not params
    np.testing.assert_allclose(share, [0.5, 0.5], rtol=0.1)
    assert np.isfinite(hook.int_last[:2]).all()  # it did get queue depths
