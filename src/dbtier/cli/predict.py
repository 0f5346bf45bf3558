"""`dbtier predict RUN_DIR`: a recorded run replayed on other devices and placements."""

from __future__ import annotations

from pathlib import Path

import click

from dbtier.report import jsonout, outputs


@click.command(context_settings={"max_content_width": 100})
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-d", "--device", "devices", multiple=True, metavar="NAME=PROFILE",
              help="give a device of the run another profile, or add a device (repeatable)")
@click.option("--place", "places", multiple=True, metavar="KEY=DEVICE,...",
              help="a whole placement, as 'dbtier run --place' takes it (roles data, indexes, wal, temp, or any "
                   "table or index of the run; a MariaDB run's: data, log, undo, temp, binlog, or a table; what it "
                   "does not name goes with data); default: as recorded")
@click.option("--page-cache", metavar="SIZE", help="the emulated OS page cache's size (a buffered run only)")
@click.option("--cpu-scale", type=float, default=1.0, show_default=True, metavar="K",
              help="the server's CPU time between calls times this (2: a server twice as slow)")
@click.option("--credits", metavar="empty|full|FRACTION",
              help="the burst credits a capped cloud volume (gp2, a bursting Premium SSD) has when the measured part "
                   "begins (default: as the recorded run had them, full unless its --credits said otherwise)")
@click.option("--spread", type=click.IntRange(0, 1000), default=0, show_default=True, metavar="N",
              help="also replay N more times, each call reaching its device's model earlier or later by one of this "
                   "host's recorded delays (the processes' own times kept), and give the range: concurrent processes "
                   "on a disk make one recording one sample of the order they reached it in")
@click.option("--seed", type=int, default=0, show_default=True, help="the seed of --spread's moves")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="write the prediction as JSON")
@click.option("--workspace", type=click.Path(path_type=Path),
              help="a folder in which dbtier makes its own, for the replay's emulated state (default: /dev/shm)")
@click.option("--quiet", "-q", is_flag=True, help="print only errors (with --json, the prediction is in the file)")
def predict(run_dir: Path, devices, places, page_cache, cpu_scale, credits, spread, seed, json_path, workspace,
            quiet) -> None:
    """Predict a recorded run on other devices or another placement, without running it again.

    \b
    Examples:
      dbtier run oltp -d hdd=hdd-sata-7200 -d ssd=ssd-sata-mlc --trace   # record once
      dbtier predict RUN_DIR -d hdd=nvme-gen4                            # everything on NVMe
      dbtier predict RUN_DIR --place data=hdd,wal=ssd                    # the WAL alone on the SSD
      dbtier predict RUN_DIR -d hdd=ebs-gp2-100g --credits empty         # a gp2 whose burst is spent
      dbtier predict RUN_DIR -d fast=nvme-gen4 --place data=hdd,stock=fast

    The run's trace (record it with --trace) holds every call the server's processes made on their
    files and when each process woke another. The replay runs each process as a closed loop that keeps
    its own CPU time between calls, sends every call through the same emulation core the live run
    used, and keeps the waits between processes as dependencies: a faster WAL flush or I/O worker
    shortens the wait of the backend behind it. A MariaDB run (--engine mariadb) is replayed thread
    by thread: its connections' threads, its row-lock and latch waits (futexes and condition
    variables), its thread pool's tasks each on its own, and its asynchronous I/O's completions. It
    prints what 'dbtier run' prints, beside the recorded figures.

    \b
    A replay cannot change what the server decided in the recorded run: the database's own cache
    (shared_buffers), the plans, the data, or the I/O mode. Ask those of 'dbtier run'."""
    if json_path is not None:
        json_path = outputs.check_file(json_path, "--json")
    from dbtier.prediction import recording, scenario as scenario_mod
    from dbtier.prediction.replay import predict as run_prediction
    from dbtier.report import predictview
    from dbtier.workspace import Workspace

    Workspace.locate(workspace)  # checked before anything is read or made
    rec = recording.load(run_dir)
    scenario = scenario_mod.build(rec, devices, places, page_cache, cpu_scale, credits)
    ws = Workspace.open(workspace)
    ws.reap((lambda _line: None) if quiet else click.echo)
    doc = run_prediction(rec, scenario, ws, spread=spread, seed=seed).to_dict()
    if not quiet:
        predictview.show(doc)
    if json_path is not None:
        jsonout.write(json_path, doc)
