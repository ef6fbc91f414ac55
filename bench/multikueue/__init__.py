"""`make bench-multikueue`: jobs submitted to a MultiKueue manager against
the same jobs submitted straight to a worker (docs/multicluster.md)."""
