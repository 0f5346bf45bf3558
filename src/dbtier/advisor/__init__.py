"""Where limited fast storage should go: the recorded run's objects, placed under a capacity or cost
budget by predictions of the recorded run (dbtier.prediction), the advice verified by live runs."""
