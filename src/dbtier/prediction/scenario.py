"""The question a prediction answers: which devices (profiles swapped or added with -d), where each
object goes (--place, read as `dbtier run --place` reads it: a whole placement, whose unnamed roles
follow `data`, and `data` the first device), the page cache's size, the server's CPU speed. Without
--place every file stays where it was. What a replay cannot change is refused, with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbtier.devices import credits as burst_credits
from dbtier.devices import native
from dbtier.devices import profile as profiles
from dbtier.devices import spec as device_spec
from dbtier.devices.profile import Profile
from dbtier.experiments.scale_model import ScaleModel
from dbtier.units import parse_option_size
from dbtier.errors import UserError
from dbtier.measure.objects import owner
from dbtier import engines
from dbtier.devices.native import pg_path as classify
from dbtier.prediction.recording import Recording


@dataclass
class Scenario:
    devices: list[tuple[str, Profile]]        # in order: the recorded ones (maybe swapped), then added ones
    placement: Any = None                     # the engine's Placement; None: every file where the recorded run had it
    page_cache_bytes: int | None = None       # None: as recorded
    cpu_scale: float = 1.0
    credits: float | None = None              # capped volumes' burst credits at the start; None: as recorded

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.devices]


def objects_of(rec: Recording) -> dict[str, str]:
    """The tables, indexes and materialized views --place may name: every object the run's catalogs
    named, under the name the run's reports use."""
    kinds = {"table": "table", "index": "index", "matview": "materialized view"}
    out = {name: kinds[kind] for (_db, _node), (name, kind) in rec.names.items() if kind in kinds}
    for name, kind in list(out.items()):  # another database's objects: also by their own name, as run takes them
        if "." in name:
            out.setdefault(name.split(".", 1)[1], kind)
    for o in rec.result.get("objects", []):
        out.setdefault(o["object"], o["kind"])
    return out


def build(rec: Recording, device_texts: tuple[str, ...], place_texts: tuple[str, ...], page_cache: str | None,
          cpu_scale: float, credits: str | float | None = None) -> Scenario:
    devices = []
    for name, prof in rec.lab.devices:  # checked as a profile file's when the recording was read
        if prof.kind == "real":
            raise UserError(f"device {name} was a real device in the recorded run: its times are the host's "
                            "own, which a replay cannot take apart from the program's; record the run on a modelled "
                            "profile")
        devices.append((name, prof))
    # A run recorded under a scale model gave its sizes as its system's: so are the profiles and the
    # page cache asked of it here, divided by the same factor.
    scaled = ScaleModel(rec.lab.scale_factor)
    for text in device_texts:
        name, sep, spec = text.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or not name or not spec:
            raise UserError(f"-d {text!r}: expected NAME=PROFILE, for example -d ssd=nvme-gen4 (a device of the run "
                            "gets that profile; a new name adds a device)")
        if ":" in spec:
            raise UserError(f"-d {text!r}: a prediction makes no files, so a device takes no folder; give NAME=PROFILE")
        if not device_spec.NAME.match(name):
            raise UserError(f"-d {text!r}: a device name is a letter, then up to 30 letters, digits, - or _")
        prof = profiles.load(spec)
        if scaled.factor != 1.0:
            prof = scaled.profile(name, prof)
        if prof.kind == "real":
            raise UserError(f"-d {text!r}: a real device has no model to predict with; choose a modelled profile "
                            "('dbtier devices' lists them)")
        names = [n for n, _ in devices]
        if name in names:
            devices[names.index(name)] = (name, prof)
        elif len(devices) == native.lib().dbt_max_devices():
            raise UserError(f"-d {text!r}: the replay has room for {len(devices)} devices, and the run has that many "
                            "already; give one of them this profile instead (-d EXISTING=PROFILE)")
        else:
            devices.append((name, prof))
    scenario = Scenario(devices, cpu_scale=cpu_scale,
                        credits=None if credits is None else burst_credits.parse(credits))
    if not (cpu_scale > 0) or cpu_scale > 1000:
        raise UserError(f"--cpu-scale {cpu_scale}: give a factor above 0 (2 = a server twice as slow)")
    if place_texts:
        scenario.placement = engines.get(rec.lab.engine).parse_placement(list(place_texts), scenario.names)
        scenario.placement.check_objects(objects_of(rec), "the recorded run")
        roles, recorded = scenario.placement.roles, rec.lab.placement
        if rec.lab.engine == "mariadb" and roles["binlog"] != roles["data"] and recorded["binlog"] == recorded["data"]:
            raise UserError(f"--place binlog={roles['binlog']}: the recorded run kept no binary log (it is on when "
                            "binlog has a device of its own), so a replay has none to move; record the run with "
                            "--place binlog=DEVICE")
    if page_cache is not None:
        from dbtier.devices.pagecache import check_page_cache
        if rec.lab.io_mode == "direct":
            raise UserError("--page-cache: the recorded run used direct I/O, so no data file went through the page "
                            "cache and its size changes nothing; record a buffered run to ask this")
        pc_bytes = parse_option_size(page_cache, "--page-cache")
        if scaled.factor != 1.0:  # the system's page cache, divided before it is checked against this machine
            pc_bytes = int(scaled.page_cache(pc_bytes)) // 1024 * 1024
        scenario.page_cache_bytes = check_page_cache(pc_bytes)
    return scenario


def file_identities(rec: Recording, files) -> dict[int, tuple[str, str | None, str | None]]:
    """Each file's class (wal, temp, or a relation's), and for a relation the name --place knows it
    by and its kind: what a placement decides a file's device from. InnoDB's: its kind (table, system,
    log, undo, temp, binlog...) and object, as the run named them (engines/mariadb/measure.name_of)."""
    if rec.lab.engine == "mariadb":
        name_of = mariadb_names(rec)
        return {f: (kind, name, kind) for f in files for name, kind in [name_of(rec.files.get(f, ""))]}
    run_names = {}  # (database, relfilenode) -> the name the run's --place used, from where each object lay
    for o in rec.result.get("objects", []):
        parts = str(o.get("path") or "").split("/")
        if len(parts) >= 2 and parts[-1].isdigit() and parts[-2].isdigit():
            run_names[(int(parts[-2]), int(parts[-1]))] = o["object"]
    out = {}
    for f in files:
        info = classify(rec.files.get(f, ""))
        name, kind = None, None
        if info["class"] not in ("wal", "temp") and info["relfilenode"] is not None:
            db = 0 if info["tablespace"] == "pg_global" else info["database"]
            name, kind = rec.names.get((db, info["relfilenode"]), (None, None))
            name = run_names.get((db, info["relfilenode"]), name)
        out[f] = (info["class"], name, kind)
    return out


def file_devices(rec: Recording, scenario: Scenario, recorded: dict[int, int],
                 identities: dict[int, tuple[str, str | None, str | None]] | None = None) -> dict[int, int]:
    """Each file's device (an index into scenario.devices) in the predicted placement. recorded: each
    file's device in the recorded run (an index into the recorded devices, which keep their places).
    identities: file_identities of those files, if already known."""
    if scenario.placement is None:
        return dict(recorded)
    if identities is None:
        identities = file_identities(rec, recorded)
    index = {n: i for i, n in enumerate(scenario.names)}
    roles, objects = scenario.placement.roles, scenario.placement.objects
    if rec.lab.engine == "mariadb":
        return {f: index[scenario.placement.device_of_file(identities[f][0], identities[f][1])] for f in recorded}
    out = {}
    for f in recorded:
        cls, name, kind = identities[f]
        if cls in ("wal", "temp"):
            out[f] = index[roles[cls]]
            continue
        if kind == "toast" and name:
            name = owner(name)  # a table's TOAST (and its index) moves with the table
        if name is not None and name not in objects and "." in name:
            name = name.split(".", 1)[1]  # another database's object, as the run's --place names it
        if name in objects:
            out[f] = index[objects[name]]
        else:
            out[f] = index[roles["indexes" if kind == "index" else "data"]]
    return out


def mariadb_names(rec: Recording):
    """A MariaDB run's naming of its files (path -> (object, kind)), as its live run named them: its
    lab's database, its dumps in the data device's folder."""
    from dbtier.engines.mariadb.lab import DATABASE
    from dbtier.engines.mariadb.measure import name_of

    data = rec.lab.dirs.get(rec.lab.placement.get("data"))
    dumps = str(data / "dump") if data is not None else None
    return lambda path: name_of(path, DATABASE, dumps)
