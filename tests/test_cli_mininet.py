"""``p4cc cli`` on a running small fabric (root, Mininet, BMv2): its commands, ``p4cc top
--once`` and ``p4cc shell`` from a second process, and leaving it stops a daemonised
process started inside a host."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from p4cc.experiment import p4shell

pytestmark = [pytest.mark.mininet, pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

START_TIMEOUT_S = 120.0


def _skip_unless_ready() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    for tool in ("simple_switch_grpc", "mnexec", "iperf3"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")


@contextmanager
def running_cli(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    _skip_unless_ready()
    state = tmp_path / "cli"
    proc = subprocess.Popen([sys.executable, "-m", "p4cc", "cli", "--topo", "star,hosts=3",
                             "--out", str(state), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (state / "session.json").is_file():  # the CLI is up once it is written
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "p4cc cli did not start"
            time.sleep(0.2)
        yield proc, state
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_commands_and_exit_stops_host_daemons(tmp_path: Path) -> None:
    pidfile = tmp_path / "iperf3.pid"
    with running_cli(tmp_path, "--agent", "secn1") as (proc, state):
        top = subprocess.run([sys.executable, "-m", "p4cc", "top", "--once", "--dir",
                              str(state)], capture_output=True, text=True, timeout=60)
        assert top.returncode == 0 and "star" in top.stdout, top.stderr
        # iperf3 deletes its pid file when it exits: keep a copy
        script = (f"h3 iperf3 -s -D -I {pidfile}\n"
                  f"h3 sh -c 'while [ ! -s {pidfile} ]; do sleep 0.1; done; "
                  f"cp {pidfile} {pidfile}.copy'\n"
                  "thresholds s1\nagents\nagent s1 secn2\nagents\nagent s1 nosuch\n"
                  "top\nexit\n")
        out, _ = proc.communicate(script, timeout=180)
    assert proc.returncode == 0, out[-3000:]
    assert "s1: secn1" in out and "s1: now secn2" in out
    assert "unknown agent 'nosuch'" in out and "s1:1" in out
    pid = int(Path(f"{pidfile}.copy").read_text().strip())
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    assert "process(es) left in the hosts" in out, out[-2000:]


def test_p4cc_shell_reads_a_table_of_a_live_switch(tmp_path: Path) -> None:
    try:
        p4shell.shell_python()
    except Exception as exc:
        pytest.skip(str(exc))
    with running_cli(tmp_path) as (proc, state):
        code = ("rows = list(table_entry['P4ccIngress.fwd.ipv4_lpm'].read())\n"
                "print('ROUTES', len(rows))")
        res = subprocess.run([sys.executable, "-m", "p4cc", "shell", "s1", "--dir", str(state),
                              "-c", code], capture_output=True, text=True, timeout=120)
        # p4cc's controller is still primary: a threshold write through the CLI works
        out, _ = proc.communicate(
            "ecn s1 1 5000 20000 0.1\nthresholds s1\nint h1 h3\nincast h1,h2 h3 400k\n"
            "h1 sleep 3\nint h1 h3\njobs\nstop all\nexit\n", timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "not the primary client" in res.stdout
    routes = [ln for ln in res.stdout.splitlines() if ln.startswith("ROUTES")]
    assert routes and int(routes[0].split()[1]) >= 3, res.stdout
    assert "s1:1: " in out and "error" not in out.lower(), out[-3000:]
    assert "started [1]" in out and "[1] stopped" in out
    assert "hop 0: switch 1 port 1->3" in out, out[-3000:]  # INT of h1 -> h3 through s1


def test_cli_swaps_learned_agents_live(tmp_path: Path) -> None:
    from p4cc.controlplane.agents.learned import DEFAULT_CHECKPOINTS

    missing = [a for a, p in DEFAULT_CHECKPOINTS.items() if not p.is_file()]
    if missing:
        pytest.skip(f"no shipped checkpoint for {missing} (p4cc/data/agents)")
    with running_cli(tmp_path, "--agent", "hold", "--interval", "0.1") as (proc, _state):
        # marking off at first, so ACC's idle-queue rule (queue below Kmin) cannot keep
        # it quiet: its first interval writes every port; then PET takes over
        script = ("thresholds s1\nagent s1 acc\nagents\nsh sleep 2\nthresholds s1\n"
                  "agent s1 pet\nagents\nsh sleep 2\nthresholds s1\nexit\n")
        out, _ = proc.communicate(script, timeout=180)
    assert proc.returncode == 0, out[-3000:]
    assert "s1: now acc" in out and f"s1: acc ({DEFAULT_CHECKPOINTS['acc']})" in out
    assert "s1: now pet" in out and f"s1: pet ({DEFAULT_CHECKPOINTS['pet']})" in out
    first, after_acc, after_pet = (out.split("agent s1 acc")[0], out.split("s1: now acc")[1],
                                   out.split("s1: now pet")[1])
    assert "marking off" in first
    for text in (after_acc, after_pet):  # every port of s1 has thresholds now
        lines = [ln for ln in (re.sub(r"^((p4cc|mininet)> )+", "", x)
                               for x in text.splitlines())
                 if ln.startswith("s1:") and "(to h" in ln]
        assert len(lines) >= 3 and all("Kmin=" in ln for ln in lines[:3]), text[-2000:]
