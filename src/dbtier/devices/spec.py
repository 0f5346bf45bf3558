"""The one `--device` grammar of every command: NAME=PROFILE[:DIR].

NAME names the device (in --place, in reports); PROFILE is a profile from `dbtier devices`, NxPROFILE
for a RAID 0, a .toml file of your own, or `real` for a folder on a real disk, with what is provisioned
in braces (`ebs-gp3{iops=6000,mb_s=250}`: devices/provision.py); DIR is a folder of yours
the device's files go into (without it, the command makes one in its workspace; `exec` needs it,
since the program must know where its files are).

`dbtier exec` used to read [NAME:]DIR=PROFILE; that form is still accepted there, for one release,
with a note saying how to write it now."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dbtier.devices.profile import Profile, load
from dbtier.errors import UserError

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,30}$")
EXAMPLE = "--device hdd=hdd-sata-7200 (or hdd=hdd-sata-7200:/srv/disk on a folder of yours)"


@dataclass(frozen=True)
class DeviceSpec:
    """A device as the user gave it: its folder may still be to be made."""
    name: str
    profile: Profile
    directory: Path | None = None  # resolved, absolute; None: the command makes one
    legacy: bool = False           # written in exec's old DIR=PROFILE form
    spec: str = ""                 # the profile as written


def _folder(text: str, given: str) -> Path:
    if not given.strip():
        raise UserError(f"--device {text!r}: nothing after the ':'; give the folder, NAME=PROFILE:DIR, or none")
    folder = Path(given).expanduser()
    if not folder.is_dir():
        raise UserError(f"--device {text!r}: {given} is not a directory; create it first")
    return folder.resolve()


def _legacy(text: str, taken: list[str]) -> DeviceSpec:
    """exec's old [NAME:]DIR=PROFILE; the name defaults to the folder's base name."""
    where, _, spec = text.rpartition("=")
    name, sep, directory = where.partition(":")
    if not sep:
        name, directory = "", where
    if not directory or not spec:
        raise UserError(f"--device {text!r}: expected NAME=PROFILE:DIR, for example ssd=ssd-sata-mlc:/dev/shm/ssd")
    folder = _folder(text, directory)
    name = name or re.sub(r"[^A-Za-z0-9_-]", "_", folder.name or "root")
    if not name[0].isalpha():
        name = "d" + name
    name = name[:31]
    if not NAME.match(name):
        raise UserError(f"--device {text!r}: device name {name!r} must be a letter then letters, digits, - or _")
    base, n = name, 2
    while name in taken:
        name, n = f"{base[:28]}{n}", n + 1
    return DeviceSpec(name, load(spec), folder, legacy=True, spec=spec)


def parse(text: str, taken: list[str], legacy_ok: bool = False) -> DeviceSpec:
    name, sep, rest = text.partition("=")
    name = name.strip()
    if legacy_ok and sep and not NAME.match(name):  # a path on the left: exec's old form
        return _legacy(text, taken)
    if not sep or not name or not rest.strip():
        raise UserError(f"--device {text!r}: expected NAME=PROFILE[:DIR], for example {EXAMPLE}")
    if not NAME.match(name):
        raise UserError(f"--device {text!r}: a device name is a letter, then up to 30 letters, digits, - or _")
    if name in taken:
        raise UserError(f"--device {text!r}: there is already a device named {name}")
    spec, colon, directory = rest.partition(":")
    if legacy_ok and not colon and Path(name).is_dir():  # exec's old DIR=PROFILE, DIR a bare relative name
        return _legacy(text, taken)
    folder = _folder(text, directory) if colon else None
    return DeviceSpec(name, load(spec.strip()), folder, spec=spec.strip())


def parse_all(texts, need_dir: bool = False, legacy_ok: bool = False) -> list[DeviceSpec]:
    """Every --device given, in order (the first is the default for everything). need_dir: each must
    name its folder (exec); legacy_ok: exec's old form is read too."""
    if not texts:
        raise UserError(f"give at least one --device NAME=PROFILE[:DIR], for example {EXAMPLE[9:]}; 'dbtier devices' "
                        "lists the profiles")
    out: list[DeviceSpec] = []
    for text in texts:
        dev = parse(text, [d.name for d in out], legacy_ok)
        if need_dir and dev.directory is None:
            raise UserError(f"--device {text!r}: give the folder the program's files are in, NAME=PROFILE:DIR "
                            f"(for example {dev.name}={dev.profile.name}:/dev/shm/{dev.name})")
        out.append(dev)
    seen: dict[Path, str] = {}
    for d in out:
        if d.directory is not None and d.directory in seen:
            raise UserError(f"devices {seen[d.directory]} and {d.name} are the same directory {d.directory}")
        if d.directory is not None:
            seen[d.directory] = d.name
    return out


def legacy_note(devices: list[DeviceSpec]) -> str | None:
    old = [d for d in devices if d.legacy]
    if not old:
        return None
    now = " ".join(f"-d {d.name}={d.spec}:{d.directory}" for d in old)
    return f"note: --device DIR=PROFILE is the old form, read for one more release; write it as {now}"
