"""dlk8s: distributed deep-learning training jobs on Kubernetes."""
