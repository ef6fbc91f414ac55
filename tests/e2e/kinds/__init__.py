"""The kinds and their API on kwok's nodes: each kind's children, what the
CRDs and the operator refuse, limits, RBAC, reads and the informer, Kueue's
admission of every kind, leader election, and stopping `make cluster`. One
process runs this folder."""
