"""The ``dlk8s-operator`` command line: ``run`` the operator, or ``smoke``.

May import every other layer of ``dlk8s``; nothing imports it back. ``smoke``
is what ``helm test`` runs in its pod.
"""
