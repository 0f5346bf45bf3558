"""Seed 000: ASE 15.7 on an OCZ Vertex 3 SSD against a 7200 rpm SATA disk; random lookups through
a unique index (4,800 s against 228 s: 21x) and full scans (5,572 s against 2,574 s: 2.17x)."""

from dbtier.reproduce.plan import Article, Claim, RunSpec, ScaleReference, cpu_share, device, ratio, x

HDD, SSD = ("hdd", "hdd-sata-7200"), ("ssd", "ssd-sata-mlc-sata2")
# The article's memory: ASE's 8 GB default data cache; the OS page cache is what the 24 GB machine had
# beside ASE's 18 GB max memory (its user databases used directio, so only other files pass through it).
CACHE, PAGE_CACHE = "8GB", "6GB"
SCALE = ScaleReference(1_729_204 * 8192, "random-hdd", "'This table is populated with 1,729,204 rows' on an 8K server, "
                       "'each record in the table is approximately a page'")


def article(quick: bool, engine: str = "postgres") -> Article:
    rows = 2000 if quick else 16000
    scan = {"rows": 16000, "scans": 3 if quick else 10}
    runs = [RunSpec("random-hdd", "random-index", {"rows": rows}, (HDD,), cache=CACHE, page_cache=PAGE_CACHE),
            RunSpec("random-ssd", "random-index", {"rows": rows}, (SSD,), cache=CACHE, page_cache=PAGE_CACHE),
            RunSpec("scan-hdd", "table-scan", scan, (HDD,), cache=CACHE, page_cache=PAGE_CACHE),
            RunSpec("scan-ssd", "table-scan", scan, (SSD,), cache=CACHE, page_cache=PAGE_CACHE)]
    return Article("000", "ASE 15.7: SSD against HDD, random lookups and table scans",
                   "OCZ Vertex 3 on a SATA 3 Gb/s port (ssd-sata-mlc-sata2) against a 7200 rpm SATA disk "
                   "(hdd-sata-7200); each database on "
                   "one device, 8 KiB rows one per page, cold cache", runs, claims(), scale=SCALE, engine=engine)


def claims() -> list[Claim]:
    return [Claim("random index lookups, SSD speed-up", "21.0x (4,800 s / 228 s)", ("random-hdd", "random-ssd"),
                  _random, 21.0),
            Claim("full table scans, SSD speed-up", "2.17x (5,572 s / 2,574 s)", ("scan-hdd", "scan-ssd"), _scan, 2.17)]


def _random(r: dict) -> dict:
    rnd = ratio(r["random-hdd"]["elapsed_s"], r["random-ssd"]["elapsed_s"])
    h, s = device(r["random-hdd"], "hdd"), device(r["random-ssd"], "ssd")
    reads = h["counters"]["reads"]
    size = h["counters"]["read_bytes"] / reads / 1024 if reads else 0
    return {"ours": x(rnd), "our_value": rnd,
            "reason": f"{reads:,} reads of {size:.0f} KiB on average on the disk: r_await {h['iostat']['r_await']:.2f} ms "
                      f"on the disk against {s['iostat']['r_await']:.2f} ms on the SSD (the article's svctm: 8.19 and "
                      f"0.22 ms); server CPU is {cpu_share(r['random-ssd']):.0f}% of the SSD run"}


def _scan(r: dict) -> dict:
    scan = ratio(r["scan-hdd"]["elapsed_s"], r["scan-ssd"]["elapsed_s"])
    h, s = device(r["scan-hdd"], "hdd")["iostat"], device(r["scan-ssd"], "ssd")["iostat"]

    def state(name, io, run):
        if io["%util"] >= 85:
            return f"{name} bandwidth-bound ({io['rMB/s']:.0f} MB/s at {io['%util']:.0f}% util)"
        return (f"{name} busy {io['%util']:.0f}% of the time ({io['rMB/s']:.0f} MB/s; server CPU "
                f"{cpu_share(run):.0f}% of elapsed)")
    return {"ours": x(scan), "our_value": scan,
            "reason": f"{state('the disk', h, r['scan-hdd'])}; {state('the SSD', s, r['scan-ssd'])}; the article's "
                      "SSD delivered 171 MB/s while ASE's CPU time equalled elapsed"}
