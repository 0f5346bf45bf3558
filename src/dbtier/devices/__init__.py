"""Virtual storage devices: profiles, the models' offline view, and emulation sessions."""
