"""Screenshots of dbtier's HTML reports, as a reader first sees them: headless Chromium at 1280x900
(the first screen: the verdict must be on it) and the whole page, for the demo, a run, a compare and
a reproduction. Prints, per page, whether the verdict comes before every section, and the files.

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


def make(out: Path) -> list[Path]:
    runs = out / "runs"
    dbtier = [sys.executable, "-m", "dbtier"]
    steps = [
        ["demo", "--quick", "-o", str(runs), "-q"],
        ["run", "random-index", "-d", "hdd=hdd-sata-7200", "--rows", "1000", "-o", str(runs), "-q"],
        ["compare", "random-index", "--rows", "1000", "--config", "disk:d=hdd-sata-7200",
         "--config", "flash:d=ssd-sata-mlc", "-o", str(runs), "-q"],
        ["run", "oltp", "-d", "data=ssd-sata-mlc", "--items", "2000", "--duration", "10", "--warmup", "2",
         "-o", str(runs), "-q"],
    ]
    for step in steps:
        print("dbtier", " ".join(step), flush=True)
        subprocess.run(dbtier + step, check=True, stdout=subprocess.DEVNULL)
    return sorted(d for d in runs.iterdir() if (d / "report.html").is_file())


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
    print(f"{'report':<48} {'verdict first':>13} {'first screen':>13} {'whole page':>11}")
    for d in dirs:
        page = d / "report.html"
        doc = json.loads((d / "result.json").read_text())
        name = f"{doc.get('kind', 'run')}-{d.name}"
        first, whole = a.out / f"{name}-first.png", a.out / f"{name}-page.png"
        shoot(page, first, *FIRST_SCREEN)
        shoot(page, whole, FIRST_SCREEN[0], 12000)
        v, sections = verdict_position(page)
        print(f"{d.name:<48} {'yes' if -1 < v < sections else 'NO':>13} {first.name:>13} {whole.name:>11}")


if __name__ == "__main__":
    main()
