"""Seed 002: ASE 15.5 on Fusion-io PCIe flash against 15K SAS disks (data striped over twelve, the
log on a thirteenth). Build 7x, dump 5.5x, load of the dump 5x (up to 1.25x more with stripes);
OLTP 1.65x with the log alone on flash, 1.81x all on flash, 13x all-flash with reduced caches."""

from dbtier.reproduce.plan import Article, Figure, RunSpec, ScaleReference, cpu_share, host_cpus, phase, ratio, where_time_went, x

HDD_DATA, HDD_LOG = ("array", "12xhdd-sas-15k-md3000"), ("logdisk", "hdd-sas-15k-md3000")
FLASH = ("flash", "pcie-flash-mlc")
ALL_HDD = (HDD_DATA, HDD_LOG)
LOG_SSD = (HDD_DATA, ("logflash", "pcie-flash-mlc"))
# Thirteen disks in all: twelve striped for data, one for the log. The dump's ext3 file system was on
# the data device in the flash layout (its third partition); on the disks it was on the array too.
LAYOUTS = {
    "all-HDD": (ALL_HDD, "data=array,wal=logdisk,dump=array"),
    "log on flash": (LOG_SSD, "data=array,wal=logflash"),
    "all flash": ((FLASH,), ""),
}
# The article's caches, at its sizes (the scale model divides them by the data's ratio): the appendix's
# named data caches add up to 21,012 MB (c_log, the log's own cache, aside); "reduced caches" are the
# same with "the data size increased ~8X" (section 4.2.2), an eighth; the OS page cache is what the
# 64 GB machine had beside ASE's "max memory = 13522443" 2 KiB pages (25.8 GiB).
CACHES = {"large": "21012MB", "reduced": "2626MB"}
PAGE_CACHE = "38GB"
SCALE = ScaleReference(95e9, "build-hdd", "section 4.1.2: 'The database used for this experiment is approximately "
                       "95GB with nine tables and several indexes'")


def article(quick: bool) -> Article:
    scale = {"items": 20_000, "customers": 1_000} if quick else {"items": 100_000, "customers": 3_000}
    drive = {"clients": 4, "duration": 20 if quick else 60, "warmup": 5 if quick else 15}
    runs = []
    for name, key in (("all-HDD", "hdd"), ("all flash", "ssd")):
        devices, places = LAYOUTS[name]
        runs.append(RunSpec(f"build-{key}", "build", {**scale, "jobs": 1}, devices, places, cache=CACHES["large"],
                            page_cache=PAGE_CACHE, label=name))
    runs.append(RunSpec("build-ssd-jobs4", "build", {**scale, "jobs": 4}, (FLASH,), "", cache=CACHES["large"],
                        page_cache=PAGE_CACHE, label="all flash, 4 jobs"))
    for cache_name, cache in CACHES.items():
        for name, (devices, places) in LAYOUTS.items():
            runs.append(RunSpec(f"oltp-{cache_name}-{name}", "oltp", {**scale, **drive}, devices, places, cache=cache,
                                page_cache=PAGE_CACHE, label=f"{name}, {cache_name} cache"))
    return Article("002", "ASE 15.5: build, dump and restore, and OLTP, on PCIe flash against 15K SAS disks",
                   "data on twelve 15K SAS disks in RAID 0 behind the PowerVault MD3000's battery-backed cache "
                   "(12xhdd-sas-15k-md3000), the log on a thirteenth, dumps on the array; against one Fusion-io MLC "
                   "ioDrive (pcie-flash-mlc) for data, log and dumps", runs,
                   figures, scale=SCALE)


def _build_time(result: dict) -> float:
    return sum(phase(result, p)["elapsed_s"] for p in ("create database", "load", "create indexes"))


def figures(r: dict) -> list[Figure]:
    out = []
    h, s = r["build-hdd"], r["build-ssd"]
    build = ratio(_build_time(h), _build_time(s))
    load_h, load_s = phase(h, "load"), phase(s, "load")
    out.append(Figure("build (create, load, indexes), flash speed-up", "7.1x (161 min / 22.6 min)", x(build), 7.15,
                      build, f"disk load: {where_time_went(load_h)}; flash load: server CPU "
                      f"{cpu_share(load_s):.0f}% of elapsed"))
    for name, claim, value in (("load", "bulk load", 7.0), ("create indexes", "index creation", 8.0)):
        v = ratio(phase(h, name)["elapsed_s"], phase(s, name)["elapsed_s"])
        out.append(Figure(f"{claim}, flash speed-up", f"{value:.0f}x", x(v), value, v,
                          f"disk: {where_time_went(phase(h, name))}; flash: server CPU "
                          f"{cpu_share(phase(s, name)):.0f}% of elapsed"))
    for name, claim, value in (("dump", "database dump", 5.5), ("restore", "load of the dump", 5.0)):
        v = ratio(phase(h, name)["elapsed_s"], phase(s, name)["elapsed_s"])
        out.append(Figure(f"{claim}, flash speed-up", f"{value}x", x(v), value, v,
                          f"disk: {where_time_went(phase(h, name))}; flash: server CPU "
                          f"{cpu_share(phase(s, name)):.0f}% of elapsed; the dump is "
                          f"{phase(h, 'dump')['metrics']['dump_bytes'] / 1048576:.0f} MB (pg_dump and pg_restore "
                          "are client CPU, not in server CPU)"))
    j1, j4 = r["build-ssd"], r["build-ssd-jobs4"]
    for name in ("dump", "restore"):
        v = ratio(phase(j1, name)["elapsed_s"], phase(j4, name)["elapsed_s"])
        out.append(Figure(f"{name} on flash with 4 jobs against 1 (the article's stripes)", "up to 1.25x", x(v), None, v,
                          f"with 4 jobs the server's CPU is {cpu_share(phase(j4, name)):.0f}% of elapsed (of the "
                          f"{100 * host_cpus(j4)}% {host_cpus(j4)} CPUs give); "
                          + where_time_went(phase(j1, name), 1).split("; ", 1)[-1],
                          verdict=0.95 <= v <= 1.35))
    for cache in ("large", "reduced"):
        base = r[f"oltp-{cache}-all-HDD"]["rates"]["tpm"]
        for layout, claim in (("log on flash", "1.65x" if cache == "large" else "about 1x"),
                              ("all flash", "1.81x" if cache == "large" else "13x")):
            run = r[f"oltp-{cache}-{layout}"]
            v = ratio(run["rates"]["tpm"], base)
            want = {"1.65x": 1.65, "1.81x": 1.81, "13x": 13.0, "about 1x": 1.0}[claim]
            hdd_run = r[f"oltp-{cache}-all-HDD"]
            ours = f"{x(v)} ({run['rates']['tpm']:,.0f} against {base:,.0f} tpm)"
            out.append(Figure(f"OLTP tpm, {layout} against all-HDD, {cache} cache", claim, ours, want, v,
                              f"all-HDD: {where_time_went(hdd_run)}; {layout}: {where_time_went(run, 1)} "
                              f"({host_cpus(run)} CPUs here, 16 engines there)"))
    return out
