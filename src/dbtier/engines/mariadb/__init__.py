"""MariaDB (InnoDB) behind the engine seam: its binaries from the distribution's packages
(binaries.py) and a server over a lab's folders (server.py)."""

#: innodb_page_size: the lab keeps MariaDB's default
PAGE_BYTES = 16384
#: seeds a session's RAND() sequence (two seeds): the same rows for the same data seed
SEEDED_RAND = "SET SESSION rand_seed1 = %s, rand_seed2 = %s"
