"""Data the course ships: timelines recorded on a GPU (``record_timelines.py`` records them again)."""
