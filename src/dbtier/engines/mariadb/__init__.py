"""MariaDB (InnoDB) behind the engine seam: its binaries from the distribution's packages
(binaries.py) and a server over a lab's folders (server.py)."""
