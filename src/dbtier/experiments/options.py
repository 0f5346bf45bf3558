"""The one table of the options every PostgreSQL command shares (fio's rule: a file's key is the
option's name). From it come the command line's options (`dbtier run WORKLOAD`, `compare`), an
experiment file's keys and the Python API's keywords (the name with underscores), and the groups of
`--help`. An option that is part of the experiment (`experiment=True`) is written to a run
directory's experiment.toml; the others say where a run goes and how it speaks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbtier.engines import ENGINES

GROUPS = ("Devices and placement", "Server", "Emulation", "Output")


@dataclass(frozen=True)
class Option:
    name: str                     # --NAME, and the key in an experiment file
    group: str                    # its section in --help
    help: str
    type: Any = str               # str, float, Path, or a tuple of the words it takes
    default: Any = None
    multiple: bool = False        # repeatable: the command line gives a tuple
    flag: bool = False
    short: str | None = None
    metavar: str | None = None
    experiment: bool = True       # part of what is run (else: where it goes, how it speaks)

    @property
    def key(self) -> str:
        """Its keyword in Python (and the command's parameter name)."""
        return self.name.replace("-", "_")


OPTIONS = (
    Option("engine", "Server", "the database the workload runs on (the engines dbtier runs: "
           f"{', '.join(ENGINES)})", type=tuple(ENGINES), default="postgres"),
    Option("device", "Devices and placement", "a device: a profile from 'dbtier devices' (or a .toml), provisioned in "
           "braces if you like ('data=ebs-gp3{iops=6000,mb_s=250}', quoted), optionally on your own folder DIR "
           "(repeatable; the first is the default for everything)", multiple=True, short="-d",
           metavar="NAME=PROFILE[:DIR]"),
    Option("place", "Devices and placement", "where things go: data, indexes, wal, temp, dump, or a table or index "
           "name (e.g. data=hdd,wal=ssd,t_attribute_idx=ssd); MariaDB's: data, log, undo, temp, binlog, or a table", multiple=True, short="-p", metavar="KEY=DEVICE[,...]"),
    Option("cache", "Server", "the database cache (shared_buffers; MariaDB: innodb_buffer_pool_size); the seeds' "
           "tables were several times larger",
           default="32MB", metavar="SIZE"),
    Option("io-mode", "Server", "direct: data and WAL bypass the OS page cache; buffered: through the (emulated) "
           "page cache; dsync: cached reads, every write synchronous to the device (MariaDB: innodb_flush_method "
           "O_DIRECT, fsync, O_DSYNC)",
           type=("direct", "buffered", "dsync"), default="direct"),
    Option("set", "Server", "any PostgreSQL setting, on top of dbtier's preset (MariaDB: any mariadbd option) "
           "(repeatable)", multiple=True,
           metavar="NAME=VALUE"),
    Option("settings-from", "Server", "production's settings: a snapshot 'dbtier stats snapshot' wrote (MariaDB: "
           "the output of mariadb --batch -e \"SHOW GLOBAL VARIABLES\"); those that shape I/O and plans are applied "
           "(work_mem, WAL and checkpoints, autovacuum, parallel query, JIT, the planner's costs; InnoDB's flushing "
           "and redo log; the cache as --cache unless that is given), within --scale-model; --set wins",
           type=Path, metavar="FILE"),
    Option("pg-bin", "Server", "another PostgreSQL 18 install's bin folder (default: the embedded one)", type=Path),
    Option("mariadb-bin", "Server", "with --engine mariadb, another MariaDB 10.11 install's folder, holding its bin/ "
           "and sbin/ (/usr for the distribution's own; default: fetched from the distribution into dbtier's cache)",
           type=Path, metavar="DIR"),
    Option("cache-state", "Emulation", "cold: restarted, caches empty; hot: the workload run once first; cross: a "
           "different query over the same data run first (seed 001)", type=("cold", "hot", "cross"), default="cold"),
    Option("page-cache", "Emulation", "the emulated OS page cache (default: three times --cache, as with "
           "shared_buffers at a quarter of the memory)", metavar="SIZE"),
    Option("cpu-scale", "Emulation", "run the server as on a CPU K times slower (2: twice as slow); its processes "
           "spend K times their CPU time between calls, clients keep this machine's", type=float, default=1.0,
           metavar="K"),
    Option("scale-model", "Emulation", "this run's data stands for a system with F times as much: give every size "
           "(--cache, --page-cache, --set work_mem...) as that system's, and dbtier divides them and each HDD's "
           "write cache by F and stretches its seeks as over F times the data; 1: off", type=float, default=1.0,
           metavar="F"),
    Option("credits", "Emulation", "the burst credits a capped cloud volume (gp2, a bursting Premium SSD) has when "
           "the measured part begins: full (left idle), empty (its baseline from the first request), or a "
           "fraction such as 0.25", default="full", metavar="empty|full|FRACTION"),
    Option("trace", "Emulation", "record every I/O: trace.parquet in the run directory", flag=True),
    Option("workspace", "Output", "a folder in which dbtier makes its own, dbtier-UID, for clusters and devices "
           "(default: /dev/shm, in RAM)", type=Path, experiment=False),
    Option("output", "Output", "where the run directory (result.json, report.html, server.log, experiment.toml) is "
           "written", type=Path, default=Path("results"), short="-o", experiment=False),
    Option("json", "Output", "also write the result JSON here", type=Path, metavar="PATH", experiment=False),
    Option("no-reuse", "Output", "load your dump or setup afresh: neither use a loaded cluster kept by an earlier run "
           "of the same (dbtier labs) nor keep this one (a setup that reads files its options do not name)",
           flag=True, experiment=False),
    Option("keep", "Output", "keep the workspace (cluster, log) after the run, for inspection", flag=True,
           experiment=False),
    Option("wide", "Output", "print every column of every table, however narrow the terminal (by default a narrow "
           "one leaves the least needed columns out, and says which)", flag=True, experiment=False),
    Option("production", "Output", "a 'dbtier stats delta' file: put the run beside production (per object its share "
           "of blocks read and written there and here, their rank correlation, where and why they differ) in the "
           "report and result.json", type=Path, metavar="DELTA", experiment=False),
    Option("quiet", "Output", "print only errors and the run directory", flag=True, short="-q", experiment=False),
    Option("repeat", "Output", "run it N times (with several layouts, every run in one shuffled order): each is judged "
           "by its median run, with the runs' range, and a difference within the range is said to be none measured",
           type=int, default=1, metavar="N", experiment=False),
    Option("repeat-seed", "Output", "the seed of --repeat's shuffled order", type=int, default=0, metavar="S",
           experiment=False),
    Option("cluster", "Output", "run on a Ray cluster (ray://HOST:PORT, HOST:PORT or auto), one run per node at a time, "
           "each node's reference run first (docs/cluster.md)", metavar="ADDRESS", experiment=False),
)

BY_KEY = {o.key: o for o in OPTIONS}
#: an experiment file's keys: the experiment's options' names, and the workload
EXPERIMENT_KEYS = ("workload", *(o.name for o in OPTIONS if o.experiment))
#: where a run goes and how it speaks: not part of the experiment
RUNTIME_KEYS = tuple(o.key for o in OPTIONS if not o.experiment)
#: the options a command whose layouts come another way (compare) does not take
LAYOUT_KEYS = ("device", "place", "cache_state", "keep")
#: the options only a command of several runs takes (compare)
SEVERAL_RUNS_KEYS = ("cluster",)
