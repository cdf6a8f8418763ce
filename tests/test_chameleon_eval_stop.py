"""A CHAMELEON tuning run on the simulator ends once its tuner has stopped (the agent
option ``end=1``, which p4cc.experiment.chameleon_eval's tuning runs use), with the same
``chameleon`` table as a run that goes on to its duration (issue #12: a 20×20 run
stopped tuning at round 97 of 250 and then simulated 150 useless rounds)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from p4cc.errors import ConfigError
from p4cc.experiment import chameleon, chameleon_sim_eval

TOPO = "leafspine,spines=1,leaves=2,hosts=2"
#: two parameters, one round without a 50 % gain moves on: the tuner stops after a few
#: rounds, long before the 12 the run is long enough for
OPTIONS = "params=rai_bps+pmax,patience=1,beta=0.5"
LONG_S, ROUNDS, SIZE = 5e-4, 12, 20_000


def test_end_option_is_parsed_and_checked() -> None:
    assert not chameleon.parse_options("long=0.001").end_run  # default: the full duration
    assert chameleon.parse_options("end=1").end_run
    assert not chameleon.parse_options("end=1,end=0").end_run  # the last one counts
    with pytest.raises(ConfigError, match="expected 0 or 1"):
        chameleon.parse_options("end=yes")


def test_tuning_run_ends_when_the_tuner_stops(tmp_path: Path) -> None:
    short = chameleon_sim_eval.tune(TOPO, 3, SIZE, LONG_S, ROUNDS, tmp_path / "end", OPTIONS)
    full = chameleon_sim_eval.tune(TOPO, 3, SIZE, LONG_S, ROUNDS, tmp_path / "full",
                               OPTIONS + ",end=0")  # as before: the run's whole duration
    assert short["stop"] == full["stop"] == "every parameter traversed"
    assert short["rounds"] == full["rounds"] and 2 <= short["rounds"] < ROUNDS
    assert short["settings"] == full["settings"]
    assert short["stop_t_s"] == full["stop_t_s"] < ROUNDS * LONG_S
    run_s, run_f = Path(short["run"]), Path(full["run"])
    # the same rounds, decisions and settings: byte for byte, the stopping round's row
    # and the final row included
    assert (run_s / "chameleon.csv").read_bytes() == (run_f / "chameleon.csv").read_bytes()
    rows = pd.read_csv(run_s / "chameleon.csv")
    assert list(rows["param"].iloc[-1:]) == ["final"] and rows["done"].iloc[-2]
    assert not math.isnan(rows["metric"].iloc[-2])  # the stopping round, with its metric
    assert int(rows["round"].iloc[-1]) == short["rounds"]
    # ... but the short run ended there: no flow started after the stop, a complete run
    starts_s = pd.read_csv(run_s / "flows.csv")["start_s"]
    starts_f = pd.read_csv(run_f / "flows.csv")["start_s"]
    assert starts_s.max() <= short["stop_t_s"] < starts_f.max()
    status = json.loads((run_s / "status.json").read_text())
    assert status["complete"] is True
    log = (run_s / "log.txt").read_text()
    assert (f"the tuner stopped after {short['rounds']} rounds (every parameter traversed)"
            in log) and "the run ends here (end=1)" in log
    assert "its final setting stays in force" in (run_f / "log.txt").read_text()


def test_stop_info_for_traversal_target_and_no_stop() -> None:
    base = {"metric": 0.5, "hosts": 4, "switches": 3}
    traversed = pd.DataFrame([
        {**base, "t_s": 1.0, "round": 0, "param": "a", "done": False},
        {**base, "t_s": 2.0, "round": 1, "param": "a", "done": True},
        {**base, "t_s": 2.0, "round": 2, "param": "final", "done": True, "metric": math.nan}])
    assert chameleon_sim_eval.stop_info(traversed) == {
        "rounds": 2, "stop_t_s": 2.0, "stop": "every parameter traversed"}
    # the round that met the target ends the tuning without a final row: 2 rounds seen
    target = traversed.iloc[:2]
    assert chameleon_sim_eval.stop_info(target) == {
        "rounds": 2, "stop_t_s": 2.0, "stop": "target reached"}
    running = traversed.iloc[:1]
    info = chameleon_sim_eval.stop_info(running)
    assert info["rounds"] is None and math.isnan(info["stop_t_s"]) and info["stop"] == ""


def test_sim_tuning_runs_use_the_measured_beta_unless_told(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tuning run's controller gets β = SIM_NOISE_BETA (above the objective's
    round-to-round noise on the simulator), and a ``beta=`` in the options replaces it;
    the tuning workload is closed loop unless asked otherwise."""
    from p4cc.experiment.chameleon import own_controller, parse_options

    seen: list[tuple[str, bool]] = []

    class Stop(Exception):
        pass

    def play(spec: object, out: object, sched: pd.DataFrame, quiet: bool = False) -> Path:
        agent = spec.agents[0]  # type: ignore[attr-defined]
        seen.append((agent, bool((sched["after"] >= 0).any())))
        raise Stop

    monkeypatch.setattr(chameleon_sim_eval, "play", play)
    for options, closed in (("", True), ("beta=0.02,patience=2", False)):
        with pytest.raises(Stop):
            chameleon_sim_eval.tune(TOPO, 1, SIZE, LONG_S, 3, tmp_path, options, closed)
    (a1, closed1), (a2, closed2) = seen
    first, second = (parse_options(own_controller(a) or "") for a in (a1, a2))
    assert first.tuner.beta == chameleon_sim_eval.SIM_NOISE_BETA == 0.1
    assert second.tuner.beta == 0.02 and second.tuner.patience == 2
    assert closed1 and not closed2
