"""`dbtier catalog`: the priced catalogues of volumes that `advise --catalog` chooses from."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from dbtier.advisor import catalog as catalogs
from dbtier.report import jsonout, outputs
from dbtier.report.terminal import console


def _doc(cat: catalogs.Catalog) -> dict:
    units = lambda o: {k: e.unit for k, e in o.provisionable.items()}  # noqa: E731
    return {"kind": "catalog", "name": cat.name, "title": cat.title, "region": cat.region, "currency": cat.currency,
            "read": cat.read, "origin": cat.origin, "sources": cat.sources,
            "offers": [{"name": o.name, "profile": o.profile.name, "summary": o.summary, "price": o.price_text(),
                        "prices": {k: p.__dict__ for k, p in o.prices.items()}, "source": o.source,
                        "roles": list(o.roles), "unpriced": o.unpriced or None,
                        "provision": {k: {"unit": e.unit, "limits": e.limits_text(units(o))}
                                      for k, e in o.provisionable.items()}}
                       for o in cat.offers.values()]}


@click.command()
@click.argument("name", required=False)
@click.option("--json", "json_path", type=click.Path(path_type=Path, allow_dash=True), metavar="PATH",
              help="write the catalogue as JSON here ('-': print it instead of tables)")
@click.option("--quiet", "-q", is_flag=True, help="print only the names (of the catalogues, or of one's offers)")
def catalog(name: str | None, json_path: Path | None, quiet: bool) -> None:
    """List the priced catalogues of volumes, or the offers of one: NAME, a shipped catalogue or a .toml
    of your own.

    \b
    dbtier catalog                 the catalogues shipped: AWS EBS, Azure, Google Cloud, on-premises
    dbtier catalog aws             each offer: its profile, how its price is made, what a buyer sets
    dbtier catalog mine.toml       a catalogue of your own

    Each price says where it is from and when it was read; where no price could be found the offer
    is listed unpriced (never advised) or the figure is marked an estimate. A catalogue of your own
    changes prices or adds offers:

    \b
      extends = "aws"              # the shipped one, with these changes
      region = "eu-west-1"
      [sources]
      quote = { title = "our reseller's quote", url = "", date = "2026-11-01" }
      [[offer]]                    # the same name replaces the shipped offer
      name = "gp3"
      profile = "ebs-gp3"
      source = "quote"
      price.capacity_gb = { month = 0.088 }
      price.iops = { month = 0.0055, free = 3000 }
      price.mb_s = { month = 0.044, free = 125 }

    Prices are monthly, in the provisioned units the vendor sells (GiB, IOPS, MiB/s or MB/s):
    { month = X }, { month = X, free = N } above what is included, { tiers = [[0, X], [N, Y]] },
    { once = X, months = N } for a drive bought once, price.volume = { month = X } for a fixed tier."""
    to_stdout = json_path is not None and str(json_path) == "-"
    if json_path is not None and not to_stdout:
        json_path = outputs.check_file(json_path, "--json")
    out = console()
    if quiet and json_path is None:
        click.echo("\n".join(catalogs.names() if name is None else catalogs.load(name).offers))
        return
    if name is None:
        cats = [catalogs.load(n) for n in catalogs.names()]
        if json_path is not None:
            doc = {"kind": "catalogs", "catalogs": [_doc(c) for c in cats]}
            click.echo(jsonout.dumps(doc)) if to_stdout else jsonout.write(json_path, doc)
            if to_stdout:
                return
        table = Table(title="catalogues ('dbtier catalog NAME' lists one's offers)", title_justify="left")
        for col in ("name", "what", "region", "prices read", "offers"):
            table.add_column(col)
        for c in cats:
            table.add_row(c.name, c.title, c.region, c.read, ", ".join(
                o.name + ("" if not o.unpriced else " (unpriced)") for o in c.offers.values()))
        out.print(table)
        return
    cat = catalogs.load(name)
    if json_path is not None:
        doc = _doc(cat)
        if to_stdout:
            click.echo(jsonout.dumps(doc))
            return
        jsonout.write(json_path, doc)
    out.print(f"[bold]{escape(cat.title)}[/] ({escape(cat.name)}), {escape(cat.region)}, prices in {cat.currency} "
              f"read {escape(cat.read)}", soft_wrap=True)
    table = Table(title="offers", title_justify="left")
    for col in ("offer", "profile", "price a month", "what a buyer sets", "source"):
        table.add_column(col)
    for o in cat.offers.values():
        units = {k: e.unit for k, e in o.provisionable.items()}
        sets = "; ".join(f"{k} ({e.limits_text(units)})" for k, e in o.provisionable.items()) or (
            "nothing: a fixed tier" if o.fixed else "its size (GB)")
        if o.roles:
            sets += f"; holds only: {', '.join(o.roles)}"
        price = o.price_text() if not o.unpriced else f"unpriced: {o.unpriced}"
        table.add_row(o.name, o.profile.name, escape(price), escape(sets), o.source or "-")
    out.print(table)
    if cat.sources:
        src = Table(title="sources", title_justify="left")
        for col in ("source", "what", "where", "dated"):
            src.add_column(col)
        for key, s in cat.sources.items():
            src.add_row(key, escape(str(s.get("title", ""))), escape(str(s.get("url", ""))), escape(str(s.get("date", ""))))
        out.print(src)
