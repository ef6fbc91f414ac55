"""`make bench-kueue`: queued TFJobs, from Kueue's admission to their pods,
beside the same jobs unqueued (``python -m bench.kueue``; __main__.py says
what it runs). The jobs and the queue are queue.py's, one mode's run
modes.py's, its figures and checks figures.py's, the table report.py's."""
