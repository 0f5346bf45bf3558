"""Seed 002: ASE 15.5 on Fusion-io PCIe flash against 15K SAS disks (data striped over twelve, the
log on a thirteenth). Build 7x, dump 5.5x, load of the dump 5x (up to 1.25x more with stripes);
OLTP 1.65x with the log alone on flash, 1.81x all on flash, 13x all-flash with reduced caches."""

from dbtier import engines
from dbtier.reproduce.plan import (Article, Claim, RunSpec, ScaleReference, cpu_share, host_cpus, phase, ratio,
                                   where_time_went, x)

HDD_DATA, HDD_LOG = ("array", "12xhdd-sas-15k-md3000"), ("logdisk", "hdd-sas-15k-md3000")
FLASH = ("flash", "pcie-flash-mlc")
ALL_HDD = (HDD_DATA, HDD_LOG)
LOG_SSD = (HDD_DATA, ("logflash", "pcie-flash-mlc"))


def layouts(engine: str) -> dict:
    """Thirteen disks in all: twelve striped for data, one for the log. The dump's ext3 file system was
    on the data device in the flash layout (its third partition); on the disks it was on the array too."""
    log, dump = engines.get(engine).log_role, engines.get(engine).dump_role
    return {"all-HDD": (ALL_HDD, f"data=array,{log}=logdisk" + (f",{dump}=array" if dump != "data" else "")),
            "log on flash": (LOG_SSD, f"data=array,{log}=logflash"),
            "all flash": ((FLASH,), "")}


# The article's caches, at its sizes (the scale model divides them by the data's ratio): the appendix's
# named data caches add up to 21,012 MB (c_log, the log's own cache, aside); "reduced caches" are the
# same with "the data size increased ~8X" (section 4.2.2), an eighth; the OS page cache is what the
# 64 GB machine had beside ASE's "max memory = 13522443" 2 KiB pages (25.8 GiB).
CACHES = {"large": "21012MB", "reduced": "2626MB"}
PAGE_CACHE = "38GB"
SCALE = ScaleReference(95e9, "build-hdd", "section 4.1.2: 'The database used for this experiment is approximately "
                       "95GB with nine tables and several indexes'")


def article(quick: bool, engine: str = "postgres") -> Article:
    scale = {"items": 20_000, "customers": 1_000} if quick else {"items": 100_000, "customers": 3_000}
    drive = {"clients": 4, "duration": 20 if quick else 60, "warmup": 5 if quick else 15}
    runs, layout = [], layouts(engine)
    for name, key in (("all-HDD", "hdd"), ("all flash", "ssd")):
        devices, places = layout[name]
        runs.append(RunSpec(f"build-{key}", "build", {**scale, "jobs": 1}, devices, places, cache=CACHES["large"],
                            page_cache=PAGE_CACHE, label=name))
    runs.append(RunSpec("build-ssd-jobs4", "build", {**scale, "jobs": 4}, (FLASH,), "", cache=CACHES["large"],
                        page_cache=PAGE_CACHE, label="all flash, 4 jobs"))
    for cache_name, cache in CACHES.items():
        for name, (devices, places) in layout.items():
            runs.append(RunSpec(f"oltp-{cache_name}-{name}", "oltp", {**scale, **drive}, devices, places, cache=cache,
                                page_cache=PAGE_CACHE, label=f"{name}, {cache_name} cache"))
    return Article("002", "ASE 15.5: build, dump and restore, and OLTP, on PCIe flash against 15K SAS disks",
                   "data on twelve 15K SAS disks in RAID 0 behind the PowerVault MD3000's battery-backed cache "
                   "(12xhdd-sas-15k-md3000), the log on a thirteenth, dumps on the array; against one Fusion-io MLC "
                   "ioDrive (pcie-flash-mlc) for data, log and dumps", runs,
                   claims(), scale=SCALE, engine=engine)


def _build_time(result: dict) -> float:
    return sum(phase(result, p)["elapsed_s"] for p in ("create database", "load", "create indexes"))


BUILD = ("build-hdd", "build-ssd")
OLTP = {("large", "log on flash"): "1.65x", ("large", "all flash"): "1.81x",
        ("reduced", "log on flash"): "about 1x", ("reduced", "all flash"): "13x"}
WANT = {"1.65x": 1.65, "1.81x": 1.81, "13x": 13.0, "about 1x": 1.0}


def claims() -> list[Claim]:
    out = [Claim("build (create, load, indexes), flash speed-up", "7.1x (161 min / 22.6 min)", BUILD, _build, 7.15)]
    for name, claim, value in (("load", "bulk load", 7.0), ("create indexes", "index creation", 8.0)):
        out.append(Claim(f"{claim}, flash speed-up", f"{value:.0f}x", BUILD,
                         lambda r, name=name: _build_phase(r, name), value))
    for name, claim, value in (("dump", "database dump", 5.5), ("restore", "load of the dump", 5.0)):
        out.append(Claim(f"{claim}, flash speed-up", f"{value}x", BUILD, lambda r, name=name: _dump(r, name), value))
    for name in ("dump", "restore"):
        out.append(Claim(f"{name} on flash with 4 jobs against 1 (the article's stripes)", "up to 1.25x",
                         ("build-ssd", "build-ssd-jobs4"), lambda r, name=name: _jobs(r, name)))
    for (cache, layout), claim in OLTP.items():
        out.append(Claim(f"OLTP tpm, {layout} against all-HDD, {cache} cache", claim,
                         (f"oltp-{cache}-all-HDD", f"oltp-{cache}-{layout}"),
                         lambda r, cache=cache, layout=layout: _oltp(r, cache, layout), WANT[claim]))
    return out


def _build(r: dict) -> dict:
    h, s = r["build-hdd"], r["build-ssd"]
    build = ratio(_build_time(h), _build_time(s))
    return {"ours": x(build), "our_value": build,
            "reason": f"disk load: {where_time_went(phase(h, 'load'))}; flash load: server CPU "
                      f"{cpu_share(phase(s, 'load')):.0f}% of elapsed"}


def _build_phase(r: dict, name: str) -> dict:
    h, s = r["build-hdd"], r["build-ssd"]
    v = ratio(phase(h, name)["elapsed_s"], phase(s, name)["elapsed_s"])
    return {"ours": x(v), "our_value": v, "reason": f"disk: {where_time_went(phase(h, name))}; flash: server CPU "
                                                    f"{cpu_share(phase(s, name)):.0f}% of elapsed"}


def _dump(r: dict, name: str) -> dict:
    h, s = r["build-hdd"], r["build-ssd"]
    v = ratio(phase(h, name)["elapsed_s"], phase(s, name)["elapsed_s"])
    return {"ours": x(v), "our_value": v,
            "reason": f"disk: {where_time_went(phase(h, name))}; flash: server CPU "
                      f"{cpu_share(phase(s, name)):.0f}% of elapsed; the dump is "
                      f"{phase(h, 'dump')['metrics']['dump_bytes'] / 1048576:.0f} MB (the dump's and restore's "
                      "client is not in server CPU)"}


def _jobs(r: dict, name: str) -> dict:
    j1, j4 = r["build-ssd"], r["build-ssd-jobs4"]
    v = ratio(phase(j1, name)["elapsed_s"], phase(j4, name)["elapsed_s"])
    return {"ours": x(v), "our_value": v, "verdict": 0.95 <= v <= 1.35,
            "reason": f"with 4 jobs the server's CPU is {cpu_share(phase(j4, name)):.0f}% of elapsed (of the "
                      f"{100 * host_cpus(j4)}% {host_cpus(j4)} CPUs give); "
                      + where_time_went(phase(j1, name), 1).split("; ", 1)[-1]}


def _oltp(r: dict, cache: str, layout: str) -> dict:
    hdd_run, run = r[f"oltp-{cache}-all-HDD"], r[f"oltp-{cache}-{layout}"]
    base = hdd_run["rates"]["tpm"]
    v = ratio(run["rates"]["tpm"], base)
    return {"ours": f"{x(v)} ({run['rates']['tpm']:,.0f} against {base:,.0f} tpm)", "our_value": v,
            "reason": f"all-HDD: {where_time_went(hdd_run)}; {layout}: {where_time_went(run, 1)} "
                      f"({host_cpus(run)} CPUs here, 16 engines there)"}
