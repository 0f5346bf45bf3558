"""The Python example of docs/python.md (the README links to it), run as it stands: real runs, and every
table a DataFrame with the run's figures."""

import os
import re
from pathlib import Path

import pandas as pd
import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def readme_example() -> str:
    text = PAGE.read_text()
    section = text[text.index("# dbtier from Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_and_returns_dataframes(tmp_path, capsys):
    code = readme_example()
    assert "dbtier.run(" in code and "dbtier.compare(" in code
    here = os.getcwd()
    os.chdir(tmp_path)  # its run directories go to ./results, as the commands' do
    try:
        scope: dict = {}
        exec(compile(code, str(PAGE), "exec"), scope)
    finally:
        os.chdir(here)
    disk, both = scope["disk"], scope["both"]
    for result in (disk, both):
        for table in ("runs", "phases", "devices", "objects", "wait_events"):
            frame = getattr(result, table)
            assert isinstance(frame, pd.DataFrame) and len(frame) > 0, table
    assert isinstance(disk.trace, pd.DataFrame)  # empty: not traced
    # the tables hold the documents' figures
    assert disk.runs.loc[0, "elapsed_s"] == disk.doc["elapsed_s"]
    assert disk.devices.loc[0, "r_await"] == disk.doc["devices"][0]["iostat"]["r_await"]
    assert list(both.runs["run"]) == ["disk", "flash"]
    # 300 rows lie in the disk's own buffer in part (its read-ahead: how much depends on when each
    # read comes), yet each miss is a seek: the disk's reads take longer than the flash's, and the run
    # is faster on flash (about 4x each here; 2x keeps the host's timing out of the answer)
    disk_await, flash_await = both.devices["r_await"]
    assert disk_await > 2 * flash_await
    assert both.runs.loc[0, "speedup"] == 1.0 and both.runs.loc[1, "speedup"] > 1.5
    assert both.runs.loc[1, "speedup"] == both.doc["speedups"][1]
    # the comparison phase by phase (one phase here: the whole run's speed-up)
    assert list(both.comparison["layout"]) == ["disk", "flash"]
    assert both.comparison.loc[1, "speedup"] == pytest.approx(both.doc["speedups"][1])
    assert "speedup" in capsys.readouterr().out  # and it printed its tables
