"""Subcommands of the fabric area: ``p4cc doctor``, ``p4cc testbed``, ``p4cc incast``,
``p4cc cli``, ``p4cc top``, ``p4cc shell``."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def _reexec_as_root(command: str) -> None:
    """Not root but passwordless sudo (e.g. the Vagrant box): run the same command as root.

    Mininet needs root; a fabric cannot be built otherwise.  Only when invoked as the
    ``p4cc`` program with ``command`` on its command line, so library callers and tests
    are never re-executed.
    """
    if os.geteuid() == 0 or command not in sys.argv[1:] or shutil.which("sudo") is None:
        return
    if subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0:
        return  # no passwordless sudo: preflight will say that root is needed
    print(f"p4cc: {command} needs root; re-running with sudo", file=sys.stderr, flush=True)
    os.execvp("sudo", ["sudo", "-E", sys.executable, "-m", "p4cc", *sys.argv[1:]])


def _doctor(args: argparse.Namespace) -> int:
    from p4cc.experiment.bmv2.autocal import doctor_check
    from p4cc.experiment.doctor import main

    calibration = doctor_check()
    return main([calibration] if calibration is not None else [])


def _testbed(args: argparse.Namespace) -> int:
    """The default experiment (examples/testbed.yaml) with its report."""
    from p4cc.experiment.default import resolve_backend, run_default_experiment

    backend = resolve_backend(args.backend)
    if backend == "bmv2":
        _reexec_as_root("testbed")
    run_default_experiment(backend, Path(args.out) if args.out else None)
    return 0


def _incast(args: argparse.Namespace) -> int:
    from p4cc.controlplane.ecn import static_setting
    from p4cc.experiment.incast import TestbedConfig, incast_spec, run_testbed
    from p4cc.scale import get_scale
    from p4cc.topo.spec import parse_topo

    cfg = TestbedConfig(
        topo=args.topo, scale=args.scale, backend=args.backend,
        settings=tuple(s.strip() for s in args.settings.split(",") if s.strip()),
        duration_s=args.duration, interval_s=args.interval, load=args.load,
        traffic=args.traffic,
        out_dir=Path(args.out) if args.out else None,
        bmv2_log=args.bmv2_log, pcap=args.pcap,
    ).validate()
    # bad options fail here, before asking for root (ConfigError -> exit 2)
    scale = get_scale(cfg.scale)
    parse_topo(cfg.topo, scale)
    for name in cfg.settings:
        static_setting(name, scale)
    incast_spec(cfg)  # the spec the run will be (host CC, workload, agents)
    if args.backend != "sim":
        _reexec_as_root("incast")
    run_testbed(cfg)
    return 0


def _cli(args: argparse.Namespace) -> int:
    from p4cc.experiment.mncli import check_cli_args, run_cli

    agent = None if args.agent in ("", "hold") else args.agent
    check_cli_args(agent, args.cc, args.interval)  # bad options fail before sudo
    _reexec_as_root("cli")
    run_cli(args.topo, scale=args.scale, interval_s=args.interval, agent=agent, cc=args.cc,
            out=Path(args.out) if args.out else None)
    return 0


def _top(args: argparse.Namespace) -> int:
    from p4cc.experiment.tui import run_top

    return run_top(Path(args.dir) if args.dir else None, args.refresh, once=args.once)


def _shell(args: argparse.Namespace) -> int:
    from p4cc.experiment import p4shell
    from p4cc.experiment.clistate import find_session

    device_id, grpc_addr = find_session(Path(args.dir) if args.dir else None).endpoint(
        args.switch)
    argv = p4shell.shell_argv(grpc_addr, device_id, write=args.write, code=args.command)
    if args.command is not None:
        return subprocess.run(argv).returncode
    print(p4shell.intro(args.switch, grpc_addr, device_id, args.write), flush=True)
    p4shell.exec_shell(argv)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("doctor", help="report which tools are present and how to get "
                              "the missing ones (always exits 0)")
    p.set_defaults(func=_doctor)

    p = subparsers.add_parser(
        "testbed", help="the main job of `make testbed`: the default experiment "
        "(examples/testbed.yaml: leaf-spine, WebSearch 20 %% + incast, SECN1, SECN2, ACC, PET) "
        "and its report")
    p.add_argument("--backend", choices=("auto", "bmv2", "sim"), default="auto",
                   help="auto: BMv2 if `p4cc doctor` finds it, else the simulator (said)")
    p.add_argument("--out", default=None, help="output directory (default runs/testbed)")
    p.set_defaults(func=_testbed)

    p = subparsers.add_parser(
        "incast", help="run one incast under SECN1 then SECN2 (a spec run, one agent variant "
        "per setting) and print a per-port summary")
    p.add_argument("--topo", default="star,hosts=5", help="topology (see `p4cc topo`); the "
                   "last host receives, all others send")
    p.add_argument("--scale", default="testbed", help="scale preset (p4cc.scale.SCALES)")
    p.add_argument("--backend", choices=("auto", "bmv2", "sim"), default="auto",
                   help="auto: BMv2 if `p4cc doctor` finds it, else the simulator")
    p.add_argument("--settings", default="SECN1,SECN2",
                   help="static ECN settings to run in turn (p4cc.controlplane.ecn)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per setting")
    p.add_argument("--interval", type=float, default=0.5, help="telemetry poll interval (s)")
    p.add_argument("--load", type=float, default=1.5,
                   help="offered load at the bottleneck, as a multiple of its link rate")
    p.add_argument("--traffic", choices=("iperf3", "dcqcn", "rlcc"), default="iperf3",
                   help="iperf3: fixed-rate senders (host CC fixed:<rate>) at --load in "
                   "total; dcqcn/rlcc: p4cc's senders that react to marks")
    p.add_argument("--out", default=None, help="output directory (default runs/testbed-<time>)")
    p.add_argument("--bmv2-log", action="store_true", help="BMv2 packet log (slow)")
    p.add_argument("--pcap", action="store_true", help="pcap per switch port (slow)")
    p.set_defaults(func=_incast)

    p = subparsers.add_parser("cli", help="Mininet CLI on a fabric with the control plane "
                              "and agents running (p4cc commands: `help` in the CLI)")
    p.add_argument("--topo", default="star,hosts=5", help="topology (see `p4cc topo`)")
    p.add_argument("--scale", default="testbed", help="scale preset")
    p.add_argument("--interval", type=float, default=0.5, help="telemetry poll interval (s)")
    p.add_argument("--agent", default="hold", help="agent on every switch (secn0, secn1, "
                   "secn2, vendor, acc, pet, ...); hold: poll only, thresholds by hand")
    p.add_argument("--cc", default="dcqcn", help="host CC of the CLI's workloads (dcqcn, "
                   "rlcc, fixed:<b/s>)")
    p.add_argument("--out", default=None, help="state directory (default runs/cli/<time>)")
    p.set_defaults(func=_cli)

    p = subparsers.add_parser("top", help="live view of every port of the running `p4cc cli` "
                              "(queue, rate, marks, drops)")
    p.add_argument("--dir", default=None, help="the CLI's state directory (default: the "
                   "running one)")
    p.add_argument("--refresh", type=float, default=0.5, help="seconds between refreshes")
    p.add_argument("--once", action="store_true", help="print the table once and exit")
    p.set_defaults(func=_top)

    p = subparsers.add_parser("shell", help="p4runtime-shell on a switch of the running "
                              "`p4cc cli` (read-only unless --write)")
    p.add_argument("switch", help="switch name, e.g. s1")
    p.add_argument("--dir", default=None, help="the CLI's state directory (default: the "
                   "running one)")
    p.add_argument("--write", action="store_true", help="become primary (p4cc's control "
                   "loop cannot write until the shell exits)")
    p.add_argument("-c", "--command", default=None, help="run this Python in the shell's "
                   "namespace and exit (non-interactive)")
    p.set_defaults(func=_shell)
