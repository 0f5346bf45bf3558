"""One workload on several layouts, its data loaded once.

A configuration is a name, its devices and where things go on them:

    --config all-hdd:hdd=hdd-sata-7200
    --config indexes-on-ssd:hdd=hdd-sata-7200,ssd=ssd-sata-mlc:data=hdd,indexes=ssd

or, in a TOML experiment file (where a device may have a folder of its own):

    [[config]]
    name = "indexes-on-ssd"
    devices = ["hdd=hdd-sata-7200", "ssd=ssd-sata-mlc"]
    place = "data=hdd,indexes=ssd"

The workload's setup runs once, in a cluster of its own (the emulation paused). For each
configuration that cluster is copied onto the configuration's devices (a copy, not a load), its
objects moved where the placement says, and the workload measured as `dbtier run` measures it."""

from __future__ import annotations

import difflib
import re
import statistics
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dbtier import engines
from dbtier.devices import provision
from dbtier.devices.spec import DeviceSpec, parse_all
from dbtier.engines.base import SEED_DEVICE
from dbtier.errors import UserError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")


@dataclass
class Config:
    name: str
    devices: list[DeviceSpec]
    placement: object  # the engine's Placement

    def describe(self) -> dict:
        return {"name": self.name, "devices": [{"name": d.name, "profile": d.profile.name} for d in self.devices],
                "placement": self.placement.describe()}


def _config(name: str, devices: list[str], place: list[str], where: str, engine: str = "postgres") -> Config:
    if not _NAME.match(name):
        raise UserError(f"{where}: a configuration's name is letters, digits, '.', '-' or '_' (up to 41), not {name!r}")
    specs = parse_all(devices)
    if any(d.name == SEED_DEVICE for d in specs):
        raise UserError(f"{where}: the device name {SEED_DEVICE} is dbtier's own; choose another")
    return Config(name, specs, engines.get(engine).parse_placement(place, [d.name for d in specs]))


def parse_option(text: str, engine: str = "postgres") -> Config:
    """--config NAME:DEVICES[:PLACEMENT], devices and placement comma-separated."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise UserError(f"--config {text!r}: expected NAME:DEVICES[:PLACEMENT], for example "
                        "idx-ssd:hdd=hdd-sata-7200,ssd=ssd-sata-mlc:data=hdd,indexes=ssd (a device on a folder of "
                        "yours goes in an --experiment file)")
    name, devices = parts[0].strip(), provision.split_list(parts[1])
    return _config(name, devices, [parts[2]] if len(parts) == 3 else [], f"--config {text!r}", engine)


def parse_file(path: Path, engine: str = "postgres") -> list[Config]:
    """An experiment file's [[config]] tables."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"--experiment {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"--experiment {path}: not valid TOML: {exc}") from None
    unknown = set(doc) - {"config"}
    if unknown:
        raise UserError(f"--experiment {path}: unknown key {sorted(unknown)[0]!r}; an experiment has [[config]] tables")
    configs = doc.get("config")
    if not isinstance(configs, list) or not configs:
        raise UserError(f"--experiment {path}: no [[config]] table; give one per layout to compare")
    out = []
    for i, c in enumerate(configs, 1):
        where = f"--experiment {path}, config {i}"
        if not isinstance(c, dict):
            raise UserError(f"{where}: a [[config]] is a table")
        extra = set(c) - {"name", "devices", "place"}
        if extra:
            word = sorted(extra)[0]
            hint = difflib.get_close_matches(word, ["name", "devices", "place"], 1)
            raise UserError(f"{where}: unknown key {word!r}" + (f"; did you mean {hint[0]!r}?" if hint else ""))
        name, devices, place = c.get("name"), c.get("devices"), c.get("place", [])
        if not isinstance(name, str):
            raise UserError(f"{where}: 'name' is a string")
        if not isinstance(devices, list) or not devices or not all(isinstance(d, str) for d in devices):
            raise UserError(f"{where}: 'devices' is a list of NAME=PROFILE[:DIR] strings")
        if isinstance(place, str):
            place = [place]
        if not isinstance(place, list) or not all(isinstance(p, str) for p in place):
            raise UserError(f"{where}: 'place' is a KEY=DEVICE,... string (or a list of them)")
        out.append(_config(name, devices, place, where, engine))
    return out


def configurations(options: tuple[str, ...], experiment: Path | None, engine: str = "postgres") -> list[Config]:
    """The layouts to compare, each placement in the roles of the engine they run on."""
    configs = [parse_option(t, engine) for t in options] + (parse_file(experiment, engine) if experiment else [])
    if len(configs) < 2:
        raise UserError("compare needs at least two configurations: repeat --config NAME:DEVICES[:PLACEMENT], or "
                        "give an --experiment file")
    names = [c.name for c in configs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"configuration {twice[0]!r} is named twice; name each once")
    return configs


def seed_lab(options, say: Callable[[str], None], engine: str = "postgres"):
    """The lab the setup runs in once: one device, every object on it (the engine's seed lab)."""
    return engines.get(engine).seed_lab(options, say)


def overall(result: dict) -> dict:
    """A configuration's result as one row: a workload of several phases has its elapsed and CPU summed
    over them, and its devices and top waits from its longest phase (named in `shown_phase`)."""
    if "devices" in result or not result.get("phases"):
        return result
    longest = max(result["phases"], key=lambda ph: ph["elapsed_s"])
    return {**result, "devices": longest["devices"], "top_events": longest.get("top_events", []),
            "rates": result.get("rates", {}), "shown_phase": longest["phase"]}


def headline(result: dict) -> tuple[str, float, bool]:
    """The figure a configuration is judged by: tps if the workload has it (higher is better), else
    the elapsed time (lower is better)."""
    metrics = result.get("metrics") or {}
    if "tps" in metrics:
        return "tps", float(metrics["tps"]), True
    return "elapsed s", float(result["elapsed_s"]), False


def speedups(results: list[dict]) -> list[float]:
    """Each configuration against the first: how many times faster."""
    what, first, higher = headline(results[0])
    out = []
    for r in results:
        value = headline(r)[1]
        out.append((value / first if higher else first / value) if first and value else float("nan"))
    return out


def spread(runs: list[list[dict]]) -> list[dict]:
    """Each layout's figure over its repeated runs: median, least and most; and, for every layout after
    the first, whether its range overlaps the first's (then no difference was measured)."""
    out = []
    for i, results in enumerate(runs):
        what, _v, higher = headline(results[0])
        values = sorted(headline(r)[1] for r in results)
        row = {"figure": what, "higher": higher, "runs": len(values), "median": statistics.median(values),
               "min": values[0], "max": values[-1]}
        if i:
            first = out[0]
            row["within_first"] = row["min"] <= first["max"] and first["min"] <= row["max"]
        out.append(row)
    return out
