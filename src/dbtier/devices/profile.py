"""Device profiles: named parameter sets (packaged TOML, or a file of the user's own), checked
against the C option table so a profile can only say what the model understands."""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from dbtier.devices import native, provision
from dbtier.errors import UserError

PROFILE_SUFFIX = ".toml"


@dataclass(frozen=True)
class Profile:
    name: str
    kind: str
    summary: str
    params: dict[str, float] = field(default_factory=dict)  # every parameter of the kind, defaults filled
    source: str = ""  # where it was loaded from
    era: str = ""  # when such devices were sold: one of ERAS (empty for a user's own)
    provision: dict | None = None  # what a buyer may set (key -> provision.Entry); None: any parameter
    provisioned: str = ""  # what the spec's braces set, as said to a user ("iops=6,000 IOPS")
    basis: dict = field(default_factory=dict)  # parameter -> where its figure comes from (devices/sources.py)

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


#: The keys a profile file may have at its top level (its parameters go under [params]).
TOP_KEYS = ("name", "kind", "summary", "era", "params", "basis", "provision")
#: When a profile's device was current, oldest first, with what the era holds: `dbtier devices`
#: groups by these.
ERAS = {"1990s": "the drives DiskSim's authors measured, for validating the disk model",
        "2002-2012": "the devices of the articles' experiments",
        "today": "what a DBA chooses between now: NVMe, cloud volumes"}
#: A profile file larger than this is not a profile (a hand-written one is a few hundred bytes).
MAX_PROFILE_BYTES = 1 << 20


def _text_field(doc: dict, key: str, source: str, default: str) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str):
        raise UserError(f"{source}: '{key}' must be a string in quotes, not {value!r}")
    if any(not ch.isprintable() for ch in value) or len(value) > 500:
        raise UserError(f"{source}: '{key}' must be one line of at most 500 printable characters")
    return value


def parse(text: str, source: str) -> Profile:
    """Validates a profile's TOML text; every problem is a UserError naming the source."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    table = native.param_table()
    for key in doc:
        if key not in TOP_KEYS:
            hint = _suggest(key, list(TOP_KEYS))
            where = " (device parameters go under [params])" if not hint else ""
            raise UserError(f"{source}: unknown key '{key}'{hint}{where}; a profile has {', '.join(TOP_KEYS)}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or kind not in table:
        raise UserError(f"{source}: 'kind' must be one of {', '.join(sorted(table))}, not {kind!r}")
    name = _text_field(doc, "name", source, "") or Path(source).stem
    summary = _text_field(doc, "summary", source, "")
    era = _text_field(doc, "era", source, "")
    if era and era not in ERAS:
        raise UserError(f"{source}: 'era' must be one of {', '.join(ERAS)}, not {era!r}")
    given = doc.get("params", {})
    if not isinstance(given, dict):
        raise UserError(f"{source}: [params] must be a table")
    params = check_params(kind, given, source)
    kind_params = {p["name"] for p in table[kind]["params"]}
    entries = provision.table(doc.get("provision"), kind_params, source)
    basis = doc.get("basis", {})
    if not isinstance(basis, dict):
        raise UserError(f"{source}: [basis] must be a table: each parameter's source, as text")
    for key, text in basis.items():
        if key not in given:
            raise UserError(f"{source}: [basis] gives {key}, which [params] does not set")
        if not isinstance(text, str) or len(text) > 400 or any(not ch.isprintable() for ch in text):
            raise UserError(f"{source}: [basis] {key} must be one line of at most 400 printable characters")
    return Profile(name=name, kind=kind, summary=summary, params=params, source=source, era=era, provision=entries,
                   basis=dict(basis))


#: A cloud volume's burst rates, each with its baseline and the credit bucket it spends
#: (devmodel.c's cloud_params): the model ignores a burst it cannot make sense of, so it is refused.
CLOUD_BURSTS = (("burst_iops", "iops", "burst_credits"), ("burst_mb_s", "mb_s", "burst_mb"))


def check_params(kind: str, given: dict, source: str) -> dict[str, float]:
    """A kind's parameters as the model takes them (every one, defaults filled), each given one a
    known, finite number within the C table's range; the pairs that go together, together."""
    defs = {p["name"]: p for p in native.param_table()[kind]["params"]}
    params = {n: float(d["default"]) for n, d in defs.items()}
    for key, value in given.items():
        if key not in defs:
            known = f" ({kind} devices have none)" if not defs else ""
            raise UserError(f"{source}: {kind} devices have no parameter '{key}'{_suggest(str(key), list(defs))}{known}")
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)):
            raise UserError(f"{source}: {key} must be a number, not {value!r}"[:300])
        d = defs[key]
        if not math.isfinite(value):
            raise UserError(f"{source}: {key} = {value} is not a number; give one in {d['min']:g}..{d['max']:g} "
                            f"{d['unit']}")
        if not d["min"] <= value <= d["max"]:
            raise UserError(f"{source}: {key} = {value} is outside {d['min']:g}..{d['max']:g} {d['unit']}")
        params[key] = float(value)
    if kind == "cloud":
        for burst, base, credits in CLOUD_BURSTS:
            b, r, c = params[burst], params[base], params[credits]
            if b and b <= r:
                raise UserError(f"{source}: {burst} = {b:g} is not above {base} = {r:g}; a burst is faster than the "
                                f"baseline (or {burst} = 0 for none)")
            if b and not c:
                raise UserError(f"{source}: {burst} = {b:g} without {credits}; give the credits the burst spends, or "
                                f"{burst} = 0 for no burst")
            if c and not b:
                raise UserError(f"{source}: {credits} = {c:g} without {burst}; give the rate the credits buy, or "
                                f"{credits} = 0")
    return params


def read_profile_file(path: Path) -> str:
    """A profile file's text: a regular file (not a folder, a pipe or a device), small, UTF-8."""
    try:
        st = path.stat()
    except OSError as exc:
        raise UserError(f"cannot read profile {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"profile {path} is a folder; give a .toml file (or a name from 'dbtier devices')")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"profile {path} is not a regular file; give a .toml file")
    if st.st_size > MAX_PROFILE_BYTES:
        raise UserError(f"profile {path} is {st.st_size:,} bytes, too large for a profile (a few hundred bytes)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read profile {path}: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"profile {path} is not UTF-8 text (byte {exc.start}); a profile is a TOML text file") from None


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
                   params={**base.params, "members": float(n), "stripe_kib": stripe_kib}, source=base.source,
                   era=base.era, basis={**base.basis, "members": f"a RAID 0 of {n}, as the spec says",
                                        "stripe_kib": "as the spec says" if m.group("stripe") else
                                        base.basis.get("stripe_kib", "the kind's default")},
                   provision=base.provision, provisioned=base.provisioned)


def load(spec: str) -> Profile:
    """A profile by packaged name, NxNAME[@STRIPE] for a RAID 0 of N of them, or a path to a .toml file,
    with what is provisioned in braces (NAME{iops=6000}: devices/provision.py)."""
    packaged = _packaged()
    m = _ARRAY.match(spec)
    if m and spec not in packaged and "{" in m.group("member"):  # 2xebs-gp3{iops=6000}: provisioned members
        return _striped(m, spec)
    base, given = provision.split(spec)
    if given is None:
        return _load(spec)
    m = _ARRAY.match(base)
    if m and base not in packaged:
        raise UserError(f"device profile {spec!r}: give each member's settings, before the stripe: "
                        f"{m.group('n')}x{m.group('member')}{{...}}" + (f"@{m.group('stripe')}{m.group('unit') or ''}"
                                                                        if m.group("stripe") else ""))
    prof = _load(base)
    if prof.kind == "real":
        raise UserError(f"device profile {spec!r}: a real folder has no parameters to set")
    params, shown = provision.apply(prof.name, prof.kind, prof.params, prof.provision, given, spec)
    params = check_params(prof.kind, params, f"device profile {spec!r}")
    basis = {**prof.basis, **{k: f"provisioned: {k}={v:g} in braces" for k, v in given.items()}}
    return Profile(name=spec, kind=prof.kind, summary=f"{prof.summary}; provisioned: {shown}", params=params,
                   source=prof.source, era=prof.era, provision=prof.provision, provisioned=shown, basis=basis)


def _load(spec: str) -> Profile:
    packaged = _packaged()
    m = _ARRAY.match(spec)
    if m and spec not in packaged and m.group("member") in packaged:
        return _striped(m, spec)
    if spec in packaged:
        return parse(packaged[spec].read_text(), f"profile {spec}")
    path = Path(spec)
    try:
        exists = path.suffix == PROFILE_SUFFIX or os.path.lexists(path)
    except (OSError, ValueError):  # a name too long for a path, or holding a NUL
        exists = False
    if exists:
        return parse(read_profile_file(path), str(path))
    shown = spec if len(spec) <= 100 else spec[:97] + "..."
    if "=" in spec:  # NAME{a=1,b=2} unquoted: the shell made it NAMEa=1 and NAMEb=2
        raise UserError(f"unknown device profile '{shown}': settings go in braces, PROFILE{{key=value,...}}; "
                        + provision.QUOTE_HINT)
    raise UserError(
        f"unknown device profile '{shown}'{_suggest(spec, list(packaged))}; "
        f"'dbtier devices' lists them, NxNAME stripes N of one (6xhdd-sata-750), or give a path to a .toml profile"
    )
