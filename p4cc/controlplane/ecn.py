"""ECN marking settings: validated at the API in bytes, converted for the data plane.

The data plane (p4src/) compares BMv2's ``enq_qdepth``, which counts **packets**
(REFERENCE §1), so thresholds given in bytes are converted with the scale's packet
size: ``k_pkts = ceil(k_bytes / pkt_bytes)`` (at least 1).  The error this causes is
documented in docs/dataplane.md: a queue of small packets is under-estimated in bytes
(a 64 B ACK counts as a full packet, so the byte threshold is reached early), and a
threshold is quantised to whole packets (up to pkt_bytes - 1 bytes too high).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from p4cc.errors import ConfigError
from p4cc.scale import Scale

#: Pmax is carried to the switch as an integer out of PMAX_ONE (see p4src/include/ecn.p4).
PMAX_BITS = 16
PMAX_ONE = (1 << PMAX_BITS) - 1


@dataclass(frozen=True)
class EcnConfig:
    """RED/ECN marking: never below ``kmin``; ``pmax*(q-kmin)/(kmax-kmin)`` between; always
    at or above ``kmax``.  Thresholds in bytes, ``pmax`` in (0, 1]."""

    kmin_bytes: int
    kmax_bytes: int
    pmax: float

    def validate(self, buffer_bytes: int) -> EcnConfig:
        """Raise ConfigError unless 0 < kmin <= kmax <= buffer and 0 < pmax <= 1."""
        for name in ("kmin_bytes", "kmax_bytes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ConfigError(f"EcnConfig.{name} must be an integer number of bytes, got {v!r}")
        if not isinstance(self.pmax, numbers.Real) or not math.isfinite(self.pmax):
            raise ConfigError(f"EcnConfig.pmax must be a number, got {self.pmax!r}")
        if self.kmin_bytes <= 0:
            raise ConfigError(f"EcnConfig.kmin_bytes must be > 0, got {self.kmin_bytes}")
        if self.kmin_bytes > self.kmax_bytes:
            raise ConfigError(
                f"EcnConfig.kmin_bytes ({self.kmin_bytes}) must be <= "
                f"kmax_bytes ({self.kmax_bytes})"
            )
        if self.kmax_bytes > buffer_bytes:
            raise ConfigError(
                f"EcnConfig.kmax_bytes ({self.kmax_bytes}) exceeds the port buffer "
                f"({buffer_bytes} B); raise the buffer or lower kmax"
            )
        if not 0 < self.pmax <= 1:
            raise ConfigError(f"EcnConfig.pmax must be in (0, 1], got {self.pmax}")
        return self

    # -- data-plane form -------------------------------------------------------------
    def kmin_pkts(self, pkt_bytes: int) -> int:
        return max(1, math.ceil(self.kmin_bytes / pkt_bytes))

    def kmax_pkts(self, pkt_bytes: int) -> int:
        return max(self.kmin_pkts(pkt_bytes), math.ceil(self.kmax_bytes / pkt_bytes))

    @property
    def pmax_scaled(self) -> int:
        """Pmax as an integer in [1, PMAX_ONE]."""
        return max(1, min(PMAX_ONE, round(self.pmax * PMAX_ONE)))

    def marking_probability(self, qdepth_pkts: float, pkt_bytes: int) -> float:
        """The probability the data plane marks an ECT packet seen at ``qdepth_pkts``."""
        kmin, kmax = self.kmin_pkts(pkt_bytes), self.kmax_pkts(pkt_bytes)
        if qdepth_pkts < kmin:
            return 0.0
        if qdepth_pkts >= kmax:
            return 1.0
        return (self.pmax_scaled / PMAX_ONE) * (qdepth_pkts - kmin) / (kmax - kmin)

    def describe(self) -> str:
        return f"Kmin={self.kmin_bytes}B Kmax={self.kmax_bytes}B Pmax={self.pmax:g}"


# Static settings of the papers (REFERENCE §2; ACC §2 Fig. 2 and §5):
#   SECN0 (DCTCP paper): Kmin = Kmax = 18 KB, marking is a step, so Pmax = 1.
#   SECN1 (DCQCN paper): Kmin 5 KB, Kmax 200 KB; Pmax 1 % as in the DCQCN paper.
#   SECN2 (HPCC / cloud provider): Kmin 100 KB, Kmax 400 KB at 25 G; Pmax 0.2 as in
#         HPCC's ns-3 configuration.
#   vendor storage default: Kmin 30 KB, Kmax 270 KB, Pmax 10 %.
PAPER_SETTINGS: dict[str, tuple[int, int, float]] = {
    "SECN0": (18_000, 18_000, 1.0),
    "SECN1": (5_000, 200_000, 0.01),
    "SECN2": (100_000, 400_000, 0.2),
    "VENDOR": (30_000, 270_000, 0.1),
}


def scaled_threshold(paper_bytes: float, scale: Scale) -> int:
    """A paper threshold in bytes scaled by the BDP factor to ``scale``, never below one
    packet."""
    return max(scale.pkt_bytes, round(scale.bytes(paper_bytes)))


def static_setting(name: str, scale: Scale) -> EcnConfig:
    """A paper setting scaled by the BDP factor to ``scale`` (never below one packet).

    Valid by construction (one packet <= kmin <= kmax <= buffer, pmax from the table);
    the switch client validates it once when it is written (SwitchControl.set_ecn_all)."""
    try:
        kmin, kmax, pmax = PAPER_SETTINGS[name.upper()]
    except KeyError:
        raise ConfigError(
            f"unknown static ECN setting {name!r}; choose one of {sorted(PAPER_SETTINGS)}"
        ) from None
    lo = scaled_threshold(kmin, scale)
    hi = max(lo, round(scale.bytes(kmax)))
    hi = min(hi, scale.buffer_bytes)
    lo = min(lo, hi)
    return EcnConfig(lo, hi, pmax)
