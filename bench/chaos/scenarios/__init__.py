"""The chaos suite's scenarios, one module each, in the order they run.

``SCENARIOS`` run on a cluster without Kueue: operator_kill,
apiserver_restart, sigstop_compact, leader_kill, hostile, drain_taint,
lost_node, paused_leader, clock_skew, operator_partition, node_partition,
slow_api, start_failure, operator_away.
``KUEUE_SCENARIOS`` (kueue) run on a second cluster, with Kueue beside it.
``MULTIKUEUE_SCENARIOS`` (multikueue) run on clusters of their own, a
MultiKueue manager and two workers; they take the suite's arguments.
`--only` names them by their function's name.
"""

from __future__ import annotations

from bench.chaos.scenarios.apiserver_restart import apiserver_restart
from bench.chaos.scenarios.clock_skew import clock_skew
from bench.chaos.scenarios.drain_taint import drain_taint
from bench.chaos.scenarios.hostile import hostile
from bench.chaos.scenarios.kueue import kueue
from bench.chaos.scenarios.leader_kill import leader_kill
from bench.chaos.scenarios.lost_node import lost_node
from bench.chaos.scenarios.multikueue import multikueue
from bench.chaos.scenarios.node_partition import node_partition
from bench.chaos.scenarios.operator_away import operator_away
from bench.chaos.scenarios.operator_kill import operator_kill
from bench.chaos.scenarios.operator_partition import operator_partition
from bench.chaos.scenarios.paused_leader import paused_leader
from bench.chaos.scenarios.sigstop_compact import sigstop_compact
from bench.chaos.scenarios.slow_api import slow_api
from bench.chaos.scenarios.start_failure import start_failure

SCENARIOS = [
    operator_kill,
    apiserver_restart,
    sigstop_compact,
    leader_kill,
    hostile,
    drain_taint,
    lost_node,
    paused_leader,
    clock_skew,
    operator_partition,
    node_partition,
    slow_api,
    start_failure,
    operator_away,
]
KUEUE_SCENARIOS = [kueue]
MULTIKUEUE_SCENARIOS = [multikueue]
