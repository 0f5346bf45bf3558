"""Device profiles: named parameter sets (packaged TOML, or a file of the user's own), checked
against the C option table so a profile can only say what the model understands."""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from dbtier.devices import native
from dbtier.errors import UserError

PROFILE_SUFFIX = ".toml"


@dataclass(frozen=True)
class Profile:
    name: str
    kind: str
    summary: str
    params: dict[str, float] = field(default_factory=dict)  # every parameter of the kind, defaults filled
    source: str = ""  # where it was loaded from

    def map_params(self) -> str:
        """The parameters as the device map's key=value list."""
        return " ".join(f"{k}={v!r}" for k, v in self.params.items())

    def model(self) -> native.Model:
        return native.Model(self.kind, self.params)


def _packaged() -> dict[str, resources.abc.Traversable]:
    folder = resources.files("dbtier.devices") / "profiles"
    return {p.name[: -len(PROFILE_SUFFIX)]: p for p in folder.iterdir() if p.name.endswith(PROFILE_SUFFIX)}


def names() -> list[str]:
    return sorted(_packaged())


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def parse(text: str, source: str) -> Profile:
    """Validates a profile's TOML text; every problem is a UserError naming the source."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    table = native.param_table()
    kind = doc.get("kind")
    if kind not in table:
        raise UserError(f"{source}: 'kind' must be one of {', '.join(sorted(table))}, not {kind!r}")
    name = doc.get("name") or Path(source).stem
    defs = {p["name"]: p for p in table[kind]["params"]}
    params = {n: float(d["default"]) for n, d in defs.items()}
    given = doc.get("params", {})
    if not isinstance(given, dict):
        raise UserError(f"{source}: [params] must be a table")
    for key, value in given.items():
        if key not in defs:
            raise UserError(f"{source}: {kind} devices have no parameter '{key}'{_suggest(key, list(defs))}")
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)):
            raise UserError(f"{source}: {key} must be a number, not {value!r}")
        d = defs[key]
        if not d["min"] <= value <= d["max"]:
            raise UserError(f"{source}: {key} = {value} is outside {d['min']:g}..{d['max']:g} {d['unit']}")
        params[key] = float(value)
    return Profile(name=name, kind=kind, summary=doc.get("summary", ""), params=params, source=source)


_ARRAY = re.compile(r"^(?P<n>\d+)x(?P<member>[^@]+?)(?:@(?P<stripe>\d+)(?P<unit>[kKmM])?)?$")


def _striped(m: re.Match, spec: str) -> Profile:
    base = load(m.group("member"))
    n = int(m.group("n"))
    if base.kind == "real":
        raise UserError(f"device profile {spec!r}: a real folder cannot be striped; stripe emulated drives")
    limit = native.param_table()[base.kind]["params"]
    top = next(p["max"] for p in limit if p["name"] == "members")
    if not 2 <= n <= top:
        raise UserError(f"device profile {spec!r}: an array has 2 to {top:g} members, not {n}")
    stripe_kib = float(base.params.get("stripe_kib", 64))
    if m.group("stripe"):
        stripe_kib = float(m.group("stripe")) * (1024 if (m.group("unit") or "k").lower() == "m" else 1)
    if not 4 <= stripe_kib <= 65536:
        raise UserError(f"device profile {spec!r}: the stripe is 4k to 64m")
    return Profile(name=spec, kind=base.kind,
                   summary=f"RAID 0 of {n} x {base.name}, {stripe_kib:g} KiB stripes: {base.summary}",
                   params={**base.params, "members": float(n), "stripe_kib": stripe_kib}, source=base.source)


def load(spec: str) -> Profile:
    """A profile by packaged name, NxNAME[@STRIPE] for a RAID 0 of N of them, or a path to a .toml file."""
    packaged = _packaged()
    m = _ARRAY.match(spec)
    if m and spec not in packaged and m.group("member") in packaged:
        return _striped(m, spec)
    if spec in packaged:
        return parse(packaged[spec].read_text(), f"profile {spec}")
    path = Path(spec)
    if path.suffix == PROFILE_SUFFIX or path.exists():
        try:
            return parse(path.read_text(), str(path))
        except OSError as exc:
            raise UserError(f"cannot read profile {path}: {exc.strerror}") from None
    raise UserError(
        f"unknown device profile '{spec}'{_suggest(spec, list(packaged))}; "
        f"'dbtier devices' lists them, NxNAME stripes N of one (6xhdd-sata-750), or give a path to a .toml profile"
    )
