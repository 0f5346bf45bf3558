"""Observations of a run: device figures as iostat prints them, emulation lateness, traces."""
