"""Every bad input answered: a mistake a user can make ends in ONE line on stderr,
`dbtier: error: <what is wrong and what to do>`, exit status 2, no traceback, no "internal error",
and nothing made: no workspace, no run directory, no JSON, trace or Parquet file, no folder on a
device. Each case runs `dbtier` as a user would (a subprocess) with --workspace, -o, --json and
TMPDIR pointing into fresh empty folders, which must still be empty afterwards. No case may start
PostgreSQL: every check fails before a server would (the module takes seconds).

The cases run a few at a time (each is its own process with its own folders); each test reads its
case's outcome."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dbtier.devices import native
from dbtier.errors import UserError
from tests.conftest import assert_refused_in_one_line, dbtier

UID = os.geteuid()
SHARED = (Path("/dev/shm"), Path("/tmp"))
#: names other tests' fixtures give their folders in /dev/shm and /tmp (they may run meanwhile)
FIXTURE_PREFIXES = ("dbtier-test-", "dbtier-gib-")
HUGE = str(10**30)


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    message: str  # a fragment the one line must hold


def C(id_: str, message: str, *args: str) -> Case:
    return Case(id_, tuple(args), message)


RUN = ("run", "random-index", "-d", "a=hdd-sata-7200")
EXEC = ("exec", "-d", "d=ram-san:{dev}")
IOB = ("iobench", "-d", "r=ram-san")

CASES = [
    # -- dbtier itself
    C("top-unknown-command", "No such command 'runn'", "runn"),
    C("top-unknown-option", "No such option", "--colour"),
    # -- run: workloads and devices
    C("run-unknown-workload", "unknown workload 'nosuch'", "run", "nosuch", "-d", "a=hdd-sata-7200"),
    C("run-workload-did-you-mean", "did you mean random-index?", "run", "random-indx", "-d", "a=hdd-sata-7200"),
    C("run-no-device", "give at least one --device", "run", "random-index"),
    C("run-cpu-scale-faster", "--cpu-scale 0.5: give a factor from 1 to 1000", "run", "random-index", "-d",
      "a=hdd-sata-7200", "--cpu-scale", "0.5"),
    C("compare-cpu-scale-nan", "--cpu-scale nan", "compare", "random-index", "--cpu-scale", "nan",
      "--config", "a:h=hdd-sata-7200", "--config", "b:s=ssd-sata-mlc"),
    C("compare-cluster-unreachable", "--cluster 127.0.0.1:9: nothing answers there", "compare", "random-index",
      "--config", "a:h=hdd-sata-7200", "--config", "b:s=ssd-sata-mlc", "--cluster", "127.0.0.1:9"),
    C("compare-cluster-not-an-address", "give ray://HOST:PORT, HOST:PORT", "compare", "random-index",
      "--config", "a:h=hdd-sata-7200", "--config", "b:s=ssd-sata-mlc", "--cluster", "head"),
    C("cluster-status-unreachable", "nothing answers there", "cluster", "status", "--cluster", "ray://127.0.0.1:9"),
    C("run-takes-no-cluster", "No such option '--cluster'", *RUN, "--cluster", "auto"),
    C("run-credits-word", "--credits 'half': give empty, full or a fraction", *RUN, "--credits", "half"),
    C("iobench-credits-above-one", "--credits '1.5': a fraction of a full bucket", *IOB, "--credits", "1.5"),
    C("run-provision-out-of-range", "iops=100,000 is outside ebs-gp3's 3,000 to 80,000 IOPS", "run", "random-index",
      "-d", "a=ebs-gp3{{iops=100000}}"),
    C("run-provision-shell-split", "quote it for the shell", "run", "random-index", "-d", "a=ebs-gp3iops=6000"),
    C("compare-provision-ratio", "mb_s=1,000 needs iops of at least 4,000 IOPS", "compare", "random-index",
      "--config", "a:h=hdd-sata-7200", "--config", "b:s=ebs-gp3{{mb_s=1000}}"),
    C("iobench-provision-fixed-tier", "azure-p20 is sold as it is", "iobench", "-d", "v=azure-p20{{iops=9000}}"),
    C("run-device-without-profile", "expected NAME=PROFILE", "run", "random-index", "-d", "hdd"),
    C("run-device-bad-name", "a device name is a letter", "run", "random-index", "-d", "9x=hdd-sata-7200"),
    C("run-device-duplicate-name", "already a device named a", *RUN, "-d", "a=ssd-sata-mlc"),
    C("run-profile-did-you-mean", "did you mean 'hdd-sata-7200'?", "run", "random-index", "-d", "a=hdd-sata-720"),
    C("run-device-folder-missing", "is not a directory; create it first", "run", "random-index", "-d",
      "a=hdd-sata-7200:/nonexistent-dbtier-dir"),
    C("run-device-folder-is-a-file", "is not a directory", "run", "random-index", "-d", "a=hdd-sata-7200:{fx}/afile"),
    C("run-device-folder-in-proc", "/proc is the kernel's", "run", "random-index", "-d", "a=hdd-sata-7200:/proc"),
    # -- run: placement
    C("run-place-unknown-device", "no device named 'ssd'", *RUN, "--place", "data=ssd"),
    C("run-place-unknown-object", "has no table, index or materialized view 'nosuch'", *RUN, "--place", "nosuch=a"),
    C("run-place-object-did-you-mean", "did you mean t_attribute_idx", *RUN, "--place", "t_attribute_ix=a"),
    C("run-place-no-device", "expected KEY=DEVICE", *RUN, "--place", "data"),
    C("run-place-role-twice", "data is placed twice", *RUN, "-d", "b=ssd-sata-mlc", "--place", "data=a,data=b"),
    # -- run: server settings
    C("run-set-without-value", "expected NAME=VALUE", *RUN, "--set", "shared_buffers"),
    C("run-set-bad-name", "expected NAME=VALUE", *RUN, "--set", "bad name=1"),
    C("run-set-lab-owned-port", "--set port: the lab listens on its own unix socket", *RUN, "--set", "port=5433"),
    C("run-set-lab-owned-hba", "--set hba_file:", *RUN, "--set", "hba_file=/etc/passwd"),
    C("run-set-ssl", "--set ssl:", *RUN, "--set", "ssl=on"),
    C("run-set-io-uring", "io_uring would bypass the interposer", *RUN, "--set", "io_method=io_uring"),
    C("run-set-two-lines", "one line of printable characters", *RUN, "--set", "work_mem=1MB\nport=1"),
    C("run-set-shared-buffers-beyond-memory", "more than the", *RUN, "--set", "shared_buffers=100TB"),
    C("run-set-max-connections-too-few", "give at most", "run", "oltp", "-d", "a=hdd-sata-7200", "--set",
      "max_connections=3"),
    C("run-io-mode", "Invalid value for '--io-mode'", *RUN, "--io-mode", "fast"),
    C("run-cache-state", "Invalid value for '--cache-state'", *RUN, "--cache-state", "warm"),
    C("run-cache-state-unsupported", "insert-loop supports cold", "run", "insert-loop", "-d", "a=hdd-sata-7200",
      "--cache-state", "hot"),
    # -- run: sizes
    C("run-cache-bare-number", "give a unit, e.g. 32MB", *RUN, "--cache", "32"),
    C("run-cache-not-a-size", "expected a size such as 16MB", *RUN, "--cache", "lots"),
    C("run-cache-below-postgres-minimum", "at least 128kB", *RUN, "--cache", "64kB"),
    C("run-cache-beyond-memory", "more than the", *RUN, "--cache", "100TB"),
    C("run-page-cache-bare-number", "give a unit, e.g. 20MB", *RUN, "--page-cache", "20"),
    C("run-page-cache-tiny", "give at least 64kB", *RUN, "--page-cache", "1kB"),
    C("run-page-cache-beyond-memory", "larger than this machine's", *RUN, "--page-cache", "200TB"),
    C("run-default-page-cache-beyond-memory", "three times it", *RUN, "--cache", "{memory_0_4}"),
    # -- run: workload parameters
    C("run-rows-zero", "--rows must be at least 1", *RUN, "--rows", "0"),
    C("run-rows-not-a-number", "not a valid integer", *RUN, "--rows", "many"),
    C("run-rows-astronomical", "too large", *RUN, "--rows", HUGE),
    C("run-rows-beyond-the-disk", "random-index would not fit", *RUN, "--rows", str(10**13)),
    C("run-rows-beyond-tmpfs", "would not fit", *RUN, "--workspace", "{shm_ws}", "--rows", "{tmpfs_rows}"),
    C("run-scans-more-than-rows", "--scans 20 is more than --rows 10", "run", "table-scan", "-d", "a=hdd-sata-7200",
      "--rows", "10", "--scans", "20"),
    C("run-updates-negative", "--updates must be at least 0", "run", "update-locality", "-d", "a=hdd-sata-7200",
      "--updates", "-1"),
    C("run-updates-beyond-rows", "--updates 20 is more than --rows 10", "run", "update-locality", "-d",
      "a=hdd-sata-7200", "--rows", "10", "--updates", "20"),
    C("run-plan-unknown", "'hash' is not one of", "run", "index-range", "-d", "a=hdd-sata-7200", "--plan", "hash"),
    C("run-work-mem-bare-number", "--work-mem 100: give a unit", "run", "merge-join", "-d", "a=hdd-sata-7200",
      "--work-mem", "100"),
    C("run-work-mem-not-a-size", "--work-mem 'lots'", "run", "merge-join", "-d", "a=hdd-sata-7200", "--work-mem",
      "lots"),
    C("run-work-mem-below-minimum", "at least 64kB", "run", "merge-join", "-d", "a=hdd-sata-7200", "--work-mem", "8kB"),
    C("run-work-mem-beyond-memory", "give a smaller --work-mem", "run", "merge-join", "-d", "a=hdd-sata-7200",
      "--work-mem", "100TB"),
    C("run-clients-beyond-connections", "--clients 100: the run needs 102 server connections", "run", "oltp", "-d",
      "a=hdd-sata-7200", "--clients", "100"),
    C("run-driver-unknown", "'perl' is not one of", "run", "oltp", "-d", "a=hdd-sata-7200", "--driver", "perl"),
    C("run-warehouses-beyond-the-disk", "oltp would not fit", "run", "oltp", "-d", "a=hdd-sata-7200",
      "--warehouses", str(10**8)),
    C("run-duration-beyond-the-disk", "oltp would not fit", "run", "oltp", "-d", "a=hdd-sata-7200", "--duration",
      str(10**12)),
    C("run-dump-jobs-beyond-connections", "--jobs 30", "run", "build", "-d", "a=hdd-sata-7200", "--jobs", "30"),
    C("run-orders-beyond-the-disk", "io-modes would not fit", "run", "io-modes", "-d", "a=hdd-sata-7200", "--orders",
      str(10**13)),
    C("run-departments-beyond-the-disk", "merge-join would not fit", "run", "merge-join", "-d", "a=hdd-sata-7200",
      "--departments", str(10**9), "--employees", str(10**5)),
    # -- run: where things go
    C("run-workspace-is-a-file", "not a folder", *RUN, "--workspace", "{fx}/afile"),
    C("csv-folder-is-a-file", "--csv", "--csv", "{fx}/afile", *RUN),
    C("run-workspace-under-a-file", "no such folder", *RUN, "--workspace", "{fx}/afile/ws"),
    C("run-workspace-missing", "no such folder; create it first", *RUN, "--workspace", "/nonexistent-dbtier/ws"),
    C("run-workspace-proc", "/proc is the kernel's", *RUN, "--workspace", "/proc"),
    C("run-workspace-under-proc", "/proc is the kernel's", *RUN, "--workspace", "/proc/self"),
    C("run-workspace-too-deep-for-a-socket", "too deep for a unix socket path", *RUN, "--workspace", "{deep}"),
    C("run-output-is-a-file", "a file is there, not a folder", *RUN, "-o", "{fx}/afile"),
    C("run-output-under-a-file", "no folder can be made under it", *RUN, "-o", "{fx}/afile/results"),
    C("run-output-in-proc", "/proc is the kernel's", *RUN, "-o", "/proc/dbtier-results"),
    C("run-json-folder-missing", "the folder /nonexistent-dbtier does not exist", *RUN, "--json",
      "/nonexistent-dbtier/x.json"),
    C("run-json-under-a-file", "is a file, not a folder", *RUN, "--json", "{fx}/afile/x.json"),
    C("run-json-is-a-folder", "a folder is there; give a file name", *RUN, "--json", "{fx}"),
    C("run-json-in-proc", "/proc is the kernel's", *RUN, "--json", "/proc/x.json"),
    C("run-pg-bin-missing", "--pg-bin /nonexistent-dbtier: not a directory", *RUN, "--pg-bin", "/nonexistent-dbtier"),
    C("run-pg-bin-not-postgres", "no postgres or initdb there", *RUN, "--pg-bin", "/usr/bin"),
    C("run-pg-bin-not-a-program", "Exec format error", *RUN, "--pg-bin", "{fx}/fakepg"),
    C("run-pg-bin-too-old", "holds PostgreSQL 9.6; dbtier needs 18 or later", *RUN, "--pg-bin", "{fx}/oldpg"),
    C("run-output-through-a-link-in-a-circle", "is a link that leads nowhere", *RUN, "-o", "{fx}/loop/results"),
    C("run-output-a-dangling-link", "is a link that leads nowhere", *RUN, "-o", "{fx}/dangling_dir"),
    C("run-json-under-a-dangling-link", "is a link that leads nowhere", *RUN, "--json", "{fx}/dangling_dir/r.json"),
    # -- run sql / run pgbench: a dump to restore (refused before a server starts)
    *[C(f"{cmd}-restore-{cid}", msg, "run", cmd, *extra, "-d", "a=ram-san", "--restore", dump)
      for cmd, extra in (("sql", ("--run", "{fx}/q.sql")), ("pgbench", ("-t", "1")))
      for cid, msg, dump in (
          ("cut-short", "the dump is incomplete", "{fx}/cut.sql"),
          ("marker-not-at-the-end", "the dump is incomplete", "{fx}/marker_early.sql"),
          ("a-fifo", "neither a file nor a folder (a pipe or a device)", "{fx}/dump.fifo"),
          ("a-device", "neither a file nor a folder (a pipe or a device)", "/dev/null"),
          ("missing", "no such file or folder", "{fx}/nosuch.dump"),
          ("dangling-link", "no such file or folder", "{fx}/dangling_dump"),
          ("empty", "nor SQL text", "{fx}/empty.sql"),
          ("binary", "nor SQL text", "{fx}/binary.dump"),
          ("utf16", "nor SQL text", "{fx}/utf16.sql"),
          ("folder-without-toc", "a folder without toc.dat", "{fx}/notadump"),
          ("folder-with-a-link", "blobs.toc is a link", "{fx}/dirdump_link"),
          ("folder-with-a-folder", "sub is not a file", "{fx}/dirdump_sub"),
          ("toc-a-folder", "toc.dat is not a file", "{fx}/dirdump_tocdir"),
      )],
    C("sql-restore-jobs-zero", "--jobs must be at least 1", "run", "sql", "--run", "{fx}/q.sql", "-d", "a=ram-san",
      "--restore", "{fx}/good.sql", "-j", "0"),
    C("sql-restore-jobs-17", "--jobs must be at most 16", "run", "sql", "--run", "{fx}/q.sql", "-d", "a=ram-san",
      "--restore", "{fx}/good.sql", "-j", "17"),
    C("pgbench-restore-jobs-zero", "--restore-jobs must be at least 1", "run", "pgbench", "-t", "1", "-d", "a=ram-san",
      "--restore", "{fx}/good.sql", "--restore-jobs", "0"),
    C("pgbench-restore-with-init", "-i makes pgbench's own tables", "run", "pgbench", "-i", "-t", "1", "-d",
      "a=ram-san", "--restore", "{fx}/good.sql"),
    # -- a profile of one's own, wherever a profile name goes
    C("profile-kind-a-list", "'kind' must be one of", "run", "random-index", "-d", "a={fx}/kind_list.toml"),
    C("profile-binary", "is not UTF-8 text", "run", "random-index", "-d", "a={fx}/binary.toml"),
    C("profile-name-a-number", "'name' must be a string", "run", "random-index", "-d", "a={fx}/name_int.toml"),
    C("profile-summary-a-list", "'summary' must be a string", "devices", "show", "{fx}/summary_list.toml"),
    C("profile-param-a-string", "rpm must be a number", "devices", "show", "{fx}/param_str.toml"),
    C("profile-param-a-table", "rpm must be a number", "iobench", "-d", "r={fx}/param_table.toml"),
    C("profile-param-nan", "rpm = nan is not a number", "devices", "show", "{fx}/param_nan.toml"),
    C("profile-param-inf", "rpm = inf is not a number", "run", "random-index", "-d", "a={fx}/param_inf.toml"),
    C("profile-param-out-of-range", "outside 3600..20000", "devices", "show", "{fx}/param_range.toml"),
    C("profile-param-unknown", "did you mean 'rpm'", "devices", "show", "{fx}/param_unknown.toml"),
    C("profile-param-at-top-level", "device parameters go under [params]", "devices", "show", "{fx}/top_key.toml"),
    C("profile-not-toml", "not valid TOML", "exec", "-d", "d={fx}/bad_syntax.toml:{dev}", "--", "true"),
    C("profile-real-with-params", "real devices have no parameter", "devices", "show", "{fx}/real_params.toml"),
    C("profile-a-folder", "is a folder; give a .toml file", "run", "random-index", "-d", "a={fx}/folder.toml"),
    C("profile-a-fifo", "is not a regular file", "devices", "show", "{fx}/fifo.toml"),
    C("profile-dangling-link", "cannot read profile", "devices", "show", "{fx}/dangling.toml"),
    C("profile-too-big", "too large for a profile", "devices", "show", "{fx}/big.toml"),
    C("profile-missing", "No such file or directory", "devices", "show", "{fx}/missing.toml"),
    C("profile-name-too-long", "unknown device profile", "devices", "show", "x" * 5000),
    # -- devices
    C("devices-unknown-profile", "did you mean 'hdd-sata-7200'?", "devices", "show", "hdd-sata-720"),
    C("devices-show-without-name", "Missing argument 'NAME'", "devices", "show"),
    C("devices-unknown-subcommand", "No such command 'list'", "devices", "list"),
    C("devices-array-of-one", "2 to 16 members", "devices", "show", "1xhdd-sata-750"),
    C("devices-array-too-many", "2 to 16 members", "devices", "show", "17xhdd-sata-750"),
    C("devices-array-of-real", "cannot be striped", "devices", "show", "4xreal"),
    C("devices-stripe-too-small", "the stripe is 4k to 64m", "devices", "show", "4xhdd-sata-750@2k"),
    # -- demo
    C("demo-an-option-of-run", "No such option '--rows'", "demo", "--rows", "10"),
    C("demo-quick-takes-no-value", "Got unexpected extra argument (yes)", "demo", "--quick", "yes"),
    C("demo-workspace-too-deep-for-a-socket", "too deep for a unix socket path", "demo", "--workspace", "{deep}"),
    C("demo-output-is-a-file", "a file is there, not a folder", "demo", "-o", "{fx}/afile"),
    C("demo-workspace-in-proc", "/proc is the kernel's", "demo", "--workspace", "/proc/self"),
    C("demo-output-under-a-file", "no folder can be made under it", "demo", "-o", "{fx}/afile/r"),
    C("demo-pg-bin-missing", "not a directory", "demo", "--pg-bin", "/nonexistent-dbtier"),
    # -- reproduce
    C("reproduce-only-unknown", "no seed article 009", "reproduce", "--only", "009"),
    C("reproduce-only-empty", "give seed articles", "reproduce", "--only", ""),
    C("reproduce-only-commas", "give seed articles", "reproduce", "--only", ",,"),
    C("reproduce-workspace-is-a-file", "not a folder", "reproduce", "--quick", "--workspace", "{fx}/afile"),
    C("reproduce-output-in-proc", "/proc is the kernel's", "reproduce", "--quick", "-o", "/proc/r"),
    C("reproduce-pg-bin-not-postgres", "no postgres or initdb there", "reproduce", "--quick", "--pg-bin", "/usr/bin"),
    # -- exec
    C("exec-no-device", "give at least one --device", "exec", "--", "true"),
    C("exec-no-command", "Missing argument 'COMMAND...'", *EXEC),
    C("exec-command-not-found", "command not found", *EXEC, "--", "no-such-command-dbtier"),
    C("exec-command-a-folder", "it is a folder, not a program", *EXEC, "--", "{fx}"),
    C("exec-command-not-executable", "permission denied", *EXEC, "--", "{fx}/afile"),
    C("exec-unknown-option", "no such option of dbtier exec", *EXEC, "--colour", "--", "true"),
    C("exec-device-without-profile", "expected NAME=PROFILE", "exec", "-d", "{dev}", "--", "true"),
    C("exec-device-folder-missing", "is not a directory", "exec", "-d", "/nonexistent-dbtier=ram-san", "--", "true"),
    C("exec-device-unknown-profile", "unknown device profile", "exec", "-d", "d=ssd-sata-mcl:{dev}", "--", "true"),
    C("exec-device-bad-name", "must be a letter then letters", "exec", "-d", "b@d:{dev}=ram-san", "--", "true"),
    C("exec-same-folder-twice", "are the same directory", *EXEC, "-d", "x:{dev}=ssd-sata-mlc", "--", "true"),
    C("exec-trace-is-a-file", "a file is there; give a folder", *EXEC, "--trace", "{fx}/afile", "--", "true"),
    C("exec-trace-under-a-file", "is a file, not a folder", *EXEC, "--trace", "{fx}/afile/t", "--", "true"),
    C("exec-trace-folder-missing", "does not exist; create it first", *EXEC, "--trace", "/nonexistent-dbtier/t",
      "--", "true"),
    C("exec-trace-in-proc", "/proc is the kernel's", *EXEC, "--trace", "/proc/self", "--", "true"),
    C("exec-trace-holds-a-trace", "holds a trace already", *EXEC, "--trace", "{fx}/t_no_records", "--", "true"),
    C("exec-json-is-a-folder", "a folder is there; give a file name", *EXEC, "--json", "{fx}", "--", "true"),
    C("exec-trace-a-dangling-link", "a link that leads nowhere", *EXEC, "--trace", "{fx}/dangling_dir", "--", "true"),
    C("exec-trace-a-link-in-a-circle", "a link that leads nowhere", *EXEC, "--trace", "{fx}/loop", "--", "true"),
    C("exec-workspace-is-a-file", "not a folder", *EXEC, "--workspace", "{fx}/afile", "--", "true"),
    # -- iobench
    C("iobench-no-device", "Missing option '--device'", "iobench"),
    C("iobench-device-without-profile", "expected NAME=PROFILE", "iobench", "-d", "ram"),
    C("iobench-profile-did-you-mean", "did you mean 'ram-san'", "iobench", "-d", "r=ram-sam"),
    C("iobench-real-without-folder", "needs its folder", "iobench", "-d", "d=real"),
    C("iobench-device-folder-in-proc", "/proc is the kernel's", "iobench", "-d", "r=ram-san:/proc"),
    C("iobench-runtime-nan", "--runtime nan", *IOB, "--runtime", "nan"),
    C("iobench-runtime-inf", "--runtime inf", *IOB, "--runtime", "inf"),
    C("iobench-runtime-negative", "--runtime -1", *IOB, "--runtime", "-1"),
    C("iobench-runtime-zero", "--runtime 0", *IOB, "--runtime", "0"),
    C("iobench-runtime-huge", "at most 3600", *IOB, "--runtime", "1e300"),
    C("iobench-runtime-text", "is not a valid float", *IOB, "--runtime", "soon"),
    C("iobench-bs-not-a-multiple-of-512", "--bs 1000: block sizes are multiples of 512", *IOB, "--bs", "1000"),
    C("iobench-bs-beyond-64m", "--bs 128m: block sizes", *IOB, "--bs", "8k,128m"),
    C("iobench-bs-zero", "--bs '0'", *IOB, "--bs", "0"),
    C("iobench-bs-none", "--bs: give at least one value", *IOB, "--bs", ","),
    C("iobench-bs-larger-than-size", "must hold at least one block", *IOB, "--bs", "1m", "--size", "64k"),
    C("iobench-jobs-zero", "from 1 to 64", *IOB, "--jobs", "0"),
    C("iobench-jobs-65", "from 1 to 64", *IOB, "--jobs", "1,65"),
    C("iobench-jobs-text", "--jobs 'x'", *IOB, "--jobs", "x"),
    C("iobench-mode", "--mode sync: choose from", *IOB, "--mode", "sync"),
    C("iobench-rw", "--rw randomread: choose from", *IOB, "--rw", "randomread"),
    C("iobench-engine", "--engine iometer: choose from", *IOB, "--engine", "iometer"),
    C("iobench-size-zero", "--size '0'", *IOB, "--size", "0"),
    C("iobench-size-text", "--size 'abc'", *IOB, "--size", "abc"),
    C("iobench-size-beyond-the-disk", "iobench would not fit", "iobench", "-d", "d=real:{dev}", "--size",
      "100000000g"),
    C("iobench-jobs-times-size-beyond-tmpfs", "would not fit", *IOB, "--workspace", "{shm_ws}", "--jobs", "64",
      "--size", "{tmpfs_gib}g"),
    C("iobench-page-cache-bare-number", "give a unit", *IOB, "--page-cache", "32"),
    C("iobench-page-cache-tiny", "give at least 64kB", *IOB, "--page-cache", "1kB"),
    C("iobench-page-cache-beyond-memory", "larger than this machine's", *IOB, "--page-cache", "200TB"),
    C("iobench-json-folder-missing", "does not exist; create it first", *IOB, "--json", "/nonexistent-dbtier/x.json"),
    C("iobench-workspace-in-proc", "/proc is the kernel's", *IOB, "--workspace", "/proc"),
    # -- trace
    C("trace-not-a-folder", "is not a directory", "trace", "{fx}/afile"),
    C("trace-missing", "is not a directory", "trace", "/nonexistent-dbtier"),
    C("trace-folder-without-a-trace", "is not a dbtier trace", "trace", "{fx}/t_empty"),
    C("trace-meta-not-json", "meta.json: not valid JSON", "trace", "{fx}/t_meta_not_json"),
    C("trace-meta-without-devices", "no list of named devices", "trace", "{fx}/t_meta_no_devices"),
    C("trace-files-malformed", "files.json: not a dbtier trace's file table", "trace", "{fx}/t_files_bad"),
    C("trace-records-cut-short", "not a whole number of 64-byte trace records", "trace", "{fx}/t_cut"),
    C("trace-device-beyond-the-list", "names device 5, but the trace lists 1", "trace", "{fx}/t_dev_beyond"),
    C("trace-unknown-operation", "unknown operation 99", "trace", "{fx}/t_bad_op"),
    C("trace-no-records", "the trace holds no I/O", "trace", "{fx}/t_no_records"),
    C("predict-missing", "is not a directory", "predict", "/nonexistent-dbtier"),
    C("predict-a-trace-not-a-run", "not a dbtier run directory", "predict", "{fx}/t_good"),
    C("predict-json-folder-missing", "does not exist; create it first", "predict", "{fx}/t_good", "--json",
      "/nonexistent-dbtier/p.json"),
    C("trace-output-folder-missing", "does not exist; create it first", "trace", "{fx}/t_good", "-o",
      "/nonexistent-dbtier/t.parquet"),
    C("trace-output-is-a-folder", "a folder is there; give a file name", "trace", "{fx}/t_good", "-o", "{fx}"),
    C("trace-output-through-a-link-in-a-circle", "is a link that leads nowhere", "trace", "{fx}/t_good", "-o",
      "{fx}/loop/t.parquet"),
    C("trace-a-link-in-a-circle", "is not a directory", "trace", "{fx}/loop"),
]
assert len({c.id for c in CASES}) == len(CASES)


# -- hostile inputs, made once -------------------------------------------------------------------

PROFILES = {
    "kind_list.toml": b'kind = ["hdd"]\n',
    "binary.toml": b"\xff\xfe\x00kind = 'hdd'\n",
    "name_int.toml": b'kind = "hdd"\nname = 5\n',
    "summary_list.toml": b'kind = "hdd"\nsummary = [1]\n',
    "param_str.toml": b'kind = "hdd"\n[params]\nrpm = "fast"\n',
    "param_table.toml": b'kind = "hdd"\n[params]\nrpm = {a = 1}\n',
    "param_nan.toml": b'kind = "hdd"\n[params]\nrpm = nan\n',
    "param_inf.toml": b'kind = "hdd"\n[params]\nrpm = inf\n',
    "param_range.toml": b'kind = "hdd"\n[params]\nrpm = 100\n',
    "param_unknown.toml": b'kind = "hdd"\n[params]\nrmp = 5400\n',
    "top_key.toml": b'kind = "hdd"\nrpm = 5400\n',
    "bad_syntax.toml": b'kind = "hdd"\n[params\n',
    "real_params.toml": b'kind = "real"\n[params]\nrpm = 5400\n',
    "big.toml": b"# " + b"x" * (2 << 20) + b'\nkind = "hdd"\n',
}


def _trace(folder: Path, meta=None, files=None, records=None, raw: bytes | None = None) -> None:
    from dbtier.measure.trace import CALL, RECORD

    folder.mkdir()
    (folder / "layout.json").write_text('{"chunk_bytes": 1048576, "chunks": [], "cursors": [0]}')
    if meta is not None:
        (folder / "meta.json").write_text(meta)
    if files is not None:
        (folder / "files.json").write_text(files)
    if records is not None:
        recs = np.zeros(len(records), dtype=RECORD)  # (op, device index) each; file 0, 8 KiB
        recs["submit_ns"] = 1000 + np.arange(len(records))
        recs["len"] = 8192
        recs["kind"] = CALL
        recs["op"] = [op for op, _dev in records]
        recs["dev"] = [dev for _op, dev in records]
        recs.tofile(folder / "iotap-1-0.trc")
    if raw is not None:
        (folder / "iotap-1-0.trc").write_bytes(raw)


def _open_folder(parent: str | None = None) -> Path:
    """A fresh folder the servers' user may pass through (as a user's own would be): otherwise the check
    that it can would answer first."""
    path = Path(tempfile.mkdtemp(prefix="badinput-", dir=parent))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def scratch():
    path = _open_folder()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def hostile(scratch):
    """{fx}: a folder of bad inputs (profiles, traces, a plain file); {deep}: an empty folder too deep for a
    socket path; {shm_ws}: an empty folder on tmpfs; sizes larger than this machine's tmpfs."""
    fx = scratch / "hostile"
    fx.mkdir()
    (fx / "afile").write_text("a plain file\n")
    for name, data in PROFILES.items():
        (fx / name).write_bytes(data)
    (fx / "folder.toml").mkdir()
    os.mkfifo(fx / "fifo.toml")
    (fx / "dangling.toml").symlink_to(fx / "nowhere")
    (fx / "dangling_dir").symlink_to(fx / "nowhere")
    (fx / "loop").symlink_to(fx / "loop")
    for name, text in (("fakepg", "not a program\n"), ("oldpg", '#!/bin/sh\necho "postgres (PostgreSQL) 9.6.24"\n')):
        (fx / name).mkdir()
        for exe in ("postgres", "initdb"):
            (fx / name / exe).write_text(text)
            (fx / name / exe).chmod(0o755)
    fmt = native.trace_format()
    meta, files = f'{{"trace_format": {fmt}, "devices": [{{"name": "a"}}]}}', '[[0, 0, "/d/base/5/16384"]]'
    _trace(fx / "t_empty")
    _trace(fx / "t_meta_not_json", "{devices", files, [(1, 0)])
    _trace(fx / "t_meta_no_devices", f'{{"trace_format": {fmt}}}', files, [(1, 0)])
    _trace(fx / "t_files_bad", meta, '{"0": "/d/x"}', [(1, 0)])
    _trace(fx / "t_cut", meta, files, raw=b"\x01" * 100)
    _trace(fx / "t_dev_beyond", meta, files, [(1, 0), (2, 5)])
    _trace(fx / "t_bad_op", meta, files, [(99, 0)])
    _trace(fx / "t_no_records", meta, files, [])
    _trace(fx / "t_good", meta, files, [(1, 0), (2, 0), (3, 0)])
    complete = "--\n-- PostgreSQL database dump complete\n--\n"
    (fx / "q.sql").write_text("SELECT 1;\n")
    (fx / "good.sql").write_text("CREATE TABLE t (a int);\n" + complete)
    (fx / "cut.sql").write_text("CREATE TABLE t (a int);\nCOPY t (a) FROM stdin;\n1\n2\n")
    (fx / "marker_early.sql").write_text("CREATE TABLE t (a int);\n" + complete + "-- more\n" * 20000)
    os.mkfifo(fx / "dump.fifo")
    (fx / "dangling_dump").symlink_to(fx / "nowhere.dump")
    (fx / "empty.sql").write_text("")
    (fx / "binary.dump").write_bytes(b"\x89\x00\xff" * 100)
    (fx / "utf16.sql").write_bytes("CREATE TABLE t (a int);\n".encode("utf-16"))
    (fx / "notadump").mkdir()
    for name in ("dirdump_link", "dirdump_sub", "dirdump_tocdir"):
        (fx / name).mkdir()
    (fx / "dirdump_link" / "toc.dat").write_bytes(b"PGDMP")
    (fx / "dirdump_link" / "blobs.toc").symlink_to("/etc/passwd")
    (fx / "dirdump_sub" / "toc.dat").write_bytes(b"PGDMP")
    (fx / "dirdump_sub" / "sub").mkdir()
    (fx / "dirdump_tocdir" / "toc.dat").mkdir()
    deep = fx / ("d" * 90)
    deep.mkdir()
    shm_ws = _open_folder("/dev/shm")
    st = os.statvfs(shm_ws)
    free = st.f_bavail * st.f_frsize
    total_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemTotal:"))
    values = {"fx": str(fx), "deep": str(deep), "shm_ws": str(shm_ws), "memory_0_4": f"{total_kb * 2 // 5}kB",
              "tmpfs_rows": str(2 * free // 8192 + 1000), "tmpfs_gib": str(math.ceil(free / 64 / 2**30) + 1)}
    yield values
    shutil.rmtree(shm_ws, ignore_errors=True)


# -- running the cases ----------------------------------------------------------------------------

#: where each command takes the places it writes to: given first, so that a case's own value wins
STANDARD = {
    "run": (2, ("--workspace", "{ws}", "-o", "{out}/results", "--json", "{out}/result.json")),
    "demo": (1, ("--workspace", "{ws}", "-o", "{out}/results")),
    "reproduce": (1, ("--workspace", "{ws}", "-o", "{out}/results")),
    "exec": (1, ("--workspace", "{ws}", "--json", "{out}/result.json")),
    "iobench": (1, ("--workspace", "{ws}", "--json", "{out}/result.json")),
    "trace": (1, ("-o", "{out}/trace.parquet")),
}


@dataclass
class Outcome:
    proc: subprocess.CompletedProcess
    fresh: dict[str, Path]  # the folders that must still be empty


def _run_case(case: Case, values: dict[str, str], root: Path) -> Outcome:
    fresh = {}
    for name in ("ws", "out", "dev", "tmp"):
        fresh[name] = root / case.id / name
        fresh[name].mkdir(parents=True)
    subst = {**values, **{k: str(v) for k, v in fresh.items()}}
    args = list(case.args)
    if args and args[0] in STANDARD:
        at, extra = STANDARD[args[0]]
        args[at:at] = extra
    args = [a.format(**subst) if "{" in a else a for a in args]
    proc = dbtier(*args, env={**os.environ, "TMPDIR": str(fresh["tmp"])}, timeout=120)
    return Outcome(proc, fresh)


def _shared_entries() -> set[Path]:
    out = set()
    for folder in SHARED:
        for entry in folder.iterdir():
            if entry.name.startswith("dbtier") and not entry.name.startswith(FIXTURE_PREFIXES):
                out.add(entry)
    return out


@pytest.fixture(scope="module")
def outcomes(request, hostile, scratch):
    """Runs the selected cases, a few at a time; returns their outcomes and what appeared meanwhile in
    /dev/shm and /tmp under a dbtier name."""
    wanted = {item.callspec.params["case"].id for item in request.session.items
              if getattr(item, "callspec", None) and "case" in item.callspec.params
              and item.module is request.module}
    root = scratch / "cases"
    before = _shared_entries()
    with ThreadPoolExecutor(max_workers=max(2, 2 * (os.cpu_count() or 1))) as pool:
        futures = {c.id: pool.submit(_run_case, c, hostile, root) for c in CASES if c.id in wanted}
        results = {cid: f.result() for cid, f in futures.items()}
    appeared = _shared_entries() - before
    return results, appeared


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_status_2_and_nothing_made(case, outcomes):
    results, _ = outcomes
    out = results[case.id]
    assert_refused_in_one_line(out.proc, case.message, out.fresh)
    assert not (out.fresh["ws"] / f"dbtier-{UID}").exists()


def test_nothing_appeared_in_dev_shm_or_tmp(outcomes):
    """No case made a dbtier-named entry in the shared folders (the default workspace, a scratch folder)."""
    _, appeared = outcomes
    assert not appeared, sorted(map(str, appeared))


def test_the_hostile_inputs_were_left_as_they_were(hostile, outcomes):
    """Nothing was written beside the bad inputs either (a trace's Parquet file, a profile's)."""
    fx = Path(hostile["fx"])
    assert not list(fx.rglob("*.parquet")) and not list(fx.rglob("*.tmp"))
    assert not list(Path(hostile["deep"]).iterdir()) and not list(Path(hostile["shm_ws"]).iterdir())


def test_enough_cases():
    commands = {c.args[0] for c in CASES}
    assert len(CASES) >= 60 and {"run", "demo", "reproduce", "exec", "iobench", "devices", "trace"} <= commands


# -- the checks as functions ----------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    (b'kind = ["hdd"]\n', "'kind' must be one of"),
    (b'kind = 7\n', "'kind' must be one of"),
    (b'kind = "hdd"\nname = 5\n', "'name' must be a string"),
    (b'kind = "hdd"\nname = "two\\nlines"\n', "one line of at most 500 printable"),
    (b'kind = "hdd"\nsummary = {a = 1}\n', "'summary' must be a string"),
    (b'kind = "hdd"\n[params]\nrpm = nan\n', "is not a number"),
    (b'kind = "hdd"\n[params]\nrpm = -inf\n', "is not a number"),
    (b'kind = "hdd"\n[params]\nrpm = 1e400\n', "is not a number"),
    (b'kind = "hdd"\n[params]\nrpm = [5400]\n', "must be a number"),
    (b'kind = "hdd"\nparams = 5\n', "[params] must be a table"),
    (b'kind = "hdd"\nparam = {rpm = 5400}\n', "did you mean 'params'"),
    (b'\xc3\x28', "not UTF-8 text"),
])
def test_hostile_profile_files_are_refused(tmp_path, text, message):
    from dbtier.devices import profile

    f = tmp_path / "p.toml"
    f.write_bytes(text)
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        profile.load(str(f))


def test_a_good_profile_still_loads(tmp_path):
    from dbtier.devices import profile

    f = tmp_path / "laptop.toml"
    f.write_text('kind = "hdd"\nsummary = "a 5400 rpm laptop disk"\n[params]\nrpm = 5400\nwrite_cache = true\n')
    p = profile.load(str(f))
    assert (p.name, p.summary, p.params["rpm"], p.params["write_cache"]) == ("laptop", "a 5400 rpm laptop disk", 5400, 1)


def test_own_size_options_need_a_unit():
    from dbtier.units import parse_option_size, parse_size

    assert parse_option_size("32MB", "--cache") == 32 << 20 and parse_option_size("128kB", "--cache") == 128 << 10
    with pytest.raises(UserError, match="give a unit, e.g. 32MB"):
        parse_option_size("32", "--cache")
    assert parse_size("32", "shared_buffers") == 32 * 8192  # --set keeps PostgreSQL's own syntax


def test_block_sizes_are_shown_exactly():
    from dbtier.devices.bench.jobs import size_label

    assert [size_label(n) for n in (512, 1000, 1536, 4096, 8192, 1 << 20, 3 << 20, 1 << 30)] == \
        ["512", "1000", "1536", "4k", "8k", "1m", "3m", "1g"]


def test_page_cache_state_is_about_40_bytes_a_page():
    """The size a run plans for its state file comes from the C layout: about 36 bytes a cached page."""
    from dbtier.devices.native import state_bytes

    for size in (64 << 20, 1 << 30, 200 << 30):
        per_page = (state_bytes(size) - state_bytes(0)) / (size / 4096)
        assert 32 <= per_page <= 48 + (40 * 65536 + 8192) / (size / 4096)


def test_footprints_grow_with_their_parameters():
    from dbtier.workloads import registry

    small = {name: registry.get(name)().footprint() for name in registry.names()
             if not registry.get(name).user_objects}  # a user's own workload's data is the user's
    for name, foot in small.items():
        assert foot.data > 0 and foot.wal > 0, name
    t = registry.get("random-index")(rows=10_000).footprint()
    assert t.objects["t"] >= 10_000 * 8192  # seed 000: a row per 8 KiB page
    short = {"duration": 1, "warmup": 0}  # the OLTP run's own growth aside
    for name, param, base in (("random-index", "rows", {}), ("index-range", "rows", {}), ("insert-loop", "rows", {}),
                              ("update-locality", "rows", {}), ("merge-join", "departments", {}),
                              ("oltp", "warehouses", short), ("build", "warehouses", {}), ("io-modes", "orders", {})):
        cls = registry.get(name)
        default = next(p.default for p in cls.params if p.key == param)
        assert cls(**base, **{param: 10 * default}).footprint().data > 5 * cls(**base).footprint().data, name
    longer = registry.get("oltp")(duration=600).footprint()
    assert longer.data > small["oltp"].data and longer.wal > small["oltp"].wal  # what the transactions add


def test_a_run_that_would_not_fit_in_memory_is_refused(monkeypatch, scratch):
    """The memory check, with this machine made small: nothing is made."""
    from dbtier.devices import hostfs
    from dbtier.engines.postgres import placement
    from dbtier.experiments import preflight
    from dbtier.devices.spec import parse_all
    from dbtier.engines.postgres.lab import LabOptions
    from dbtier.workloads import registry

    workspace = _open_folder(str(scratch))
    monkeypatch.setattr(hostfs, "mem_available", lambda: 64 << 20)
    requests = parse_all(["a=hdd-sata-7200"])
    options = LabOptions(workspace=workspace)
    work = registry.get("random-index")(rows=16_000)
    with pytest.raises(UserError, match="would not fit in memory"):
        preflight.check_run(work, requests, placement.parse([], ["a"]), options)
    assert not list(workspace.iterdir())


def test_json_is_never_written_into_a_folder_it_would_have_to_make(tmp_path):
    from dbtier.report import jsonout

    with pytest.raises(UserError, match="cannot write"):
        jsonout.write(tmp_path / "missing" / "x.json", {"a": 1})
    assert not (tmp_path / "missing").exists()

