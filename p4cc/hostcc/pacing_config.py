"""What the HTB pacer (p4cc.hostcc.pacing) is configured with and counts, and how its
thread enters a host's network namespace."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field

from p4cc.errors import ConfigError

CLONE_NEWNET = 0x40000000


def enter_netns(name: str) -> None:
    """Move the *calling thread* into the named network namespace (``ip netns``)."""
    path = name if name.startswith("/") else f"/var/run/netns/{name}"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ConfigError(f"network namespace {name!r} not found ({exc}); create it with "
                          "`ip netns add`") from exc
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise ConfigError(f"setns({name}) failed: {os.strerror(err)}; run as root")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class PacerConfig:
    """Where and how to pace."""

    dev: str = field(metadata={"help": "host interface whose root qdisc becomes HTB"})
    netns: str | None = field(default=None, metadata={"help": "named netns of the device"})
    major: int = field(default=0xCC, metadata={"help": "HTB handle major number"})
    ctrl_rate_bps: float = field(default=1e9, metadata={"help": "rate of the probe class"})
    min_rate_bps: float = field(
        default=8e3, metadata={"help": "lowest rate ever set (and a flow class's guaranteed "
                               "rate under the link class)"})
    ceil_floor_bps: float = field(
        default=0.0,
        metadata={"help": "lowest ceiling of a flow class: HTB charges each frame at the "
                  "ceiling in force and does not forgive that debt when the ceiling rises, "
                  "so the owner paces slower flows itself (SenderConfig.max_token_debt_s)"})
    mtu: int = field(default=1600, metadata={"help": "largest frame (bytes)"})
    burst_s: float = field(default=1e-3, metadata={"help": "HTB burst = mtu + rate × this"})
    link_rate_bps: float | None = field(
        default=None, metadata={"help": "cap the flows' sum at this rate (the NIC's)"})
    batch_tc: bool = field(
        default=True, metadata={"help": "create flow classes and change their rates through "
                                "one `tc -batch` process (p4cc.hostcc.tcbatch; pyroute2 "
                                "if there is no tc)"})

    def __post_init__(self) -> None:
        if not 0 <= self.ceil_floor_bps < float("inf"):
            raise ConfigError(f"ceil_floor_bps={self.ceil_floor_bps} must be >= 0")
        if self.link_rate_bps is not None and not self.link_rate_bps > 0:
            raise ConfigError(f"link_rate_bps={self.link_rate_bps} must be > 0 (or None)")
        if not self.dev:
            raise ConfigError("pacing needs a device name (--dev)")
        if not 1 <= self.major <= 0xFFFE:
            raise ConfigError(f"HTB major handle must be in 1..0xfffe, got {self.major:#x}")


def htb_rate(bps: float) -> str:
    """pyroute2's spelling of an HTB rate in bit/s (at least 1)."""
    return f"{max(1, int(bps))}bit"


@dataclass
class PacerStats:
    requested: int = 0
    applied: int = 0
    coalesced: int = 0
    unchanged: int = 0
    errors: int = 0
    last_apply_s: float = 0.0
    max_apply_s: float = 0.0
    batch: bool = False  # classes and rate changes through ``tc -batch`` (time = handing one over)
