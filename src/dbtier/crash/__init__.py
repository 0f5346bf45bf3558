"""Power cuts: crash states built from a run's durability log, recovered by the real server, checked."""
