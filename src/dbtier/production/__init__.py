"""The user's production workload: imported from the server's log or its statistics (capture), and
production's statistics beside a lab run."""
