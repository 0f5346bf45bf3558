"""`dbtier devices`: the device profiles and what their models expect."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from pathlib import Path

from dbtier.devices import native, patterns, profile, sources, validate as validation
from dbtier.report import jsonout, outputs
from dbtier.report.terminal import console, fmt


@click.group(invoke_without_command=True)
@click.option("--quiet", "-q", is_flag=True, help="only the profiles' names, one a line")
@click.pass_context
def devices(ctx: click.Context, quiet: bool) -> None:
    """List the device profiles (packaged TOML; your own .toml works wherever a name does).

    \b
    dbtier devices                 every profile, with its QD1 8 KiB random read latency
    dbtier devices show NAME       parameters and expected QD1 latencies
    dbtier devices validate PROFILE TRACE
                                   a real drive's measured service times against the model's
    """
    if ctx.invoked_subcommand:
        return
    if quiet:
        click.echo("\n".join(profile.names()))
        return
    loaded = [profile.load(name) for name in profile.names()]
    order = list(profile.ERAS) + [""]
    out = console()
    for era in order:
        group = sorted((p for p in loaded if p.era == era), key=lambda p: (p.kind, p.name))
        if not group:
            continue
        title = f"{era}: {profile.ERAS[era]}" if era else "any era"
        table = Table(title=title, title_justify="left")
        for col in ("name", "kind", "QD1 8K rand read", "summary"):
            table.add_column(col, justify="right" if col.startswith("QD1") else "left")
        for p in group:
            lat = "-" if p.kind == "real" else f"{patterns.expected(p, patterns.STANDARD[0]).mean_us:,.0f} us"
            table.add_row(p.name, p.kind, lat, p.summary)
        out.print(table)


@devices.command()
@click.argument("name")
@click.option("--json", "json_path", type=click.Path(path_type=Path, allow_dash=True), metavar="PATH",
              help="write the profile as JSON here ('-': print it instead of tables)")
@click.option("--quiet", "-q", is_flag=True, help="print nothing (with --json PATH, the profile is in the file)")
def show(name: str, json_path: Path | None, quiet: bool) -> None:
    """Show a profile's parameters and the model's expected QD1 figures.

    NAME is a packaged profile or a path to a .toml profile, with what is provisioned in braces
    ('ebs-gp3{iops=6000,mb_s=250}': quote it for the shell); a cloud volume lists what a buyer sets,
    in the vendor's units, with its limits. The figures are the device model's,
    computed offline by the same C code the interposer runs: queue depth 1, no think time, 8 KiB
    requests, random over a 1 GiB file (the first on a fresh device) or sequential through it."""
    to_stdout = json_path is not None and str(json_path) == "-"
    if json_path is not None and not to_stdout:
        json_path = outputs.check_file(json_path, "--json")
    p = profile.load(name)
    defs = {d["name"]: d for d in native.param_table()[p.kind]["params"]}
    figures = [] if p.kind == "real" else [patterns.expected(p, pt) for pt in patterns.STANDARD]
    if json_path is not None:
        doc = {"kind": "profile", "profile": p.name, "device_kind": p.kind, "summary": p.summary,
               "params": {k: {"value": v, "unit": defs[k]["unit"], "help": defs[k]["help"], "source": p.basis.get(k),
                              "estimate": sources.is_estimate(p.basis.get(k))} for k, v in p.params.items()},
               "sources": sources.cited(p.basis, p.provision),
               "expected_qd1": [f.__dict__ for f in figures],
               "provision": _provision_doc(p)}
        if to_stdout:
            click.echo(jsonout.dumps(doc))
            return
        jsonout.write(json_path, doc)
    if quiet:
        return
    out = console()
    out.print(f"[bold]{escape(p.name)}[/]  ({p.kind}) {escape(p.summary)}")
    params = Table(title="parameters (est: an engineering estimate; a source is in the table below it)",
                   title_justify="left")
    for col in ("parameter", "value", "unit", "meaning", "where it comes from"):
        params.add_column(col, justify="right" if col == "value" else "left")
    for key, value in p.params.items():
        basis = p.basis.get(key)
        params.add_row(key, f"{value:g}" + (" est" if sources.is_estimate(basis) else ""), defs[key]["unit"],
                       defs[key]["help"], escape(basis) if basis else "the model's default")
    out.print(params)
    cited = sources.cited(p.basis, p.provision)
    if cited:
        src = Table(title="sources", title_justify="left")
        for col in ("id", "what", "where", "kind", "read"):
            src.add_column(col)
        for i, s in cited.items():
            src.add_row(i, escape(s.get("title", "")), escape(s.get("where", "")), s.get("kind", ""), s.get("read", ""))
        out.print(src)
    if p.provision:
        prov = Table(title=f"what a buyer sets: {escape(p.name.split('{')[0])}{{key=value,...}}, quoted for the shell",
                     title_justify="left")
        for col in ("key", "set to", "unit", "range and ratios", "sets too", "source"):
            prov.add_column(col, justify="right" if col == "set to" else "left")
        units = {k: e.unit for k, e in p.provision.items()}
        for key, e in p.provision.items():
            prov.add_row(key, f"{e.vendor(p.params[key]):,g}", e.unit, e.limits_text(units),
                         ", ".join(e.derive) or "-", escape(" ".join(filter(None, (e.source, e.note)))) or "-")
        out.print(prov)
    elif p.provision is not None:
        out.print("Sold as it is: nothing of it is provisioned.")
    if figures:
        exp = Table(title="expected at QD1 (model)", title_justify="left")
        for col in ("pattern", "mean us", "p50 us", "p99 us", "IOPS", "MB/s"):
            exp.add_column(col, justify="left" if col == "pattern" else "right")
        for f in figures:
            exp.add_row(f.pattern, fmt(f.mean_us), fmt(f.p50_us), fmt(f.p99_us), fmt(f.iops), fmt(f.mb_s))
        out.print(exp)


def _provision_doc(p) -> dict | None:
    """What a buyer may set, in the vendor's units: None when any parameter may be set (model units)."""
    if p.provision is None:
        return None
    units = {k: e.unit for k, e in p.provision.items()}
    return {k: {"value": e.vendor(p.params[k]), "unit": e.unit, "factor": e.factor, "min": e.min, "max": e.max,
                "max_per": e.max_per, "ratio_floor": e.ratio_floor, "derives": sorted(e.derive),
                "limits": e.limits_text(units), "source": e.source, "note": e.note}
            for k, e in p.provision.items()}


@devices.command()
@click.argument("profile_name", metavar="PROFILE")
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="write the figures as JSON here")
@click.option("--quiet", "-q", is_flag=True, help="print only the demerit")
def validate(profile_name: str, trace: Path, json_path: Path | None, quiet: bool) -> None:
    """Replay a real drive's measured trace through PROFILE and compare service times.

    TRACE is in DiskSim's "validate" format, one request per line: R or W, the drive buffer's action,
    the block number and size in 512-byte sectors, the measured service time and the time to the next
    request (us). Requests go one at a time, each that long after the previous completed, as DiskSim
    replays them. The demerit is DiskSim's: the RMS horizontal distance (ms) between the measured and
    modelled service-time distributions, computed as its rms program does, so it reads beside the
    figures DiskSim publishes for its own model.

    \b
    Example, with a trace of DiskSim's validation suite (folder valid/ of its sources):
      dbtier devices validate disksim-barracuda barracuda.trace"""
    from dbtier.report import outputs

    p = profile.load(profile_name)
    if json_path:
        json_path = outputs.check_file(json_path, "--json")
    r = validation.validate(p, trace)
    out = console()
    table = Table(title=f"{p.name} against {trace.name}: {r['requests']:,} requests ({r['reads']:,} reads, "
                        f"{r['writes']:,} writes)", title_justify="left")
    for col in ("service time, mean ms", "measured", "modelled", "model/measured"):
        table.add_column(col, justify="left" if col.startswith("service") else "right")
    for label, key in (("all requests", "mean_ms"), ("reads", "read_mean_ms"), ("writes", "write_mean_ms")):
        m, o = r[f"measured_{key}"], r[f"modelled_{key}"]
        if m is not None:
            table.add_row(label, f"{m:.3f}", f"{o:.3f}", f"{o / m:.2f}" if m else "-")
    if not quiet:
        out.print(table)
    out.print(f"demerit (RMS distance between the service-time distributions): {r['demerit_ms']:.3f} ms", markup=False)
    if json_path:
        jsonout.write(json_path, {"kind": "devices-validate", **r})
