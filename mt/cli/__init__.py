"""The console scripts: argument parsing answers --help before torch is imported."""
