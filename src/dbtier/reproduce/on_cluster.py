"""`dbtier reproduce --cluster`: each article on a node of a Ray cluster, its CPU calibration and its
runs together on that node (an article's --cpu-scale is the CPU it ran on), after each node's
reference run; the articles' folders gathered into one reproduction."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable


def reproduce(seeds: list[str], quick: bool, pg_bin: Path | None, cluster: str, folder: Path,
              say: Callable[[str], None]) -> dict:
    """The reproduction's document, as reproduce.run.reproduce makes it, with the nodes ("nodes": their
    reference runs' offsets; each article's "node")."""
    from dbtier.cluster import runs as cluster_runs

    t0 = time.monotonic()
    work = {"quick": quick, "pg_bin": str(pg_bin) if pg_bin else None}
    with cluster_runs.connected(cluster, folder, say) as (pool, nodes):
        finished = cluster_runs.run_jobs(pool, seeds, lambda seed: {**work, "reproduce": seed}, folder, say,
                                         lambda seed: f"seed {seed}")
    articles = {}
    for seed, article_dir, nd in finished:
        art = json.loads((article_dir / "article.json").read_text())
        art.pop("elapsed_s", None)
        articles[seed] = {**art, "node": nd.name}
    return {"kind": "reproduce", "articles": [articles[s] for s in seeds], "elapsed_s": time.monotonic() - t0,
            "nodes": nodes}
