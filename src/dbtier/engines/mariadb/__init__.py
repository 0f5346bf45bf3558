"""MariaDB (InnoDB) behind the engine seam: its binaries from the distribution's packages
(binaries.py) and a server over a lab's folders (server.py)."""

#: innodb_page_size: the lab keeps MariaDB's default
PAGE_BYTES = 16384
