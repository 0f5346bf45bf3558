"""What held a volume's requests back: its provisioned limits. A cloud volume admits requests
through an IOPS and a throughput token bucket, each at its cap (the burst rate while burst credits
last) and at its baseline once they are spent. The emulation counts, per limit, the time at least one
request waited on it (a union, as %util is) and the requests it held; the limit names are the
library's (native/iotap/devmodel.h, enum dbt_limit)."""

from __future__ import annotations

from dbtier.devices import native

#: a limit's name -> (the parameter giving its rate, the burst parameter that replaces it while
#: credits last or None, its unit, how a DBA names it)
RATES = {"iops": ("iops", "burst_iops", "IOPS", "cap"),
         "throughput": ("mb_s", "burst_mb_s", "MB/s", "throughput cap"),
         "iops_credits": ("iops", None, "IOPS", "baseline once its burst credits were spent"),
         "throughput_credits": ("mb_s", None, "MB/s", "throughput baseline once its burst credits were spent")}


def held(dev: dict, elapsed_s: float) -> list[dict]:
    """One device's limits over an interval (dev: its counters and params, as the state gives them),
    those that held any request, longest first."""
    params = dev.get("params") or {}
    out = []
    for name in native.DEVICE_LIMITS:
        ns = dev.get(f"held_{name}_ns", 0)
        if not ns:
            continue
        rate_key, burst_key, unit, _ = RATES[name]
        rate = params.get(rate_key, 0.0)
        if burst_key and params.get(burst_key):  # a bursting bucket's cap is its burst rate
            rate = params[burst_key]
        out.append({"limit": name, "rate": rate, "unit": unit, "held_s": ns / 1e9,
                    "held_pct": min(100.0, 100.0 * ns / 1e9 / elapsed_s) if elapsed_s > 0 else 0.0,
                    "requests": dev.get(f"held_{name}", 0)})
    return sorted(out, key=lambda h: -h["held_s"])
