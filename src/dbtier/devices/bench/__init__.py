"""`dbtier iobench`: the seed articles' device tests (IOMeter, SiSoft Sandra, fio) as one command.
One job description (jobs.py), one module per engine (engine_dbtier.py, engine_fio.py)."""
