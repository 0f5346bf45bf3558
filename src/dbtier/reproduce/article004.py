"""Seed 004: ASE 15.0 commands with direct I/O against dsync devices (and raw partitions)."""

from dbtier.reproduce.plan import Article, Claim, CpuReference, RunSpec, ScaleReference, cpu_both, phase, ratio, x

DISK = ("disk", "hdd-sas-15k")
# The seed's dsync and direct I/O seconds per command (section 9.1).
SEED = {
    "tablealloc check": (96, 381), "update statistics": (249, 323), "alter table": (10635, 3969),
    "create clustered index": (16233, 3103), "create non-clustered index": (4928, 2296), "reorg rebuild": (9686, 5102),
    "create database": (16343, 440), "bulk load": (1073, 334), "insert": (88.3, 18.8), "update": (11, 10.4),
}
# The article's memory (section 9): ASE's 3 GB data cache; the OS page cache, which dsync devices read
# through, is what the 16 GB machine had beside ASE's 4 GB max memory.
CACHE, PAGE_CACHE = "3GB", "12GB"
# Every command acts on lineitem alone, the only table here: its size is what the caches are set
# beside (of the 24 GB database, the other tables never reach the caches in these commands).
SCALE = ScaleReference(4.3e9, "io-direct", "section 9.1.2: lineitem, '24 million rows, 4.3 GB table size'",
                       objects=("lineitem",))
# The V490's CPU (eight UltraSPARC IV at 1,050 MHz), from the article's own figures: bcp in loaded 6
# million rows in 334 s on the direct I/O devices (section 9.1.3), about 0.8 GB at under 3 MB/s, where
# the same devices took create database's 25 GB at 57 MB/s and ASE kept up to 2,048 asynchronous
# I/Os in flight: the devices did not hold the load back, its CPU did, 55.7 us a row. Here COPY
# parses in the server what bcp's client parsed on another of the V490's CPUs, so the K this gives
# is, if anything, low. Measured on a RAM device at this machine's speed, against the load's server
# CPU per row.
CPU = CpuReference(RunSpec("cpu-calibration", "io-modes", {"orders": 40_000}, (("ram", "ram-san"),), cache="64MB"),
                   "bulk load", "row loaded", "rows", 334e6 / 6e6,
                   "seed 004, section 9.1.3: bcp in of 6 million rows in 334 s on direct I/O devices that wrote "
                   "25 GB in 440 s for create database")


def article(quick: bool, engine: str = "postgres") -> Article:
    params = {"orders": 15_000 if quick else 100_000}
    runs = [RunSpec(f"io-{mode}", "io-modes", params, (DISK,), io_mode=mode, cache=CACHE, page_cache=PAGE_CACHE,
                    label=mode) for mode in ("direct", "dsync", "buffered")]
    return Article("004", "ASE 15.0: direct I/O against dsync", "one 15K SAS disk (hdd-sas-15k); 3 GB of ASE cache on a "
                   "16 GB Sun Fire V490 (UltraSPARC IV at 1,050 MHz), scaled with the data", runs, claims(), CPU,
                   scale=SCALE, engine=engine)


def claims() -> list[Claim]:
    return [Claim(f"{name}: dsync time / direct time", f"{dsync_s / direct_s:.2f} ({dsync_s} s / {direct_s} s)",
                  ("io-direct", "io-dsync"), lambda r, name=name: _command(r, name), dsync_s / direct_s)
            for name, (dsync_s, direct_s) in SEED.items()]


def _command(r: dict, name: str) -> dict:
    d, s = phase(r["io-direct"], name), phase(r["io-dsync"], name)
    v = ratio(s["elapsed_s"], d["elapsed_s"])
    sd = s["devices"][0]
    return {"ours": x(v), "our_value": v,
            "reason": f"{cpu_both(s, d, 'dsync', 'direct')}; "
                      f"dsync: {sd['counters']['writes']:,} writes with {sd['counters']['flushes']:,} flushes "
                      f"(w_await {sd['iostat']['w_await']:.1f} ms, f_await {sd['iostat']['f_await']:.1f} ms), "
                      f"{sd['page_cache']['hit_pct']:.0f}% of page reads from the page cache; direct: "
                      f"{d['devices'][0]['counters']['writes']:,} writes, "
                      f"{d['devices'][0]['counters']['reads']:,} reads; the rest stays in the database cache "
                      "until a checkpoint"}
