"""Development tooling of dlk8s: never part of the operator image.

The local cluster (``localcluster/``: the control plane and kwok's nodes),
its real node (``realnode/``), the images built here (``images/``) and
Kueue's manager beside it (``kueue``); the chart installed on it with the
operator as a local process (``localdeploy``), ``make cluster``
(``clustercli``), ``make demo`` (``demo``) and a release (``release``).
What they share sits beside them: how a run owns its folders and stops
(``runs``, ``leftovers``, ``stopping``, ``pdeath``), ports, certificates
(``nodepki``), HTTP checks (``probes``) and what the parts that join a
cluster use of it (``clusterapi``). docs/architecture.md has the layout.

Installed from ``dev/`` into the project's virtualenv by ``make tools``; the
operator's own wheel (``hooks/``) does not contain it and never imports it.
"""
