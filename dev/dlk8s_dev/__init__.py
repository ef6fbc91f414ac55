"""Development tooling of dlk8s: never part of the operator image.

The local cluster (``localcluster``), the chart installed on it with the
operator as a local process (``localdeploy``) and ``make demo`` (``demo``).
Installed from ``dev/`` into the project's virtualenv by ``make tools``; the
operator's own wheel (``hooks/``) does not contain it and never imports it.
"""
