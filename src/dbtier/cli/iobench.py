"""`dbtier iobench`: sequential and random, read and write, block sizes and workers, direct,
buffered or dsync, on an emulated or a real device: the seed articles' device tests."""

from __future__ import annotations

import itertools
import math
import os
import tempfile
from pathlib import Path

import click
from dbtier.report.html import TableData

from dbtier import lifecycle
from dbtier.devices import credits as burst_credits
from dbtier.devices import hostfs, native, pagecache
from dbtier.devices.bench import engine_fio, engine_model
from dbtier.devices.bench.jobs import MODES, PATTERNS, Job, parse_size, size_label
from dbtier.devices.bench.run import run_jobs
from dbtier.devices.hostfs import FAST_DEVICE_US
from dbtier.devices.patterns import STANDARD, expected
from dbtier.devices.session import Device, host_floor_warnings
from dbtier.errors import UserError
from dbtier.experiments import preflight
from dbtier import units
from dbtier.units import fmt_bytes
from dbtier.devices.spec import parse_all
from dbtier.report import jsonout, outputs
from dbtier.report.terminal import console, fmt, show
from dbtier.workspace import Claim, Workspace, check_not_pseudo


MIN_BS, MAX_BS = 512, 64 << 20
MAX_RUNTIME_S = 3600.0
#: the emulation's shared state and the workers' latency files, beside the benchmark's files
STATE_ROOM = 64 << 20


def device_dir(claim: Claim, given: Path | None, fast: bool) -> Path:
    """Where the benchmark's files go, a folder of the claim's: inside the user's folder, or a scratch one
    (in RAM for fast devices, so the host's disk is not the floor; on disk otherwise)."""
    if given is not None:
        return claim.outside(given / claim.child_name("files"))
    if fast and hostfs.is_ram(claim.path):
        return claim.inside("files", mode=0o700)
    return claim.outside(Path(tempfile.gettempdir()) / claim.child_name("files"))


def _check_room(req, fast: bool, workspace: Path | None, files: int, pc_bytes: int) -> None:
    """Before anything is made: the device's folder can take the benchmark's files, the workspace the
    emulation's state (and the page cache's), and what goes to tmpfs fits in the memory available."""
    base = Workspace.locate(workspace).parent
    if req.directory is not None:
        check_not_pseudo(req.directory, f"device {req.name}'s folder")
        if not os.access(req.directory, os.W_OK | os.X_OK):
            raise UserError(f"--device {req.name}: you cannot write in {req.directory}; choose a folder of yours")
        where = req.directory
    else:
        where = base if fast and hostfs.is_ram(base) else Path(tempfile.gettempdir())
    state = native.state_bytes(pc_bytes) + STATE_ROOM
    places: dict[int, preflight.Place] = {}
    for path, what, n in ((where, "the benchmark's files", files), (base, "the emulation's state", state)):
        p = preflight.place_of(path)
        places.setdefault(p.dev, p).add(what, n)
    for p in places.values():
        if p.need > p.free:
            raise UserError(f"iobench would not fit: it needs about {fmt_bytes(p.need)} on {p.describe()}, "
                            f"which has {fmt_bytes(p.free)} free (--jobs x --size is "
                            f"{fmt_bytes(files)}); give a smaller --size or fewer --jobs")
    available = hostfs.mem_available()
    in_ram = sum(p.need for p in places.values() if p.ram)
    if available is not None and in_ram > hostfs.MEMORY_SHARE * available:
        raise UserError(f"iobench would not fit in memory: {fmt_bytes(in_ram)} would go to tmpfs and this "
                        f"machine can give {fmt_bytes(hostfs.MEMORY_SHARE * available)}; give a smaller "
                        "--size or fewer --jobs, or a folder on a disk (-d NAME=PROFILE:DIR)")


def _run_live(out, req, jobs, engines, pc_bytes, fast, workspace, files_bytes, quiet, credits) -> list[dict]:
    """The engines that run through the emulation on files: a claimed folder, removed whatever happens."""
    _check_room(req, fast, workspace, files_bytes, pc_bytes)
    workspace = Workspace.open(workspace)
    workspace.reap(lambda line: out.print(line, markup=False))
    claim = workspace.claim("iobench")
    try:
        directory = device_dir(claim, req.directory, fast)
        device = Device(req.name, directory.resolve(), req.profile)
        if not quiet:
            for warning in host_floor_warnings([device]):
                out.print(f"warning: {warning}", markup=False)
        with out.status("laying out files") as status:
            return run_jobs(device, jobs, engines, pc_bytes, claim.path,
                            lambda text: status.update(text) if not quiet else None, credits)
    finally:
        with lifecycle.shielded():
            claim.remove()


def _list(text: str, what: str, parse, allowed=None) -> list:
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        if allowed and item not in allowed:
            raise UserError(f"--{what} {item}: choose from {', '.join(allowed)}")
        try:
            out.append(parse(item))
        except ValueError:
            raise UserError(f"--{what} {item!r}: not a valid value") from None
    if not out:
        raise UserError(f"--{what}: give at least one value")
    return out


def _step_reason(profile, rw: str, fell: bool) -> str:
    """Why a device's rate stepped, from what the device is: a cloud volume's burst credits, a
    disk's write cache, or neither."""
    if not fell:
        return "the rate rose"
    if profile.kind == "cloud":
        return "credits spent: the burst ended"
    if profile.kind == "hdd" and rw in ("write", "randwrite") and profile.params.get("write_cache", 1):
        return "the drive's write cache filled: writes now wait for the destage"
    return "the rate fell"


@click.command()
@click.option("--device", "-d", "device_arg", required=True, metavar="NAME=PROFILE[:DIR]",
              help="the device: a profile (emulated; DIR defaults to a scratch folder, in RAM for fast devices), "
                   "or real:DIR for a folder on a real disk")
@click.option("--rw", default="randread,read,randwrite,write", show_default=True,
              help="patterns, comma-separated: read, write, randread, randwrite")
@click.option("--bs", default="8k,128k", show_default=True,
              help="block sizes, comma-separated: multiples of 512 bytes from 512 to 64m (e.g. 512,4k,1m)")
@click.option("--jobs", "njobs", default="1", show_default=True, help="concurrent workers, comma-separated (e.g. 1,4)")
@click.option("--mode", default="direct", show_default=True,
              help="direct (O_DIRECT), buffered (through the page cache) or dsync (O_DSYNC); comma-separated")
@click.option("--size", default="256m", show_default=True,
              help="file size per worker (at least the largest block size), e.g. 64m or 1g")
@click.option("--runtime", default=3.0, show_default=True, help=f"seconds per measurement, up to {MAX_RUNTIME_S:g}")
@click.option("--engine", default="dbtier", show_default=True,
              help="dbtier, fio, model, or several (dbtier,fio): the same jobs through each. model: the device "
                   "model alone in simulated time (direct mode, no files), so a long --runtime takes moments")
@click.option("--credits", default="full", show_default=True, metavar="empty|full|FRACTION",
              help="the burst credits a capped cloud volume has as each measurement starts: full, empty (its "
                   "baseline from the first request), or a fraction such as 0.5")
@click.option("--page-cache", default="256MB", show_default=True, help="the emulated page cache for buffered modes")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="write the results as JSON here")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="a folder in which dbtier makes its own, dbtier-UID, for the emulation's state and, without DIR, "
                   "the benchmark's files (default: /dev/shm)")
@click.option("--quiet", "-q", is_flag=True, help="print only the table")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
def iobench(device_arg, rw, bs, njobs, mode, size, runtime, engine, credits, page_cache, json_path, workspace,
            quiet, wide) -> None:
    """Device tests like the seeds' (IOMeter, SiSoft Sandra, fio): MB/s, IOPS and latency percentiles
    for each pattern, block size, worker count and I/O mode, with iostat's view of the device.

    \b
    Examples:
      dbtier iobench -d hdd=hdd-sata-7200 --rw randread,read --bs 8k,1m
      dbtier iobench -d ram=ram-san --engine dbtier,fio
      dbtier iobench -d gp2=ebs-gp2-100g --engine model --runtime 3600 --credits 0.5
      dbtier iobench -d disk=real:/var/tmp/bench --mode direct,buffered --jobs 1,4"""
    out = console(wide=wide)
    (req,) = parse_all([device_arg])
    patterns = _list(rw, "rw", str, PATTERNS)
    sizes = _list(bs, "bs", parse_size)
    for b in sizes:
        if not MIN_BS <= b <= MAX_BS or b % 512:
            raise UserError(f"--bs {size_label(b)}: block sizes are multiples of 512 bytes from 512 to 64m "
                            "(e.g. 512, 4k, 8k, 1m)")
    workers = _list(njobs, "jobs", int)
    if any(w < 1 or w > 64 for w in workers):
        raise UserError("--jobs: from 1 to 64 workers")
    modes = _list(mode, "mode", str, MODES)
    engines = _list(engine, "engine", str, ("dbtier", "fio", "model"))
    if "fio" in engines and not engine_fio.available():
        raise UserError("--engine fio: fio is not installed (apt-get install fio)")
    try:
        file_size = parse_size(size)
    except ValueError:
        raise UserError(f"--size {size!r}: a size such as 256m or 1g") from None
    if not (math.isfinite(runtime) and 0 < runtime <= MAX_RUNTIME_S):
        raise UserError(f"--runtime {runtime:g}: seconds per measurement, more than 0 and at most {MAX_RUNTIME_S:g}")
    if file_size < max(sizes):
        raise UserError(f"--size {size}: each worker's file must hold at least one block of the largest --bs "
                        f"({size_label(max(sizes))}); give a larger --size or smaller blocks")
    credit = burst_credits.parse(credits)
    pc_bytes = pagecache.check_page_cache(units.parse_option_size(page_cache, "--page-cache"))
    jobs = [Job(r, b, w, m, file_size, runtime) for m, r, b, w in itertools.product(modes, patterns, sizes, workers)]
    if json_path:
        json_path = outputs.check_file(json_path, "--json")
    fast = req.profile.kind != "real" and min(expected(req.profile, p).mean_us for p in STANDARD) < FAST_DEVICE_US
    if "model" in engines:
        if req.profile.kind == "real":
            raise UserError("--engine model needs an emulated profile: a real folder has no model")
        if set(modes) != {"direct"}:
            raise UserError("--engine model runs --mode direct only: the model has no page cache")
    if req.directory is None and req.profile.kind == "real":
        raise UserError("a real device needs its folder: -d NAME=real:DIR")
    if engines == ["model"]:
        device = Device(req.name, Path("."), req.profile)
        with out.status("simulating") as status:
            rows = run_jobs(device, jobs, engines, pc_bytes, Path("."),
                            lambda text: status.update(text) if not quiet else None, credit)
    else:
        rows = _run_live(out, req, jobs, engines, pc_bytes, fast, workspace, max(workers) * file_size, quiet, credit)
    columns = ["rw", "mode", "engine", "bs", "jobs", "MiB/s", "IOPS", "mean us", "p50 us", "p99 us",
               "device r/w_await ms", "%util"]
    cells, steps = [], []
    for row in rows:
        j, io = row["job"], (row.get("diskstats") or (row["device"] or {}).get("iostat"))
        await_ms = (io["r_await"] if j["rw"] in ("read", "randread") else io["w_await"]) if io else None
        cells.append([j["rw"], j["mode"], row["engine"], size_label(j["bs"]), str(j["jobs"]), fmt(row["mb_s"]),
                      fmt(row["iops"]), fmt(row["mean_us"]), fmt(row["p50_us"]), fmt(row["p99_us"]),
                      fmt(await_ms) if io else "-", fmt(io["%util"]) if io else "-"])
        changed = engine_model.step(row["per_second"]) if row.get("per_second") else None
        if changed:
            before, after, at = changed
            steps.append(f"{Job(**j).label()}: {before:,.0f} requests/s until {at:,} s, then {after:,.0f}/s "
                         f"({_step_reason(req.profile, j['rw'], after < before)})")
    credited = f", burst credits {burst_credits.text(credit)}" if credit != 1.0 and req.profile.kind == "cloud" else ""
    show(out, TableData(columns, cells, f"iobench on {req.name} ({req.profile.name}), {runtime:g} s each, files of {size}"
                        f"{credited}",
                        3), ("mean us", "%util", "device r/w_await ms", "p99 us", "mode"))
    for line in steps:
        out.print(line, markup=False)
    if json_path:
        jsonout.write(json_path, {"kind": "iobench", "device": {"name": req.name, "profile": req.profile.name},
                                  "credits": credit,
                                  "results": rows})
