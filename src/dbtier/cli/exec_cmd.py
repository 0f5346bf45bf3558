"""`dbtier exec`: any program on virtual devices, with iostat-style figures at the end."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
from rich.markup import escape

from dbtier import lifecycle
from dbtier.devices import programs
from dbtier.devices.session import CPU_SCALE_ENV, Device, Session, check_cpu_scale, host_floor_warnings
from dbtier.devices.spec import legacy_note, parse_all
from dbtier.errors import UserError
from dbtier.measure import devices as device_figures
from dbtier.report import jsonout, outputs
from dbtier.report.terminal import console, show
from dbtier.workspace import Workspace, check_not_pseudo


@click.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--device", "-d", "device_args", multiple=True, metavar="NAME=PROFILE:DIR",
              help="emulate PROFILE for every file under DIR (repeatable; the old DIR=PROFILE is read for one more "
                   "release)")
@click.option("--trace", "trace_dir", type=click.Path(path_type=Path),
              help="record every I/O into this directory; 'dbtier trace DIR' turns it into Parquet")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="write the figures as JSON here")
@click.option("--cpu-scale", type=float, default=1.0, show_default=True, metavar="K",
              help="run the program as on a CPU K times slower: it spends K times its CPU time between calls")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="a folder in which dbtier makes its own, dbtier-UID, for the emulation's state (default: /dev/shm)")
@click.option("--quiet", "-q", is_flag=True, help="print nothing but errors")
@click.option("--wide", is_flag=True, help="print every column, however narrow the terminal")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(device_args, trace_dir, json_path, cpu_scale, workspace, quiet, wide, command) -> None:
    """Run COMMAND with its I/O under each DIR on an emulated device.

    Every read, write and flush on a file below DIR takes the time the device model gives
    (the data itself still goes to DIR). At exit, per device, the figures `iostat -x` would
    print, and the emulation's lateness: how far past the modelled completion calls returned.
    The exit status is COMMAND's.

    \b
    Examples:
      mkdir -p /dev/shm/ssd
      dbtier exec -d ssd=ssd-sata-mlc:/dev/shm/ssd -- fio --name=r --directory=/dev/shm/ssd \\
          --ioengine=psync --rw=randread --bs=8k --size=256m --runtime=10 --time_based
      dbtier exec -d data=hdd-sata-7200:/srv/a -d log=ssd-sata-mlc:/srv/b -- pgbench ...

    Fast devices (under ~200 us) need DIR on tmpfs, or the host's own disk is the floor."""
    specs = parse_all(device_args, need_dir=True, legacy_ok=True)
    devices = [Device(d.name, d.directory, d.profile) for d in specs]
    program = shutil.which(command[0])
    if program is None:
        if command[0].startswith("-"):
            raise UserError(f"{command[0]}: no such option of dbtier exec; the program comes after the options "
                            "(dbtier exec -d NAME=PROFILE:DIR -- PROGRAM ARGS...)")
        if "/" in command[0] and Path(command[0]).is_dir():
            raise UserError(f"cannot run {command[0]}: it is a folder, not a program")
        found = Path(command[0]).exists() if "/" in command[0] else False
        raise UserError(f"cannot run {command[0]}: " + ("permission denied" if found else "command not found"))
    why = programs.why_not_enterable(Path(program))
    if why:
        raise UserError(f"cannot emulate {command[0]}: {program} is {why}, so the interposer (LD_PRELOAD) cannot "
                        "enter it and none of its I/O would be seen; run a dynamically linked build for this machine")
    check_cpu_scale(cpu_scale)
    if trace_dir is not None:
        trace_dir = check_trace_dir(trace_dir)
    if json_path is not None:
        json_path = outputs.check_file(json_path, "--json")
    out = console(stderr=True, wide=wide)
    workspace = Workspace.open(workspace)
    workspace.reap(lambda line: out.print(line, markup=False))
    claim = workspace.claim("exec")
    try:
        if trace_dir is not None and not trace_dir.exists():
            trace_dir.mkdir()
        session = Session(devices, claim.path / "iotap", trace_dir)
        session.create()
        if not quiet:
            note = legacy_note(specs)
            if note:
                out.print(note, markup=False)
            for warning in host_floor_warnings(devices):
                out.print(f"[yellow]warning:[/] {escape(warning)}")
        # what the program writes into the device folders must have passed the interposer: compared after
        folders = [d.directory for d in devices]
        ours = [workspace.root] + ([trace_dir] if trace_dir is not None else [])
        files_before = programs.folder_files(folders, ours)
        rc, elapsed, started, refused = _run(session, command, cpu_scale)
        if refused:
            raise UserError(f"the emulation did not apply to {len(refused)} process(es) of {command[0]}, which "
                            f"stopped: {refused[0]}")
        state = session.snapshot()
        gaps = session.gaps(state)
        files_after = programs.folder_files(folders, ours)
        unseen = programs.unseen_writes(files_before, files_after, state, folders)
        if unseen:
            more = f" and {len(unseen) - 1} more file(s)" if len(unseen) > 1 else ""
            gaps.append(f"{unseen[0]}{more} changed while {command[0]} ran, but not through a call the emulation "
                        "saw (written through a memory mapping, by a program the interposer was not in, or by "
                        "another process); write them with read and write calls from the program itself")
        if gaps:
            raise UserError(f"the figures of {command[0]} would be incomplete: {'; '.join(gaps)}")
        if not quiet:
            for folder in sorted(set(files_before.capped + files_after.capped)):
                out.print(f"note: {folder} holds more than {programs.WALK_CAP:,} entries: its files were not "
                          "compared with what the emulation saw", markup=False)
        rows = device_figures.rows(session.devices, state, elapsed)
        session.save_trace_meta({"command": list(command), "started": started, "elapsed_s": elapsed, "exit_status": rc})
        if not quiet:
            from dbtier.report.runview import IOSTAT_DROP, iostat_data

            show(out, iostat_data(rows, f"devices over {elapsed:.2f} s of: {' '.join(command)}"), IOSTAT_DROP)
            for row in rows:
                late = row["lateness"]
                if late["count"] and late["overruns"] > 0.01 * late["count"]:
                    out.print(f"[yellow]warning:[/] on {escape(row['device'])}, {late['overruns']} of {late['count']} I/Os "
                              "took the host longer than the model allowed: those completed late")
        if not quiet and cpu_scale != 1.0:
            out.print(f"CPU scale {cpu_scale:g}: {state.get('cpu_dilation_ns', 0) / 1e9:.3f} s spent as the slower CPU "
                      "would have", markup=False)
        if json_path:
            jsonout.write(json_path, {"kind": "exec", "command": list(command), "started": started,
                                      "elapsed_s": elapsed, "exit_status": rc, "devices": rows, "cpu_scale": cpu_scale,
                                      "cpu_dilation_s": state.get("cpu_dilation_ns", 0) / 1e9})
    finally:
        with lifecycle.shielded():
            claim.remove()
    sys.exit(rc if rc >= 0 else 128 - rc)


def check_trace_dir(path: Path) -> Path:
    """--trace DIR: a new folder, or one that holds no trace yet (trace files are never overwritten)."""
    path = Path(path).expanduser()
    check_not_pseudo(path, "--trace")
    outputs.refuse_foreign_link(path, "--trace")
    if os.path.islink(path) and not path.exists():
        raise UserError(f"--trace {path}: a link that leads nowhere; remove it or give another folder")
    if path.exists():
        if not path.is_dir():
            raise UserError(f"--trace {path}: a file is there; give a folder for the trace")
        if any(path.glob("iotap-*.trc")):
            raise UserError(f"--trace {path}: it holds a trace already; give a new or empty folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UserError(f"--trace {path}: you cannot write there")
        return path.resolve()
    outputs.check_file(path, "--trace")  # its parent must exist and be writable
    return Path(os.path.abspath(path))


def _run(session: Session, command, cpu_scale: float = 1.0) -> tuple[int, float, float, list[str]]:
    """Runs the program; returns its status, elapsed time, start and the lines of processes the
    emulation could not apply to (the interposer writes them to a pipe and stops that process)."""
    read_end, write_end = os.pipe()
    env = session.env()
    env["DBTIER_IOTAP_ERRFD"] = str(write_end)
    if cpu_scale != 1.0:
        env[CPU_SCALE_ENV] = repr(float(cpu_scale))
    started = time.time()
    t0 = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(lifecycle.dies_with_us(list(command)), env=env, pass_fds=(write_end,))
        finally:
            os.close(write_end)
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
        os.set_blocking(read_end, False)
        try:
            reported = os.read(read_end, 65536).decode(errors="replace")
        except BlockingIOError:  # a process of the program still holds the pipe and wrote nothing
            reported = ""
    finally:
        os.close(read_end)
    return rc, elapsed, started, [line for line in reported.splitlines() if line.strip()]
