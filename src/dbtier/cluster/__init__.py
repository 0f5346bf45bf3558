"""Runs on several machines: a Ray cluster whose nodes each take one run at a time.

facts.py says what a machine is (and whether its dbtier and PostgreSQL are the driver's); node.py is
what a node does (a run in its own workspace, shipped back as a tar of its run directory); pool.py
connects, checks the nodes and hands out the runs, re-queueing once a run whose node was lost."""
