"""chameleon_eval's seeds as tasks of the sweep's executors (p4cc.experiment
.chameleon_tasks): seeds side by side in a process pool or on Ray give the results one
seed at a time gives; a seed already done is kept; other arguments are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from p4cc.errors import ConfigError
from p4cc.experiment import chameleon_eval

TOPO = "leafspine,spines=1,leaves=2,hosts=2"
ARGS = ["--topology", TOPO, "--size", "20000", "--long", "0.0005", "--rounds", "12",
        "--options", "params=rai_bps+pmax,patience=1,beta=0.5"]


def _results(out: Path, seed: int) -> dict[str, Any]:
    """A seed's results without the wall-clock times (the only figures that differ)."""
    doc = json.loads((out / f"results-seed{seed}.json").read_text())
    for part in doc["tune"] + doc["eval"]:
        part.pop("wall_s")
        part.pop("run", None)
    return doc


def test_seeds_in_a_pool_equal_seeds_one_at_a_time(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    two = tmp_path / "two"
    assert chameleon_eval.main([*ARGS, "--seeds", "1", "2", "--workers", "2",
                                "--out", str(two)]) == 0
    table = capsys.readouterr().out
    assert "| chameleon |" in table and "rounds to converge per seed" in table
    merged = json.loads((two / "results-seeds-1-2.json").read_text())
    assert sorted(e["seed"] for e in merged["eval"]) == [1, 1, 1, 2, 2, 2]
    one = tmp_path / "one"
    assert chameleon_eval.main([*ARGS, "--seeds", "2", "--workers", "1",
                                "--out", str(one)]) == 0
    assert _results(one, 2) == _results(two, 2)
    assert _results(two, 1) != _results(two, 2)  # (the seed matters)


def test_a_seed_done_is_kept_and_other_arguments_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert chameleon_eval.main([*ARGS, "--seeds", "3", "--out", str(out)]) == 0
    before = (out / "results-seed3.json").read_text()
    assert chameleon_eval.main([*ARGS, "--seeds", "3", "4", "--out", str(out)]) == 0
    assert "seeds [3]: results in" in capsys.readouterr().err
    assert (out / "results-seed3.json").read_text() == before  # not run again
    assert (out / "results-seed4.json").exists()
    with pytest.raises(ConfigError, match="size=20000"):
        chameleon_eval.main([*ARGS[:2], "--size", "30000", *ARGS[4:], "--seeds", "3",
                             "--out", str(out)])


def test_a_failing_seed_is_reported_and_exits_nonzero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = [*ARGS[:-1], "params=nope"]
    assert chameleon_eval.main([*bad, "--seeds", "1", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "seed 1 failed" in err and "unknown parameters ['nope']" in err
    assert not (tmp_path / "results-seed1.json").exists()


def test_address_needs_ray(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--address needs --executor ray"):
        chameleon_eval.main([*ARGS, "--address", "auto", "--out", str(tmp_path)])


def test_seeds_as_ray_tasks_equal_the_pool(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    pool, ray = tmp_path / "pool", tmp_path / "ray"
    assert chameleon_eval.main([*ARGS, "--seeds", "5", "--out", str(pool)]) == 0
    assert chameleon_eval.main([*ARGS, "--seeds", "5", "--executor", "ray", "--workers",
                                "2", "--out", str(ray)]) == 0
    assert _results(ray, 5) == _results(pool, 5)



def test_the_command_names_a_bad_argument_without_a_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "p4cc.experiment.chameleon_eval", "--address",
                        "auto", "--out", str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2
    assert "chameleon_eval: --address needs --executor ray" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "out").exists()
