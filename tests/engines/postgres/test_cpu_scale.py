"""--cpu-scale K on a real server: a CPU-bound query's answer comes K times later, and the server's
CPU time is K times its own (the dilation reported apart)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import dbtier, retry_while_host_steals

#: pure CPU in one backend, no I/O until the answer is sent: the set-returning function in the select
#: list, which PostgreSQL does not gather into a tuplestore (in FROM it would, and spill to a temp file)
QUERY = "SELECT sum(g::numeric * g) FROM (SELECT generate_series(1, 3000000) AS g) s;\n"


def _run(k: float, work, shm_dir) -> dict:
    out = work / f"k{k:g}.json"
    dbtier("run", "sql", "--setup", str(work / "setup.sql"), "--run", str(work / "run.sql"), "-d", "d=ram-san",
           "--cpu-scale", str(k), "-q", "--workspace", str(shm_dir), "--output", str(work / "runs"), "--json",
           str(out), check=True)
    return json.loads(out.read_text())


@pytest.mark.parametrize("k", [3.0])
def test_a_cpu_bound_query_takes_k_times_its_cpu(k, module_shm_dir, tmp_path):
    (tmp_path / "setup.sql").write_text("SELECT 1;\n")
    (tmp_path / "run.sql").write_text(QUERY)

    def attempt():
        doc = _run(k, tmp_path, module_shm_dir)
        (stmt,) = doc["metrics"]["statement_times"]
        return doc, stmt["elapsed_s"]

    def check(result):
        doc, statement_s = result
        assert doc["lab"]["cpu_scale"] == k
        dilation, cpu = doc["cpu_dilation_s"], doc["server_cpu_s"]
        own = cpu - dilation
        assert own > 0.1, doc
        # the answer waited for the dilation: the statement took its own CPU time once and K - 1 times
        # again, K / (K - 1) times the dilation (measured 0.97 to 0.98 of it: the dilation also holds
        # the other server processes')
        assert statement_s == pytest.approx(k / (k - 1) * dilation, rel=0.08), (statement_s, dilation)
        # the dilation is K - 1 times the server's own CPU time, within 10%: the server's CPU time also
        # holds what no call charges (the other processes', the I/O calls' own), measured 0.98 to 0.99 of
        # it. The wait sampler's backend is the measurement's, taken out of the server's CPU time, so it
        # must not be dilated either: when it was, the ratio was 1.12 to 1.16 and once 1.15 failed here.
        assert dilation == pytest.approx((k - 1) * own, rel=0.10), (dilation, own)
    retry_while_host_steals(attempt, check)
