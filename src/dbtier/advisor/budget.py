"""How much fast storage a placement may use: a capacity (--budget SIZE), or what the storage may cost
(--cost fast=$/GB,slow=$/GB --max-cost $): every byte sits on one of the two devices, so a cost
limit is a limit on the fast device's bytes."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dbtier.errors import UserError
from dbtier.units import fmt_bytes
from dbtier.units import parse_option_size

GIB = 1 << 30
_PRICE = re.compile(r"^\s*(fast|slow)\s*=\s*\$?\s*([0-9]*\.?[0-9]+)\s*$")


@dataclass
class Budget:
    fast_bytes: int                    # the most the fast device may hold
    fast_price: float | None = None    # $ per GiB
    slow_price: float | None = None
    max_cost: float | None = None

    def cost(self, fast_bytes: int, total_bytes: int) -> float | None:
        """What a placement's storage costs: its fast bytes at the fast price, the rest at the slow."""
        if self.fast_price is None:
            return None
        return (fast_bytes * self.fast_price + (total_bytes - fast_bytes) * self.slow_price) / GIB

    def describe(self) -> str:
        if self.max_cost is None:
            return f"{fmt_bytes(self.fast_bytes)} of fast storage"
        return (f"${self.max_cost:,.2f} of storage at ${self.fast_price:g}/GB fast and ${self.slow_price:g}/GB slow "
                f"(up to {fmt_bytes(self.fast_bytes)} fast)")

    def to_dict(self) -> dict:
        return {"fast_bytes": self.fast_bytes, "fast_price_per_gib": self.fast_price,
                "slow_price_per_gib": self.slow_price, "max_cost": self.max_cost}


def parse_prices(text: str) -> tuple[float, float]:
    prices = {}
    for item in str(text).split(","):
        m = _PRICE.match(item)
        if not m:
            raise UserError(f"--cost {text!r}: expected fast=$/GB,slow=$/GB, for example --cost fast=0.25,slow=0.03")
        prices[m.group(1)] = float(m.group(2))
    if set(prices) != {"fast", "slow"}:
        raise UserError(f"--cost {text!r}: give both prices, fast=$/GB,slow=$/GB")
    return prices["fast"], prices["slow"]


def parse(budget: str | None, cost: str | None, max_cost: float | None, total_bytes: int) -> Budget:
    """total_bytes: every candidate's bytes (what the two devices hold between them)."""
    if budget is not None and (cost is not None or max_cost is not None):
        raise UserError("give either --budget SIZE or --cost fast=$/GB,slow=$/GB with --max-cost $, not both")
    if budget is not None:
        return Budget(parse_option_size(budget, "--budget"))
    if cost is None or max_cost is None:
        raise UserError("say how much fast storage there is: --budget SIZE (e.g. --budget 2GB), or --cost "
                        "fast=$/GB,slow=$/GB with --max-cost $")
    fast, slow = parse_prices(cost)
    if not math.isfinite(max_cost) or max_cost <= 0:
        raise UserError(f"--max-cost {max_cost}: give an amount above 0")
    floor = total_bytes * slow / GIB
    if max_cost < floor:
        raise UserError(f"--max-cost {max_cost:g}: the run's {fmt_bytes(total_bytes)} on the slow device alone cost "
                        f"${floor:,.2f}; give at least that")
    if fast <= slow:
        return Budget(total_bytes, fast, slow, max_cost)
    room = int((max_cost - floor) / (fast - slow) * GIB)
    return Budget(min(room, total_bytes), fast, slow, max_cost)
