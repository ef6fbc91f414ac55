"""The dlk8s.io API's vocabulary: its group, labels, phases, states, conditions and reasons.

Plain constants every layer shares; nothing here reads an object.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "dlk8s.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

LABEL_JOB_NAME: Final = "dlk8s.io/job-name"
LABEL_JOB_KIND: Final = "dlk8s.io/job-kind"
LABEL_REPLICA_TYPE: Final = "dlk8s.io/replica-type"
LABEL_REPLICA_INDEX: Final = "dlk8s.io/replica-index"
LABEL_RUNTIME_ID: Final = "dlk8s.io/runtime-id"
# The job's restart count when the pod was created: lets a restart that was
# acted on but whose status write was lost be recovered from the pod itself.
ANNOTATION_RESTART_COUNT: Final = "dlk8s.io/restart-count"
# On every pod until its end is in its job's status (reconcile.tracking).
TRACKING_FINALIZER: Final = "dlk8s.io/job-tracking"

MAX_REPLICAS: Final = 10_000

# Kueue's vocabulary (kueue.x-k8s.io): a job labelled with a queue waits
# for its Workload's admission before any pod is created (docs/kueue.md).
KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_API_VERSION: Final = f"{KUEUE_GROUP}/v1beta2"
LABEL_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS: Final = "kueue.x-k8s.io/priority-class"
LABEL_PODSET: Final = "kueue.x-k8s.io/podset"
LABEL_KUEUE_JOB_UID: Final = "kueue.x-k8s.io/job-uid"
# The LocalQueue Kueue picks for a job that names none.
DEFAULT_QUEUE: Final = "default"

# spec.managedBy (docs/multicluster.md): who runs the job. Empty or the
# operator's own name: dlk8s does. MultiKueue's: on a manager cluster, Kueue
# dispatches the job to a worker cluster and copies the worker's status
# back, so dlk8s keeps only its Workload. Anything else: another controller
# owns the job, and dlk8s leaves it alone.
MANAGED_BY_OPERATOR: Final = "dlk8s.io/operator"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
# On a worker cluster, MultiKueue's copy of a job names the Workload it made
# there for it: the job runs under that one and never makes its own.
LABEL_PREBUILT_WORKLOAD: Final = "kueue.x-k8s.io/prebuilt-workload-name"
LABEL_MULTIKUEUE_ORIGIN: Final = "kueue.x-k8s.io/multikueue-origin"


class Handling:
    """What a pass does with a job, by who manages it (spec.managedBy)."""

    OURS: Final = "ours"  # dlk8s runs it
    DISPATCHED: Final = "dispatched"  # MultiKueue runs it on a worker: its Workload only
    FOREIGN: Final = "foreign"  # another controller's: left alone


# The pod condition Kubernetes sets on a pod it is about to evict, preempt
# or delete with its node (its reason says which): disruptions are not failures.
DISRUPTION_TARGET: Final = "DisruptionTarget"


class Phase:
    CREATING: Final = "Creating"
    RUNNING: Final = "Running"
    CLEANUP: Final = "CleanUp"
    QUEUED: Final = "Queued"  # waiting for Kueue to admit the job: no pod yet
    FAILED: Final = "Failed"
    DONE: Final = "Done"


class State:
    RUNNING: Final = "Running"
    SUCCEEDED: Final = "Succeeded"
    FAILED: Final = "Failed"


class ConditionType:
    CREATED: Final = "Created"
    RUNNING: Final = "Running"
    RESTARTING: Final = "Restarting"
    SUSPENDED: Final = "Suspended"
    SUCCEEDED: Final = "Succeeded"
    FAILED: Final = "Failed"
    # Kueue's: waiting in a queue, let in, and sent back to wait.
    QUEUED: Final = "Queued"
    ADMITTED: Final = "Admitted"
    EVICTED: Final = "Evicted"


# The order conditions appear in, so an unchanged job keeps an identical list.
CONDITION_ORDER: Final = (
    ConditionType.QUEUED,
    ConditionType.ADMITTED,
    ConditionType.EVICTED,
    ConditionType.CREATED,
    ConditionType.RUNNING,
    ConditionType.RESTARTING,
    ConditionType.SUSPENDED,
    ConditionType.SUCCEEDED,
    ConditionType.FAILED,
)


class Reason:
    CREATING: Final = "Creating"
    CREATED: Final = "PodsCreated"
    RUNNING: Final = "Running"
    RESTARTING: Final = "Restarting"
    RECOVERED: Final = "Recovered"
    SUSPENDED: Final = "Suspended"
    RESUMED: Final = "Resumed"
    SUCCEEDED: Final = "Succeeded"
    REPLICA_FAILED: Final = "ReplicaFailed"
    BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
    DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
    INVALID_SPEC: Final = "InvalidSpec"
    CONFIG_ERROR: Final = "ConfigError"
    RECREATING: Final = "Recreating"
    # A pod is pending on what only a person can fix (a missing Secret or
    # ConfigMap, an image that cannot be pulled): the kubelet's words follow.
    POD_NOT_STARTING: Final = "PodNotStarting"
    # A pod still there well after its deletion's grace period ended: its
    # node does not answer. Replaced beside it (reconcile.stuck).
    POD_STUCK: Final = "PodStuckTerminating"
    TTL_EXPIRED: Final = "TTLExpired"
    CREATE: Final = "SuccessfulCreate"
    DELETE: Final = "SuccessfulDelete"
    INTERNAL_ERROR: Final = "InternalError"
    NAME_TAKEN: Final = "NameTaken"
    # The API server refused a create or a delete (admission, quota, an
    # invalid object); client-go's controllers use the same two reasons.
    FAILED_CREATE: Final = "FailedCreate"
    FAILED_DELETE: Final = "FailedDelete"
    # The deciding replica succeeded, but other replicas had failed for good
    # (successPolicy NoFailedReplicas or AllWorkers).
    OTHER_REPLICAS_FAILED: Final = "OtherReplicasFailed"
    # A rule of spec.runPolicy.podFailurePolicy failed the job (Job's reason).
    POD_FAILURE_POLICY: Final = "PodFailurePolicy"
    # A pod recreated without counting a restart: disrupted, or its failure
    # matched an Ignore rule.
    POD_DISRUPTED: Final = "PodDisrupted"
    POD_FAILURE_IGNORED: Final = "PodFailureIgnored"
    # Kueue: waiting for admission, let in, sent back, and no Kueue to ask.
    PENDING: Final = "Pending"
    ADMITTED: Final = "Admitted"
    EVICTED: Final = "Evicted"
    # The spec changed past what Kueue admitted: requeued with a new Workload.
    REQUEUED: Final = "Requeued"
    QUEUE_UNAVAILABLE: Final = "QueueUnavailable"


class EventType:
    """The type of a Kubernetes Event: Warning for what a user must act on."""

    NORMAL: Final = "Normal"
    WARNING: Final = "Warning"


class CleanPodPolicy:
    RUNNING: Final = "Running"
    ALL: Final = "All"
    NONE: Final = "None"
    ALLOWED: Final = (RUNNING, ALL, NONE)


class SuccessPolicy:
    """spec.runPolicy.successPolicy: when the deciding replica's success is the job's."""

    # The default: only if no replica failed for good meanwhile.
    NO_FAILED_REPLICAS: Final = "NoFailedReplicas"
    # The seeds' rule: the deciding replica alone.
    DECIDING_REPLICA: Final = "DecidingReplica"
    # As the default, and every WORKER must have succeeded too (Kubeflow's AllWorkers).
    ALL_WORKERS: Final = "AllWorkers"
    ALLOWED: Final = (NO_FAILED_REPLICAS, DECIDING_REPLICA, ALL_WORKERS)


class RestartPolicy:
    """When the operator recreates a finished pod (see outcomes.decide)."""

    EXIT_CODE: Final = "ExitCode"
    ON_FAILURE: Final = "OnFailure"
    ALWAYS: Final = "Always"
    NEVER: Final = "Never"
    ALLOWED: Final = (EXIT_CODE, ON_FAILURE, ALWAYS, NEVER)
