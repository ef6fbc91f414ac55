"""Kueue's integration, its pure rules: a queued job's Workload, what it
asks Kueue for and what Kueue made of it (`workload`), and the status
edits Kueue leaves to the integration (`status`). docs/kueue.md says what
users see; docs/architecture.md where every Kueue concern lives.

dlk8s is its own Kueue integration: it creates every pod of its jobs, so a
job that names a queue creates none until Kueue admits its Workload. Kueue
reads only the Workload: one podSet per replica type, whose template must
ask for what the pods will (Kueue never looks at the pods), and after
admission the integration places the pods as the admission says. What
Kueue leaves to the integration, and what it gets wrong if forgotten, is
in KUEUE.md's pitfalls: quota kept after an eviction until the
reservation is cleared, PodsReady written by us, Finished to free the quota.
"""
