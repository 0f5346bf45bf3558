"""`dbtier exec`: any program on virtual devices, with iostat-style figures at the end."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from dbtier.devices.session import Session, host_floor_warnings, parse_device
from dbtier.errors import UserError
from dbtier.measure import devices as device_figures
from dbtier.report import jsonout
from dbtier.report.terminal import console, iostat_table


@click.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--device", "-d", "device_args", multiple=True, metavar="[NAME:]DIR=PROFILE",
              help="emulate PROFILE for every file under DIR (repeatable)")
@click.option("--trace", "trace_dir", type=click.Path(path_type=Path),
              help="record every I/O into this directory; 'dbtier trace DIR' turns it into Parquet")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="write the figures as JSON here")
@click.option("--quiet", "-q", is_flag=True, help="print nothing but errors")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(device_args, trace_dir, json_path, quiet, command) -> None:
    """Run COMMAND with its I/O under each DIR on an emulated device.

    Every read, write and flush on a file below DIR takes the time the device model gives
    (the data itself still goes to DIR). At exit, per device, the figures `iostat -x` would
    print, and the emulation's lateness: how far past the modelled completion calls returned.
    The exit status is COMMAND's.

    \b
    Examples:
      mkdir -p /dev/shm/ssd
      dbtier exec -d /dev/shm/ssd=ssd-sata-mlc -- fio --name=r --directory=/dev/shm/ssd \\
          --ioengine=psync --rw=randread --bs=8k --size=256m --runtime=10 --time_based
      dbtier exec -d data:/srv/a=hdd-sata-7200 -d log:/srv/b=ssd-sata-mlc -- pgbench ...

    Fast devices (under ~200 us) need DIR on tmpfs, or the host's own disk is the floor."""
    if not device_args:
        raise UserError("give at least one --device DIR=PROFILE (see 'dbtier devices' for profiles)")
    taken: set[str] = set()
    devices = []
    for arg in device_args:
        dev = parse_device(arg, taken)
        taken.add(dev.name)
        devices.append(dev)
    out = console(stderr=True)
    session = Session(devices, Path(tempfile.mkdtemp(prefix="dbtier-exec-")), trace_dir)
    try:
        session.create()
        if not quiet:
            for warning in host_floor_warnings(devices):
                out.print(f"[yellow]warning:[/] {warning}")
        started = time.time()
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(list(command), env=session.env())
        except FileNotFoundError:
            raise UserError(f"command not found: {command[0]}") from None
        except PermissionError:
            raise UserError(f"cannot run {command[0]}: permission denied") from None
        # Ctrl-C reaches the program from the terminal; dbtier waits for it and still reports.
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda s, _f: proc.send_signal(s))
        try:
            rc = proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        elapsed = time.monotonic() - t0
        rows = device_figures.rows(session.devices, session.snapshot(), elapsed)
        session.save_trace_meta({"command": list(command), "started": started, "elapsed_s": elapsed, "exit_status": rc})
        if not quiet:
            out.print(iostat_table(rows, f"devices over {elapsed:.2f} s of: {' '.join(command)}"))
            for row in rows:
                late = row["lateness"]
                if late["count"] and late["overruns"] > 0.01 * late["count"]:
                    out.print(f"[yellow]warning:[/] on {row['device']}, {late['overruns']} of {late['count']} I/Os "
                              "took the host longer than the model allowed: those completed late")
        if json_path:
            jsonout.write(json_path, {"kind": "exec", "command": list(command), "started": started,
                                      "elapsed_s": elapsed, "exit_status": rc, "devices": rows})
    finally:
        session.remove()
    sys.exit(rc if rc >= 0 else 128 - rc)
