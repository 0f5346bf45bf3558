"""Running an experiment: the checks before it starts (preflight), the scale model, one workload on
one lab (runner) and one workload on several layouts (compare)."""
