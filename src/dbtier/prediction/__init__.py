"""What-if prediction: a recorded run replayed, offline, against other devices and placements,
through the same emulation core the live interposer uses (native/iotap/replay.c)."""
