"""One experiment, typed: what to run and on what. The command line, a TOML file, a run directory
(its `experiment.toml`) and the Python API all build one; the runner takes nothing else.

    exp = Experiment.from_options("random-index", device=["hdd=hdd-sata-7200"], rows=300, cache="64MB")
    exp = Experiment.from_toml(Path("my.toml"))        # keys are the command line's option names
    exp = Experiment.load(run_dir)                     # what a run directory was made by
    text = exp.to_toml()                               # the one writer

Sizes are bytes and factors are numbers once read: the option text (`"32MB"`) is parsed here, once.
A TOML file's keys are the options' names (`device`, `place`, `cache`, `io-mode`, `page-cache`,
`cache-state`, `cpu-scale`, `scale-model`, `credits`, `set`, `settings-from`, `pg-bin`, `mariadb-bin`, `trace`, and the workload's own, as
`rows`); `set` is a table of settings. Relative paths in a file are read from the file's folder."""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dbtier import tomlfile, units
from dbtier.devices import credits as burst_credits
from dbtier.devices.spec import DeviceSpec, parse_all
from dbtier.errors import UserError
from dbtier import engines
from dbtier.experiments.options import EXPERIMENT_KEYS
from dbtier.workloads import registry
from dbtier.workloads.base import CACHE_STATES, Workload

EXPERIMENT_FILE = "experiment.toml"
DEFAULT_CACHE = 32 << 20
#: the experiment's own keys (the options' names, experiments/options.py); a workload's are the others
KEYS = EXPERIMENT_KEYS
MAX_FILE_BYTES = 1 << 20


def _key(name: str) -> str:
    return name.replace("_", "-")


@dataclass(frozen=True)
class Experiment:
    workload: str
    devices: tuple[DeviceSpec, ...]
    placement: Any                                        # the engine's Placement (its roles, objects)
    params: dict[str, Any] = field(default_factory=dict)  # the workload's own, by key (rows=300)
    cache_bytes: int = DEFAULT_CACHE                      # shared_buffers
    page_cache_bytes: int | None = None                   # the emulated OS page cache; None: 3 x cache
    io_mode: str = "direct"
    cache_state: str = "cold"
    cpu_scale: float = 1.0
    scale_factor: float = 1.0                             # --scale-model F: the sizes above are the system's
    credits: float = 1.0                                  # --credits: a capped volume's burst bucket, 0..1, at start
    settings: dict[str, str] = field(default_factory=dict)  # --set NAME=VALUE, checked
    pg_bin: Path | None = None
    mariadb_bin: Path | None = None                       # --engine mariadb: another install
    trace: bool = False
    engine: str = "postgres"
    settings_from: Path | None = None                     # production's snapshot (--settings-from)
    production: dict | None = None                        # what it holds and applies (engine.settings_from)

    # -- readers --------------------------------------------------------------------------------

    @classmethod
    def from_options(cls, workload: str, base: Path | None = None, **options) -> "Experiment":
        """From the command line's options by name (`device`, `place`, `cache`, `io_mode`, ..., and the
        workload's own): each as its option takes it, as text or already typed (a list of `DeviceSpec`s,
        a `Placement`, a size in bytes). `base`: the folder relative paths are read from (default: here)."""
        known = {p.key: p for p in registry.get(workload).params}
        given = {k.replace("-", "_"): v for k, v in options.items() if v is not None}
        own = {k: v for k, v in given.items() if k.replace("_", "-") not in KEYS}
        for key in own:
            if key not in known:
                hint = difflib.get_close_matches(key, known, 1)
                raise UserError(f"{workload} has no option --{_key(key)}" + (f"; did you mean --{_key(hint[0])}?" if hint
                                                                             else "")
                                + f" (its own: {', '.join('--' + p.name for p in known.values()) or 'none'})")
        engine = engines.get(given.get("engine", "postgres"))
        devices = _devices(given.get("device", ()), base)
        places = given.get("place", ())
        if hasattr(places, "roles"):  # a Placement already
            placement = places
        else:
            placement = engine.parse_placement([places] if isinstance(places, str) else list(places),
                                               [d.name for d in devices])
        sets = given.get("set", {})
        sets = engine.parse_settings([f"{k}={v}" for k, v in sets.items()] if isinstance(sets, dict)
                                     else [sets] if isinstance(sets, str) else list(sets))
        settings_from = _path(given["settings_from"], base) if given.get("settings_from") else None
        production = engine.settings_from(settings_from) if settings_from else None
        if "cache" not in given and production and production["cache_bytes"]:
            given["cache"] = production["cache_bytes"]  # production's shared_buffers, unless --cache is given
        cache = _size(given.get("cache", DEFAULT_CACHE), "--cache")
        page_cache = _size(given["page_cache"], "--page-cache") if given.get("page_cache") else None
        if "io_mode" not in given and production:  # production's I/O mode (MariaDB's), unless --io-mode is given
            if production.get("io_mode_refused"):
                raise UserError(f"--settings-from {settings_from}: {production['io_mode_refused']}")
            if production.get("io_mode"):
                given["io_mode"] = production["io_mode"]
        io_mode = given.get("io_mode", engine.default_io_mode)
        if io_mode not in engine.io_modes:
            raise UserError(f"--io-mode {io_mode}: choose one of {', '.join(engine.io_modes)}")
        cache_state = given.get("cache_state", "cold")
        if cache_state not in CACHE_STATES:
            raise UserError(f"--cache-state {cache_state}: choose one of {', '.join(CACHE_STATES)}")
        pg_bin, mariadb_bin = given.get("pg_bin"), given.get("mariadb_bin")
        return cls(workload=workload, devices=tuple(devices), placement=placement,
                   params={k: _param(known[k], v, base) for k, v in own.items()},
                   cache_bytes=cache, page_cache_bytes=page_cache, io_mode=io_mode, cache_state=cache_state,
                   cpu_scale=_number(given.get("cpu_scale", 1.0), "--cpu-scale"),
                   scale_factor=_number(given.get("scale_model", 1.0), "--scale-model"),
                   credits=burst_credits.parse(given.get("credits", "full")),
                   settings=sets, pg_bin=_path(pg_bin, base) if pg_bin else None,
                   mariadb_bin=_path(mariadb_bin, base) if mariadb_bin else None, trace=bool(given.get("trace")),
                   engine=engine.name, settings_from=settings_from, production=production)

    @classmethod
    def from_dict(cls, doc: dict, where: str, base: Path | None = None) -> "Experiment":
        """From a TOML document's table (`where` names it in messages)."""
        if not isinstance(doc.get("workload"), str):
            raise UserError(f"{where}: give the workload, e.g. workload = \"random-index\"")
        workload = doc["workload"]
        for key, value in doc.items():
            if key in ("set",) and not isinstance(value, dict):
                raise UserError(f"{where}: set must be a table of settings ([set] NAME = VALUE)")
            if isinstance(value, dict) and key != "set":
                raise UserError(f"{where}: {key} is a table; give it a value")
        for key in ("cache", "page-cache"):  # as on the command line: a size has its unit
            if isinstance(doc.get(key), (int, float)) and not isinstance(doc.get(key), bool):
                raise UserError(f"{where}: --{key} {doc[key]}: give a size with its unit, e.g. \"{doc[key]}MB\"")
        options = {k: v for k, v in doc.items() if k != "workload"}
        if workload == "sql" and "repeat" in options and "passes" not in options:
            options["passes"] = options.pop("repeat")  # its name in experiment files written before 2026-11-27
        if "set" in options:
            options["set"] = {str(k): _setting_text(v) for k, v in options["set"].items()}
        try:
            return cls.from_options(workload, base=base, **options)
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None

    @classmethod
    def from_toml(cls, path: Path) -> "Experiment":
        path = Path(path).expanduser()
        doc = tomlfile.read(path, f"--experiment {path}", "an experiment is a TOML file", MAX_FILE_BYTES)
        return cls.from_dict(doc, str(path), base=path.resolve().parent)

    @classmethod
    def load(cls, run_dir: Path) -> "Experiment":
        """The experiment a run directory was made by."""
        path = Path(run_dir) / EXPERIMENT_FILE
        if not path.is_file():
            raise UserError(f"{run_dir}: no {EXPERIMENT_FILE} in it; give a run directory 'dbtier run' wrote")
        return cls.from_toml(path)

    # -- what it runs ---------------------------------------------------------------------------

    def make_workload(self) -> Workload:
        return registry.get(self.workload)(**self.params)

    def with_options(self, **changes) -> "Experiment":
        return replace(self, **changes)

    # -- the one writer ---------------------------------------------------------------------------

    def to_toml(self) -> str:
        lines = ["# A dbtier experiment: `dbtier run --experiment FILE` runs it again.",
                 f"workload = {_toml(self.workload)}", f"engine = {_toml(self.engine)}",
                 f"device = {_toml([_device_text(d) for d in self.devices])}",
                 f"place = {_toml(_placement_text(self.placement))}",
                 f"cache = {_toml(units.size_text(self.cache_bytes))}"]
        if self.page_cache_bytes is not None:
            lines.append(f"page-cache = {_toml(units.size_text(self.page_cache_bytes))}")
        lines += [f"io-mode = {_toml(self.io_mode)}", f"cache-state = {_toml(self.cache_state)}",
                  f"cpu-scale = {_toml(self.cpu_scale)}", f"scale-model = {_toml(self.scale_factor)}",
                  f"credits = {_toml(burst_credits.text(self.credits))}", f"trace = {_toml(self.trace)}"]
        if self.pg_bin is not None:
            lines.append(f"pg-bin = {_toml(str(self.pg_bin))}")
        if self.mariadb_bin is not None:
            lines.append(f"mariadb-bin = {_toml(str(self.mariadb_bin))}")
        if self.settings_from is not None:
            lines.append(f"settings-from = {_toml(str(self.settings_from))}")
        workload = self.make_workload()
        for p in workload.params:
            value = workload.p[p.key]
            if value is None:
                continue
            if p.type is Path:
                value = [str(v) for v in value] if isinstance(value, tuple) else str(value)
            elif isinstance(value, tuple):
                value = list(value)
            lines.append(f"{_toml_key(p.name)} = {_toml(value)}")
        if self.settings:
            lines.append("\n[set]")
            lines += [f"{_toml_key(k)} = {_toml(v)}" for k, v in self.settings.items()]
        return "\n".join(lines) + "\n"


# -- reading values -------------------------------------------------------------------------------


def _path(value, base: Path | None) -> Path:
    path = Path(os.path.expanduser(str(value)))
    return Path(os.path.abspath(path if path.is_absolute() or base is None else base / path))


def _devices(value, base: Path | None) -> list[DeviceSpec]:
    if isinstance(value, DeviceSpec):
        value = [value]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise UserError("--device: give devices as NAME=PROFILE[:DIR], a list for several")
    if value and all(isinstance(d, DeviceSpec) for d in value):
        return list(value)
    texts = []
    for d in value:
        if not isinstance(d, str):
            raise UserError(f"--device {d!r}: expected NAME=PROFILE[:DIR]")
        name, sep, rest = d.partition("=")
        profile, colon, folder = rest.partition(":")
        if sep and profile.strip().endswith(".toml"):  # a profile file of one's own: found from anywhere later
            profile = str(_path(profile.strip(), base))
        if sep and colon and folder.strip():
            folder = str(_path(folder.strip(), base))
        texts.append(f"{name}={profile}{colon}{folder}" if sep else d)
    return parse_all(texts)


def _size(value, what: str) -> int:
    if isinstance(value, bool):
        raise UserError(f"{what} {value}: expected a size such as 32MB")
    if isinstance(value, int):
        if value <= 0:
            raise UserError(f"{what} {value}: give a size such as 32MB")
        return value
    return units.parse_option_size(str(value), what)


def _number(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{what} {value!r}: give a number") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise UserError(f"{what} {value!r}: give a number")
    return number


def _setting_text(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise UserError(f"set: {value!r} is not a setting's value (text or a number)")


def _param(p, value, base: Path | None):
    """One workload parameter from an option's value (text or typed)."""
    if p.multiple:
        items = value if isinstance(value, (list, tuple)) else [value]
        return tuple(_one(p, v, base) for v in items)
    return _one(p, value, base)


def _one(p, value, base: Path | None):
    what = f"--{p.name}"
    if p.type is bool:
        if not isinstance(value, bool):
            raise UserError(f"{what} {value!r}: true or false")
        return value
    if p.type is int:
        if isinstance(value, bool):
            raise UserError(f"{what} {value!r}: give a whole number")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise UserError(f"{what} {value!r}: give a whole number") from None
        if isinstance(value, float) and number != value:
            raise UserError(f"{what} {value!r}: give a whole number")
        return number
    if p.type is float:
        return _number(value, what)
    if p.type is Path:
        if not isinstance(value, (str, Path)):
            raise UserError(f"{what} {value!r}: give a file's path")
        text = str(value)
        if p.key == "file" and "@" in text:  # pgbench's FILE@WEIGHT
            name, _, weight = text.rpartition("@")
            return Path(f"{_path(name, base)}@{weight}")
        return _path(text, base)
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # speed = 4, as the option takes "4"
        return f"{value:g}"
    if not isinstance(value, str):
        raise UserError(f"{what} {value!r}: give it as text")
    return value


# -- writing values -------------------------------------------------------------------------------


def _device_text(d: DeviceSpec) -> str:
    return f"{d.name}={d.spec or d.profile.name}" + (f":{d.directory}" if d.directory is not None else "")


def _placement_text(p) -> str:
    return ",".join([f"{r}={d}" for r, d in p.roles.items()] + [f"{k}={v}" for k, v in p.objects.items()])


def _toml_key(name: str) -> str:
    return name if all(c.isalnum() or c in "-_" for c in name) else _toml(name)


def _toml(value) -> str:
    """A TOML value (strings in basic quotes, escaped as TOML says)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "nan"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    text = str(value)
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
