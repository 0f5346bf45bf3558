"""The OLTP drivers' own cost: client CPU per transaction against the server's, for pgbench's
terminals and dbtier's Python ones, at 1, 2 and 4 clients, on an emulated RAM SAN (so the devices
do not hide the CPU), small TPC-C scale.

    python bench/oltp_driver.py [SECONDS]

Prints tpm, client CPU per transaction (the driver: input generation, the protocol, timing) and
server CPU per transaction, and the client's share of all CPU used."""

from __future__ import annotations

import sys

from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import LabOptions
from dbtier.devices.spec import parse_all
from dbtier.workloads import registry
from dbtier.workloads.base import QuietProgress
from dbtier.experiments.runner import run_workload


def main() -> None:
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(f"oltp on ram-san, items 20000, customers 600 per district, {seconds} s measured per row")
    print(f"{'driver':>8} {'clients':>7} {'tpm':>9} {'client us/txn':>14} {'server us/txn':>14} {'client share':>13}")
    for driver, clients in [(d, c) for d in ("pgbench", "python") for c in (1, 2, 4)]:
        work = registry.get("oltp")(clients=clients, duration=seconds, warmup=2, items=20000, customers=600,
                                    driver=driver)
        r = run_workload(work, parse_all(["d=ram-san"]), placement.parse([], ["d"]), LabOptions(),
                         QuietProgress(), say=lambda _l: None)
        n = r["metrics"]["committed"]
        client, server = r["client_cpu_s"], r["server_cpu_s"]
        print(f"{driver:>8} {clients:>7} {r['rates']['tpm']:>9,.0f} {1e6 * client / n:>14.0f} {1e6 * server / n:>14.0f} "
              f"{100 * client / (client + server):>12.1f}%")


if __name__ == "__main__":
    main()
