"""The ``dlk8s-operator`` command line: ``run`` the operator, ``smoke``, or
``convert`` the seed operators' jobs (a package: one module per seed kind).

May import every other layer of ``dlk8s``; nothing imports it back. ``smoke``
is what ``helm test`` runs in its pod.
"""
