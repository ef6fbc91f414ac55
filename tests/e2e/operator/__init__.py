"""The chart and the operator's own behaviour on kwok's nodes: the chart's
install and tests, roles for users, TFJobs' lifecycle, endings, faults,
health, metrics, caches, signals, conversion, the local cluster itself; and
`make demo`, which starts a cluster (and a real node) of its own. One
process runs this folder."""
