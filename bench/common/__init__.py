"""What bench's suites share: the local cluster with the chart installed, one
measured run of a burst of jobs (the operator, the ceiling or
training-operator), the instruments that measure it, and the two modules
through which bench reaches dlk8s (``operator``) and its development tooling
(``devtools``). It imports nothing else of bench."""
