"""Priced catalogues of volumes: what each offer is (a device profile), how its monthly price is
made, where the prices come from and when they were read. Shipped as data (advisor/catalogs/*.toml);
a catalogue of your own adds offers or changes prices (`extends = "aws"`, then [[offer]] tables: an
offer of the same name replaces the shipped one).

An offer's price is a sum over what is provisioned, each in the vendor's unit (the profile's
[provision] table; a profile without one is priced by its model GB):

    price.capacity_gb = { month = 0.08 }               # per GiB-month
    price.iops = { month = 0.005, free = 3000 }        # per IOPS-month above what the volume includes
    price.iops = { tiers = [[0, 0.065], [32000, 0.0455]] }  # a rate per band, from each band's start
    price.capacity_gb = { once = 0.15, months = 60 }   # bought once, spread over its life
    price.volume = { month = 73.22 }                   # a fixed tier: per volume
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from dbtier.devices import profile as profiles
from dbtier.devices.profile import Profile
from dbtier.errors import UserError

SUFFIX = ".toml"
TOP_KEYS = ("name", "title", "region", "currency", "read", "sources", "offer", "extends", "note")
OFFER_KEYS = ("name", "profile", "summary", "source", "price", "roles", "unpriced")
PRICE_KEYS = ("month", "free", "tiers", "once", "months")
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Price:
    """One priced quantity: `month` per unit-month above `free`, or `tiers` of rates, or `once`
    spread over `months`."""
    month: float = 0.0
    free: float = 0.0
    tiers: tuple[tuple[float, float], ...] = ()
    once: float = 0.0
    months: float = 0.0

    def monthly(self, amount: float) -> float:
        if self.tiers:
            total = 0.0
            for i, (start, rate) in enumerate(self.tiers):
                end = self.tiers[i + 1][0] if i + 1 < len(self.tiers) else math.inf
                total += rate * max(0.0, min(amount, end) - start)
            return total
        if self.once:
            return self.once * amount / self.months
        return self.month * max(0.0, amount - self.free)

    def text(self, unit: str) -> str:
        if self.tiers:
            return "; ".join(f"${r:g}/{unit}-month from {a:,g}" for a, r in self.tiers)
        if self.once:
            return f"${self.once:g}/{unit} once, over {self.months:g} months"
        return f"${self.month:g}/{unit}-month" + (f" above {self.free:,g}" if self.free else "")


@dataclass(frozen=True)
class Offer:
    name: str
    profile: Profile
    summary: str
    prices: dict[str, Price]           # by provision key (vendor units), or "volume"
    source: str = ""                   # a key of the catalogue's sources
    roles: tuple[str, ...] = ()        # what it may hold (the WAL alone: st1); () anything
    unpriced: str = ""                 # why it has no price (listed, never advised)
    ref: str = ""                      # the profile as -d takes it: a packaged name, or a file's absolute path

    @property
    def provisionable(self) -> dict:
        return self.profile.provision or {}

    @property
    def fixed(self) -> bool:
        """Sold as it is (a tier): its capacity is the profile's."""
        return self.profile.provision == {}

    def monthly(self, vendor: dict[str, float]) -> float:
        """Its monthly price provisioned at `vendor` (provision key -> value in the vendor's unit)."""
        total = self.prices["volume"].monthly(1.0) if "volume" in self.prices else 0.0
        for key, price in self.prices.items():
            if key != "volume":
                total += price.monthly(vendor[key])
        return total

    def price_text(self) -> str:
        units = {k: e.unit for k, e in self.provisionable.items()}
        return ", ".join(p.text("volume" if k == "volume" else units.get(k, "GB")) for k, p in self.prices.items()) \
            or "-"


@dataclass
class Catalog:
    name: str
    title: str
    region: str
    currency: str
    read: str
    sources: dict[str, dict] = field(default_factory=dict)
    offers: dict[str, Offer] = field(default_factory=dict)
    origin: str = ""

    def priced(self) -> list[Offer]:
        return [o for o in self.offers.values() if not o.unpriced]

    def offer(self, name: str) -> Offer:
        if name not in self.offers:
            raise UserError(f"catalogue {self.name} has no offer {name!r}; it has {', '.join(self.offers)}")
        return self.offers[name]


def _packaged() -> dict:
    folder = resources.files("dbtier.advisor") / "catalogs"
    return {p.name[:-len(SUFFIX)]: p for p in folder.iterdir() if p.name.endswith(SUFFIX)}


def names() -> list[str]:
    return sorted(_packaged())


def load(spec: str) -> Catalog:
    """A shipped catalogue by name, or a TOML file of your own."""
    packaged = _packaged()
    if spec in packaged:
        return parse(packaged[spec].read_text(), f"catalogue {spec}")
    path = Path(spec).expanduser()
    if path.suffix != SUFFIX and not path.exists():
        raise UserError(f"unknown catalogue {spec!r}; 'dbtier catalog' lists them ({', '.join(packaged)}), or give a "
                        ".toml file of your own")
    try:
        if not path.is_file():
            raise UserError(f"catalogue {path}: no such file")
        if path.stat().st_size > MAX_BYTES:
            raise UserError(f"catalogue {path}: larger than {MAX_BYTES >> 10} kB; not a catalogue")
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UserError(f"catalogue {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"catalogue {path}: not UTF-8 text") from None
    return parse(text, str(path), base=path.resolve().parent)


def parse(text: str, where: str, base: Path | None = None) -> Catalog:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from None
    stray = [k for k in doc if k not in TOP_KEYS]
    if stray:
        raise UserError(f"{where}: unknown key {stray[0]!r}; a catalogue has {', '.join(TOP_KEYS)}")
    parent = None
    if "extends" in doc:
        if not isinstance(doc["extends"], str) or doc["extends"] not in _packaged():
            raise UserError(f"{where}: extends = {doc['extends']!r}: give a shipped catalogue ({', '.join(names())})")
        parent = load(doc["extends"])
    texts = {}
    for key in ("name", "title", "region", "currency", "read"):
        value = doc.get(key, getattr(parent, key) if parent else (Path(where).stem if key == "name" else ""))
        if not isinstance(value, str) or len(value) > 200 or any(not c.isprintable() for c in value):
            raise UserError(f"{where}: {key} is one line of text")
        texts[key] = value
    sources = dict(parent.sources) if parent else {}
    raw_sources = doc.get("sources", {})
    if not isinstance(raw_sources, dict) or not all(isinstance(v, dict) for v in raw_sources.values()):
        raise UserError(f"{where}: [sources] is a table of {{ title, url, date }} tables")
    sources.update(raw_sources)
    offers = dict(parent.offers) if parent else {}
    raw = doc.get("offer", [])
    if not isinstance(raw, list) or not all(isinstance(o, dict) for o in raw):
        raise UserError(f"{where}: offers are [[offer]] tables")
    for i, o in enumerate(raw, 1):
        offer = _offer(o, f"{where}, offer {i}", sources, base)
        offers[offer.name] = offer
    if not offers:
        raise UserError(f"{where}: no [[offer]]; a catalogue lists at least one")
    return Catalog(texts["name"], texts["title"], texts["region"], texts["currency"], texts["read"], sources, offers,
                   where)


def _offer(o: dict, where: str, sources: dict, base: Path | None = None) -> Offer:
    stray = [k for k in o if k not in OFFER_KEYS]
    if stray:
        raise UserError(f"{where}: unknown key {stray[0]!r}; an offer has {', '.join(OFFER_KEYS)}")
    name = o.get("name")
    if not isinstance(name, str) or not name or len(name) > 40 or not all(c.isalnum() or c in "-_." for c in name):
        raise UserError(f"{where}: name is a short word (letters, digits, - _ .)")
    where = f"{where.rsplit(', offer', 1)[0]}, offer {name}"
    if not isinstance(o.get("profile"), str):
        raise UserError(f"{where}: give its profile (a name from 'dbtier devices' or a .toml)")
    ref = o["profile"]
    if ref.endswith(profiles.PROFILE_SUFFIX):  # a file: found from wherever the advice runs
        path = Path(ref).expanduser()
        ref = str((base / path if base is not None and not path.is_absolute() else path).resolve())
    try:
        prof = profiles.load(ref)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    if prof.kind == "real":
        raise UserError(f"{where}: a real folder is not an offer; give a modelled profile")
    summary, source, unpriced = o.get("summary", prof.summary), o.get("source", ""), o.get("unpriced", "")
    for key, value in (("summary", summary), ("source", source), ("unpriced", unpriced)):
        if not isinstance(value, str) or len(value) > 300:
            raise UserError(f"{where}: {key} is one line of text")
    if source and source not in sources:
        raise UserError(f"{where}: source {source!r} is not in the catalogue's [sources]")
    roles = o.get("roles", [])
    if not isinstance(roles, list) or not all(r in ("data", "indexes", "wal", "temp") for r in roles):
        raise UserError(f"{where}: roles lists what it may hold: data, indexes, wal, temp")
    raw_prices = o.get("price")
    if raw_prices is None and not unpriced:
        raise UserError(f"{where}: no price; give price.capacity_gb = {{ month = ... }} (or unpriced = \"why\")")
    prices = {}
    allowed = set(prof.provision or {}) | {"volume"} if prof.provision is not None else {"capacity_gb", "volume"}
    for key, p in (raw_prices or {}).items():
        if key not in allowed:
            raise UserError(f"{where}: price.{key}: {prof.name} is priced by {', '.join(sorted(allowed))}")
        prices[key] = _price(p, f"{where}: price.{key}")
    if prof.provision == {} and set(prices) - {"volume"}:
        raise UserError(f"{where}: {prof.name} is a fixed tier; price it per volume (price.volume = {{ month = ... }})")
    return Offer(name, prof, summary, prices, source, tuple(roles), unpriced, ref)


def _price(p, where: str) -> Price:
    if not isinstance(p, dict) or not p or any(k not in PRICE_KEYS for k in p):
        raise UserError(f"{where}: a price is {{ month = X }}, {{ month = X, free = N }}, {{ tiers = [[from, X], ...] }} "
                        "or {{ once = X, months = N }}")

    def num(key: str) -> float:
        v = p[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise UserError(f"{where}: {key} is a number")
        if v < 0:
            raise UserError(f"{where}: {key} = {v:g} is negative; a price is 0 or more")
        return float(v)

    if "tiers" in p:
        tiers = p["tiers"]
        if set(p) != {"tiers"} or not isinstance(tiers, list) or not tiers or not all(
                isinstance(t, list) and len(t) == 2 for t in tiers):
            raise UserError(f"{where}: tiers is a list of [from, rate] pairs, alone")
        out = []
        for a, r in tiers:
            if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in (a, r)):
                raise UserError(f"{where}: tiers hold numbers")
            if a < 0 or r < 0:
                raise UserError(f"{where}: a tier of {a:g} at {r:g} is negative; a price is 0 or more")
            out.append((float(a), float(r)))
        if [a for a, _ in out] != sorted(a for a, _ in out) or out[0][0] != 0:
            raise UserError(f"{where}: tiers start at 0 and go up")
        return Price(tiers=tuple(out))
    if "once" in p:
        if set(p) != {"once", "months"}:
            raise UserError(f"{where}: a price paid once gives once and months (its life), alone")
        months = num("months")
        if months < 1:
            raise UserError(f"{where}: months is the drive's life in months, at least 1")
        return Price(once=num("once"), months=months)
    if "month" not in p or set(p) - {"month", "free"}:
        raise UserError(f"{where}: give month (the rate), and free (what is included) if any")
    return Price(month=num("month"), free=num("free") if "free" in p else 0.0)
