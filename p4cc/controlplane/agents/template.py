"""The discrete ECN action template of ACC and PET, scaled to a fabric.

ACC §3.3 eq. (1): thresholds are drawn from ``E(n) = α·2ⁿ KB``, n = 0..9, α = 20 (KB,
at 25 Gb/s); PET §4.2.2 eq. (5) reuses it with α = 20 (PET §5.2).  ACC §5.4 counts
"55 × 20" actions per agent: 55 = the (Kmin, Kmax) pairs with Kmin ≤ Kmax both taken
from E(0..9) (10·11/2), 20 = the Pmax values j·5 %, j = 1..20.  PET requires Kmin
*strictly* below Kmax (45 pairs).  docs/learning.md explains this reading (§3.3 also
names a Kmax set {1, 2, 5, 10} MB and a separate 1 % Pmax, which cannot give 55 × 20).

α is a paper byte quantity tied to the BDP, so it is scaled with ``Scale.bytes``
(REFERENCE §5); thresholds above the port buffer are clipped to it (so the higher n
map to the same setting, at every scale: buffer/α is 50 for both presets).
Action index ``a = pair · len(pmax) + j``, pairs in (Kmin index, Kmax index) order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from p4cc.controlplane.ecn import EcnConfig
from p4cc.errors import ConfigError
from p4cc.scale import Scale


@dataclass(frozen=True)
class ActionTemplate:
    """Which (Kmin, Kmax, Pmax) settings the agent's discrete actions stand for."""

    alpha_paper_bytes: int = field(default=20_000, metadata={
        "help": "α of E(n) = α·2ⁿ in paper bytes (ACC §3.3: 20 KB); scaled by the BDP"})
    n_levels: int = field(default=10, metadata={"help": "n = 0..n_levels-1 (ACC/PET: 10)"})
    pmax_step: float = field(default=0.05, metadata={
        "help": "Pmax = j·step, j = 1..1/step (ACC §3.3 / PET §4.2.2: 5 %)"})
    strict: bool = field(default=False, metadata={
        "help": "Kmin < Kmax (PET §4.2.2, 45 pairs) instead of Kmin <= Kmax (ACC, 55)"})
    pair_levels: int = field(default=0, metadata={
        "help": "draw the (Kmin, Kmax) pairs from E(0..pair_levels-1) only (0: all "
                "n_levels, the paper's 55); 7 drops the pairs that clip to the same "
                "setting (E(6..9) >= buffer = 50 α at both scales: 28 distinct pairs)"})

    def __post_init__(self) -> None:
        if not 0 <= self.pair_levels <= self.n_levels:
            raise ConfigError(f"pair_levels must be in 0..{self.n_levels}, "
                              f"got {self.pair_levels}")

    @cached_property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """(Kmin level, Kmax level) pairs, Kmin level ≤ (or <) Kmax level."""
        n = self.pair_levels or self.n_levels
        return tuple((i, j) for j in range(n) for i in range(n)
                     if i < j or (i == j and not self.strict))

    @cached_property
    def pmax_values(self) -> tuple[float, ...]:
        steps = round(1.0 / self.pmax_step)
        return tuple(round(self.pmax_step * j, 6) for j in range(1, steps + 1))

    @property
    def n_actions(self) -> int:
        return len(self.pairs) * len(self.pmax_values)

    def levels(self, scale: Scale) -> list[int]:
        """E(n) in bytes on ``scale``: at least one packet, at most the port buffer."""
        return [max(scale.pkt_bytes, min(scale.buffer_bytes,
                                          round(scale.bytes(self.alpha_paper_bytes * 2**n))))
                for n in range(self.n_levels)]

    def decode(self, action: int) -> tuple[int, int, float]:
        """Action index -> (Kmin level, Kmax level, Pmax)."""
        pair, j = divmod(int(action), len(self.pmax_values))
        kmin_n, kmax_n = self.pairs[pair]
        return kmin_n, kmax_n, self.pmax_values[j]

    def configs(self, scale: Scale) -> list[EcnConfig]:
        """The EcnConfig of every action on ``scale``, validated."""
        e = self.levels(scale)
        out = []
        for a in range(self.n_actions):
            kmin_n, kmax_n, pmax = self.decode(a)
            kmax = e[kmax_n]
            out.append(EcnConfig(min(e[kmin_n], kmax), kmax, pmax).validate(scale.buffer_bytes))
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: ACC: 55 × 20 = 1100 actions; PET: 45 × 20 = 900 actions.
ACC_TEMPLATE = ActionTemplate()
PET_TEMPLATE = ActionTemplate(strict=True)
