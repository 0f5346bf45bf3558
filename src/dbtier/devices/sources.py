"""Where the packaged profiles' figures come from (devices/sources.toml): each profile's [basis] gives,
per parameter, its reason with the ids of the sources it rests on ([D], [EBS]), or [est] and the
reasoning of an engineering estimate. `dbtier devices show` prints both."""

from __future__ import annotations

import re
import tomllib
from functools import cache
from importlib import resources

IDS = re.compile(r"\[([A-Za-z]+)\]")
ESTIMATE = "est"


@cache
def registry() -> dict[str, dict]:
    return tomllib.loads((resources.files("dbtier.devices") / "sources.toml").read_text())


def ids(text: str) -> list[str]:
    """The sources a basis names, in order, without [est]."""
    out = []
    for i in IDS.findall(text or ""):
        if i != ESTIMATE and i not in out:
            out.append(i)
    return out


def is_estimate(text: str | None) -> bool:
    return text is not None and f"[{ESTIMATE}]" in text


def cited(basis: dict[str, str], provision: dict | None = None) -> dict[str, dict]:
    """The registry's entries a profile cites (its basis, its provisioning's sources), in order."""
    found: list[str] = []
    for text in basis.values():
        found += [i for i in ids(text) if i not in found]
    for e in (provision or {}).values():
        found += [i for i in [e.source] if i and i not in found]
    reg = registry()
    return {i: reg[i] for i in found if i in reg}
