"""Seed 003: Oracle 9i on a RAM SAN against a SCSI disk: a million single-row inserts (1.09x),
updates by key with worsening locality (1.1x, 1.18x, 2.1x), a forced merge join (3.06x)."""

from dbtier.reproduce.plan import (Article, Claim, CpuReference, RunSpec, cpu_both, cpu_share, phase, ratio,
                                   where_time_went, x)

RAM, DISK = ("ramsan", "ram-san"), ("disk", "hdd-ata-7200")
SEED_UPDATES = {"a=i": (26.20, 28.99), "a=10*i": (34.36, 40.69), "a=100*i-j": (65.47, 137.79)}


#: How each engine writes what the seed's Oracle wrote (its DBWR, in batches) and extends its files:
#: the engines' documented behaviour, beside the runs' measured account (none where there is nothing
#: to add to it).
WRITES = {"postgres": "A dirty page leaving PostgreSQL's cache is written at once, one page per write (Oracle's "
                      "DBWR wrote them in batches: its 'db file parallel write')",
          "mariadb": "InnoDB's page cleaner threads write dirty pages in batches, as Oracle's DBWR did"}
EXTENDS = {"postgres": "PostgreSQL extends its files a page at a time as rows arrive (synchronous writes with direct "
                       "I/O, the DataFileExtend waits), where Oracle wrote into preallocated datafiles"}


def article(quick: bool, engine: str = "postgres") -> Article:
    rows = 100_000 if quick else 1_000_000
    # Oracle on Windows opens its datafiles unbuffered; a small default buffer cache. The two runs a
    # figure compares run one after the other: at the article's CPU the runs are mostly CPU, and this
    # machine's CPU speed drifts over minutes.
    runs = []
    for dev in (RAM, DISK):
        runs.append(RunSpec(f"insert-{dev[0]}", "insert-loop", {"rows": rows}, (dev,), cache="16MB"))
    # The quick run's 100,000 rows in 4 MB, as the full run's million in 16 MB; InnoDB's least buffer
    # pool is 6 MB (engines/mariadb/engine.py).
    small = "4MB" if engine == "postgres" else "6MB"
    for dev in (RAM, DISK):
        runs.append(RunSpec(f"update-{dev[0]}", "update-locality", {"rows": rows}, (dev,),
                            cache=small if quick else "16MB"))
    for dev in (RAM, DISK):
        runs.append(RunSpec(f"join-{dev[0]}", "merge-join", {}, (dev,), cache="16MB", page_cache="16MB"))
    # The P4 1.7 GHz's CPU: Statspack's "CPU time" of Test 1 on the RAM SAN, 24 s for 100,000 updates
    # by key, against 10,000 of the same updates' server CPU here (the statement's fixed cost, a cold
    # start's catalog reads, weighs in: 19.6 us per update over 1,000, 5.9 over 10,000).
    cpu = CpuReference(RunSpec("cpu-calibration", "update-locality", {"rows": rows, "updates": 10_000}, (RAM,),
                               cache="16MB"),
                       "a=i", "update by key", "statements", 240.0,
                       "seed 003, Test 1's Statspack on the RAM SAN: CPU time 24 s for 100,000 updates (a=i)")
    return Article("003", "Oracle 9i: inserts, updates by locality and a merge join on a RAM SAN against a disk",
                   "a TMS RamSan-220 through one Fibre Channel port (ram-san) against seed 003's disk "
                   "(hdd-ata-7200) and a Pentium 4 at 1.7 GHz; the database wholly on one device, a small database "
                   "cache", runs, claims(engine), cpu, engine=engine)


def claims(engine: str) -> list[Claim]:
    out = [Claim("1M single-row inserts, RAM SAN speed-up", "1.09x (119 s / 130 s)", ("insert-ramsan", "insert-disk"),
                 lambda r: _insert(r, engine), 1.09)]
    for name, (ram_s, disk_s) in SEED_UPDATES.items():
        out.append(Claim(f"updates {name}, RAM SAN speed-up", f"{disk_s / ram_s:.2f}x ({disk_s} s / {ram_s} s)",
                         ("update-ramsan", "update-disk"), lambda r, name=name: _update(r, name, engine),
                         disk_s / ram_s))
    out.append(Claim("merge join with the sort in temp, RAM SAN speed-up", "3.06x (29.15 s / 9.53 s)",
                     ("join-ramsan", "join-disk"), _join, 3.06))
    return out


def _insert(r: dict, engine: str) -> dict:
    ins = ratio(r["insert-disk"]["elapsed_s"], r["insert-ramsan"]["elapsed_s"])
    return {"ours": x(ins), "our_value": ins,
            "reason": f"{cpu_both(r['insert-ramsan'], r['insert-disk'], 'the RAM SAN', 'the disk')}. "
                      f"RAM SAN run: server CPU {cpu_share(r['insert-ramsan']):.0f}% of elapsed. Disk run: "
                      f"{where_time_went(r['insert-disk'])}." + (f" {EXTENDS[engine]}" if engine in EXTENDS else "")}


def _update(r: dict, name: str, engine: str) -> dict:
    ph_d = phase(r["update-disk"], name)
    v = ratio(ph_d["elapsed_s"], phase(r["update-ramsan"], name)["elapsed_s"])
    return {"ours": x(v), "our_value": v, "reason": f"disk run: {where_time_went(ph_d)}. {WRITES[engine]}"}


def _join(r: dict) -> dict:
    j = ratio(r["join-disk"]["elapsed_s"], r["join-ramsan"]["elapsed_s"])
    temp = next((o for o in r["join-disk"]["object_io"] if o["object"] == "temp files"), None)
    return {"ours": x(j), "our_value": j,
            "reason": f"{cpu_both(r['join-ramsan'], r['join-disk'], 'the RAM SAN', 'the disk')}; "
                      f"server CPU is {cpu_share(r['join-ramsan']):.0f}% of the RAM SAN run; the sort wrote "
                      f"{(temp['write_bytes'] if temp else 0) / 1048576:.0f} MB of temp files to the device. Disk "
                      f"run: {where_time_went(r['join-disk'])}"}
