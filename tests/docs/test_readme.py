"""The README as a newcomer uses it: a front door of at most 200 lines whose two setup commands are
the Makefile's, whose command table names every command, whose links (and the docs pages' links) lead
somewhere, and whose tutorial for a DBA's own database runs as printed, step by step, on a small
database made here first."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest

from dbtier.devices.spec import parse_all
from dbtier.engines.postgres import placement
from dbtier.engines.postgres.lab import Lab, LabOptions
from tests.conftest import dbtier

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TUTORIAL = "## Your own database, step by step"

#: The small database the tutorial runs on: the tables and indexes its queries.sql names, about 7 MB,
#: several times the lab's 32 MB cache's share of it after a cold restart.
MYDB = """
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, placed_on date NOT NULL,
                     amount numeric(10,2) NOT NULL, note text);
INSERT INTO orders SELECT g, g % 5000, date '2023-01-01' + (g % 730), (g % 997) * 1.5, repeat('x', 300)
  FROM generate_series(1, 20000) g;
CREATE INDEX orders_customer_idx ON orders (customer_id);
CREATE INDEX orders_placed_on_idx ON orders (placed_on);
"""


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def blocks(text: str, lang: str) -> list[str]:
    return [body for kind, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S) if kind == lang]


def commands(text: str) -> list[list[str]]:
    """The shell commands of the text's sh blocks, in order: continuation lines joined, comments dropped."""
    found = []
    for body in blocks(text, "sh"):
        for line in body.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                found.append(argv)
    return found


def tutorial() -> tuple[list[list[str]], str]:
    part = section(README.read_text(), TUTORIAL)
    (queries,) = blocks(part, "sql")
    return commands(part), queries


# -- the front door ----------------------------------------------------------------------------

def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= 200, f"README.md has {lines} lines: move reference text to docs/ (the README is the front door)"


def test_its_two_setup_commands_are_the_makefiles():
    shown = commands(section(README.read_text(), "## Install"))
    assert shown == [["make", "demo"], ["make", "test"]]
    targets = re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.M)
    assert {"demo", "test"} <= set(targets)


def test_its_command_table_names_every_command():
    from dbtier.cli import COMMANDS

    table = section(README.read_text(), "## Commands")
    rows = re.findall(r"^\| `dbtier ([a-z-]+)", table, re.M)
    assert sorted(rows) == sorted(COMMANDS)


def test_the_tutorial_follows_a_dbas_steps_in_order():
    steps, queries = tutorial()
    named = [argv[0] if argv[0] != "dbtier" else " ".join(argv[:2 if argv[1] != "run" else 3]) for argv in steps]
    assert named == ["pg_dump", "dbtier run sql", "dbtier predict", "dbtier advise", "dbtier compare"]
    run, _, advise = steps[1], steps[2], steps[3]
    assert {"--restore", "--run", "--trace"} <= set(run) and {"--fast", "--budget", "--verify"} <= set(advise)
    assert "-- phase:" in queries


HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """The anchors a Markdown renderer gives the page's headings: lower case, punctuation but dashes
    and underscores dropped, spaces as dashes."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in HEADING.findall(text)}


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_leads_to_a_file_and_heading_that_exist(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        file, _, fragment = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no such heading in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


# -- the tutorial, run -------------------------------------------------------------------------

def _make_mydb_and_dump(pg_dump: list[str], where: Path, workspace: Path) -> None:
    """A database `mydb` of the tables the tutorial's queries read, dumped by the tutorial's own
    pg_dump line (this PostgreSQL's pg_dump, connected to the lab's server) into `where`."""
    with Lab(parse_all(["d=ram-san"]), placement.parse([], ["d"]), LabOptions(workspace=workspace),
             say=lambda _l: None) as lab:
        db = lab.handle
        db.create_database("mydb")
        with db.connect("mydb") as conn:
            for statement in filter(str.strip, MYDB.split(";")):
                conn.execute(statement)
        client = dataclasses.replace(db.client("pg_dump", *pg_dump[1:], as_me=True), cwd=where)
        proc = client.run(timeout=300)
        assert proc.returncode == 0, proc.stderr


def test_the_tutorial_runs_as_printed(tmp_path, module_shm_dir):
    steps, queries = tutorial()
    _make_mydb_and_dump(steps[0], tmp_path, module_shm_dir)
    (tmp_path / "queries.sql").write_text(queries)
    said: dict[str, str] = {}
    for argv in steps[1:]:
        args = [said.get(a, a) for a in argv[1:]]  # RUN_DIR, and PLACE inside --config's text
        args = [re.sub(r"\bPLACE\b", said.get("PLACE", "PLACE"), a) for a in args]
        assert "RUN_DIR" not in args and not any(re.search(r"\bPLACE\b", a) for a in args), argv
        proc = dbtier(*args, cwd=tmp_path, timeout=900)
        assert proc.returncode == 0, f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        out = proc.stdout
        if argv[1] == "run":
            said["RUN_DIR"] = re.search(r"^run directory: (\S+)", out, re.M).group(1)
            run_dir = Path(said["RUN_DIR"])
            assert (run_dir / "trace.parquet").is_file() and (run_dir / "result.json").is_file()
            # the verdict the README shows: its first lines, storage-bound on the disk, busiest device named
            assert re.match(r"sql took [\d.]+ s and was storage-bound", out), out[:400]
            assert re.search(r"busiest device in its longest phase, \w+, hdd \(hdd-sata-7200\)", " ".join(out.split())), out[:400]
            phases = [ph["phase"] for ph in json.loads((run_dir / "result.json").read_text())["phases"]]
            assert phases == ["lookups", "report"]
        elif argv[1] == "predict":
            assert out.startswith("Predicted: sql would take"), out[:400]
        elif argv[1] == "advise":
            said["PLACE"] = re.search(r"^Use it: --place (\S+)$", out, re.M).group(1)
            assert re.search(r"^Verified: run live", out, re.M), out
            (advice,) = (tmp_path / "results").glob("advise-sql-*")
            assert len(json.loads((advice / "result.json").read_text())["verify"]) == 1
        elif argv[1] == "compare":
            (comparison,) = (tmp_path / "results").glob("compare-sql-*")
            doc = json.loads((comparison / "result.json").read_text())
            assert [c["name"] for c in doc["configurations"]] == ["now", "advised"]
            # 20 GB holds all of this database: the advice puts what it reads on NVMe, which the disk's
            # 5 ms reads make several times faster (2x keeps the host's timing out of the answer)
            assert doc["speedups"][0] == 1.0 and doc["speedups"][1] > 2, doc["speedups"]
            # the dump the run restored was kept: advise --verify and compare copied it, restoring nothing
            assert "reusing the loaded cluster from" in out, out[:400]
    assert set(said) == {"RUN_DIR", "PLACE"}
    # the tutorial's commands use the default workspace: what they kept there goes
    key = json.loads((Path(said["RUN_DIR"]) / "result.json").read_text())["loaded_cluster"]["key"]
    dbtier("labs", "remove", key, check=True)
