"""`make bench-scale`: the operator at scale (``python -m bench.scale``;
__main__.py says what it runs). The history of finished jobs, the
operator's restarts on it and its memory are history.py's."""
