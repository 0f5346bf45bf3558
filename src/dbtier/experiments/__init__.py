"""Experiments: one typed `Experiment` (what to run and on what), the checks before it starts
(preflight), the scale model, one workload on one lab (runner) and one workload on several layouts
(compare). (Not `dbtier.run`: that name is the Python API's function.)"""
