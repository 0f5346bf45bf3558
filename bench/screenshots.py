"""Screenshots of dbtier's HTML reports, as a reader first sees them: headless Chromium at 1280x900
(the first screen: the verdict must be on it) and the whole page at 1280 and at 1920 px, for the
demo, a run, a compare of a workload of three phases, an OLTP run and an advice verified live.
Prints, per page, whether the verdict comes before every section, whether any table is wider than
the page, and the files.

    python bench/screenshots.py --make OUT            # makes small runs first (about 4 minutes)
    python bench/screenshots.py OUT RUN_DIR [RUN_DIR...]   # pages of run directories you have

Needs chromium (Debian: apt-get install chromium)."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
FIRST_SCREEN = (1280, 900)


def shoot(page: Path, png: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={png}",
                        page.resolve().as_uri()], check=True, capture_output=True, timeout=120)


def verdict_position(page: Path) -> int:
    """Characters before the verdict in the page's source: the verdict precedes every section."""
    text = page.read_text()
    return text.find('class="verdict"'), text.find("<details")


SETUP = """CREATE TABLE orders (id int PRIMARY KEY, customer int, amount numeric, note text);
INSERT INTO orders SELECT g, g % 997, g % 101, repeat('x', 200) FROM generate_series(1, 40000) g;
CREATE INDEX orders_customer ON orders (customer);
"""
WORK = """-- phase: lookups
SELECT sum(amount) FROM orders WHERE customer = 17;
SELECT sum(amount) FROM orders WHERE customer = 512;
SELECT sum(amount) FROM orders WHERE customer = 901;
-- phase: report
SELECT customer, sum(amount) FROM orders GROUP BY customer ORDER BY 2 DESC LIMIT 5;
-- phase: updates
UPDATE orders SET amount = amount + 1 WHERE customer = 33;
"""


def make(out: Path) -> list[Path]:
    runs = out / "runs"
    dbtier = [sys.executable, "-m", "dbtier"]
    (out / "setup.sql").write_text(SETUP)
    (out / "work.sql").write_text(WORK)
    sql = ["--setup", str(out / "setup.sql"), "--run", str(out / "work.sql")]
    traced = out / "traced"
    steps = [
        ["demo", "--quick", "-o", str(runs), "-q"],
        ["run", "random-index", "-d", "hdd=hdd-sata-7200", "--rows", "1000", "-o", str(runs), "-q"],
        ["compare", "random-index", "--rows", "1000", "--config", "disk:d=hdd-sata-7200",
         "--config", "flash:d=ssd-sata-mlc", "-o", str(runs), "-q"],
        ["run", "oltp", "-d", "data=ssd-sata-mlc", "--items", "2000", "--duration", "10", "--warmup", "2",
         "-o", str(runs), "-q"],
        ["compare", "sql", *sql, "--config", "all-disk:hdd=hdd-sata-7200",
         "--config", "indexes-on-flash:hdd=hdd-sata-7200,ssd=ssd-sata-mlc:data=hdd,indexes=ssd",
         "--config", "wal-on-flash:hdd=hdd-sata-7200,ssd=ssd-sata-mlc:data=hdd,wal=ssd", "-o", str(runs), "-q"],
        ["run", "sql", *sql, "-d", "hdd=hdd-sata-7200", "--trace", "-o", str(traced), "-q"],
    ]
    for step in steps:
        print("dbtier", " ".join(step), flush=True)
        subprocess.run(dbtier + step, check=True, stdout=subprocess.DEVNULL)
    (recorded,) = traced.iterdir()
    step = ["advise", str(recorded), "--fast", "ssd=ssd-sata-mlc", "--budget", "4MB", "--verify", "2", "-o", str(runs)]
    print("dbtier", " ".join(step), flush=True)
    subprocess.run(dbtier + step, check=True, stdout=subprocess.DEVNULL)
    return sorted(d for d in runs.iterdir() if (d / "report.html").is_file())


def tables_wider_than_the_page(page: Path, width: int) -> int:
    """Tables wider than the window, measured by Chromium itself (the page's own layout)."""
    script = page.with_suffix(".measure.html")
    script.write_text(page.read_text().replace("</body>", "<script>document.title = [...document.querySelectorAll("
                                               "'table')].filter(t => t.getBoundingClientRect().right > "
                                               "document.documentElement.clientWidth + 1).length;</script></body>"))
    try:
        with tempfile.TemporaryDirectory() as profile:
            dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                                  f"--window-size={width},900", "--dump-dom", script.resolve().as_uri()],
                                 check=True, capture_output=True, text=True, timeout=120).stdout
    finally:
        script.unlink()
    start = dom.find("<title>") + len("<title>")
    return int(dom[start:dom.find("</title>", start)] or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("dirs", type=Path, nargs="*")
    ap.add_argument("--make", action="store_true", help="make a demo, a run, a compare and an OLTP run first")
    a = ap.parse_args()
    if not CHROMIUM:
        sys.exit("screenshots: chromium is not installed (apt-get install chromium)")
    a.out.mkdir(parents=True, exist_ok=True)
    dirs = list(a.dirs) + (make(a.out) if a.make else [])
    print(f"{'report':<44} {'verdict first':>13} {'tables off the page at 1280/1920 px':>36}")
    for d in dirs:
        page = d / "report.html"
        doc = json.loads((d / "result.json").read_text())
        name = f"{doc.get('kind', 'run')}-{d.name}"
        shoot(page, a.out / f"{name}-first.png", *FIRST_SCREEN)
        shoot(page, a.out / f"{name}-page.png", FIRST_SCREEN[0], 12000)
        shoot(page, a.out / f"{name}-page-1920.png", 1920, 12000)
        v, sections = verdict_position(page)
        off = [tables_wider_than_the_page(page, w) for w in (1280, 1920)]
        print(f"{d.name:<44} {'yes' if -1 < v < sections else 'NO':>13} {off[0]:>30} / {off[1]}")
    print(f"screenshots: {a.out}/*-first.png (the first screen), *-page.png, *-page-1920.png")


if __name__ == "__main__":
    main()
