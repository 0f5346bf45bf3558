"""`dbtier reproduce --cluster`: each article on a node of a Ray cluster, its CPU calibration and its
runs together on that node (an article's --cpu-scale is the CPU it ran on), after each node's
reference run; the articles' folders gathered into one reproduction."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from dbtier.reproduce.plan import Article
from dbtier.reproduce.run import Base, name


def reproduce(chosen: list[Article], quick: bool, base: Base, cluster: str, folder: Path,
              say: Callable[[str], None]) -> dict:
    """The reproduction's document, as reproduce.run.reproduce makes it, with the nodes ("nodes": their
    reference runs' offsets; each article's "node"): each article on one engine is a job of its own."""
    from dbtier.cluster import runs as cluster_runs

    t0 = time.monotonic()
    work = {"quick": quick, "pg_bin": str(base.pg_bin) if base.pg_bin else None,
            "mariadb_bin": str(base.mariadb_bin) if base.mariadb_bin else None}
    jobs = range(len(chosen))  # each article on one engine, by its place in `chosen`
    with cluster_runs.connected(cluster, folder, say) as (pool, nodes):
        finished = cluster_runs.run_jobs(pool, list(jobs), lambda i: {**work, "reproduce": chosen[i].seed,
                                                                      "engine": chosen[i].engine},
                                         folder, say, lambda i: name(chosen[i]))
    articles = {}
    for i, article_dir, nd in finished:
        art = json.loads((article_dir / "article.json").read_text())
        art.pop("elapsed_s", None)
        articles[i] = {**art, "node": nd.name}
    return {"kind": "reproduce", "engines": list(dict.fromkeys(art.engine for art in chosen)),
            "articles": [articles[i] for i in jobs], "elapsed_s": time.monotonic() - t0, "nodes": nodes}
