"""The API resources the operator reads and writes, each registered once.

Plain data: how to build a resource's URL path. The job kinds come from
``dlk8s.job.kinds.KINDS``, so a new kind needs no second registration here,
in the controller or in the autoscaler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final
from urllib.parse import quote

from dlk8s.job.kinds import KINDS
from dlk8s.job.vocabulary import API_VERSION, KUEUE_API_VERSION


@dataclass(frozen=True)
class Resource:
    api_version: str  # "v1" (the core group) or "group/version"
    kind: str  # what objects of it carry in `kind`
    plural: str  # the URL segment, also the label of the API metrics
    namespaced: bool = True  # cluster-scoped resources (nodes) have no namespace segment

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


# The CRDs' plurals are the kinds in lower case plus "s" (crds/*.yaml).
JOB_RESOURCES: Final[Mapping[str, Resource]] = MappingProxyType(
    {kind: Resource(API_VERSION, kind, f"{kind.lower()}s") for kind in KINDS}
)

_BUILTIN: Final = (
    Resource("v1", "Pod", "pods"),
    Resource("v1", "Service", "services"),
    Resource("v1", "ConfigMap", "configmaps"),
    # A Caffe2 MASTER's redis password: created, never read (Create.fresh).
    Resource("v1", "Secret", "secrets"),
    Resource("v1", "Event", "events"),
    Resource("v1", "Node", "nodes", namespaced=False),
    Resource("apps/v1", "Deployment", "deployments"),
    Resource("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    Resource("coordination.k8s.io/v1", "Lease", "leases"),
    Resource("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
    # Who may read /metrics (runtime.access): created, never stored.
    Resource("authentication.k8s.io/v1", "TokenReview", "tokenreviews", namespaced=False),
    Resource("authorization.k8s.io/v1", "SubjectAccessReview", "subjectaccessreviews", False),
    # Kueue's (docs/kueue.md): read and written only with --kueue.
    Resource(KUEUE_API_VERSION, "Workload", "workloads"),
    Resource(KUEUE_API_VERSION, "LocalQueue", "localqueues"),
    Resource(KUEUE_API_VERSION, "ResourceFlavor", "resourceflavors", namespaced=False),
    Resource(KUEUE_API_VERSION, "WorkloadPriorityClass", "workloadpriorityclasses", False),
)
_BY_KIND: Final[Mapping[tuple[str, str], Resource]] = MappingProxyType(
    {(r.api_version, r.kind): r for r in (*_BUILTIN, *JOB_RESOURCES.values())}
)


def resource_for(api_version: str, kind: str) -> Resource:
    try:
        return _BY_KIND[(api_version, kind)]
    except KeyError:
        raise ValueError(f"no resource registered for {api_version} {kind}") from None


# The children the controller watches (those labelled dlk8s.io/job-name),
# by the field of job.jobmodel.Observed that holds them.
CHILD_RESOURCES: Final[Mapping[str, Resource]] = MappingProxyType(
    {
        "pods": resource_for("v1", "Pod"),
        "services": resource_for("v1", "Service"),
        "configmaps": resource_for("v1", "ConfigMap"),
        "deployments": resource_for("apps/v1", "Deployment"),
    }
)

# The children only a job under Kueue has (docs/kueue.md): watched with
# --kueue only, filed under their job like the others.
KUEUE_CHILD_RESOURCES: Final[Mapping[str, Resource]] = MappingProxyType(
    {"workloads": resource_for(KUEUE_API_VERSION, "Workload")}
)
# The jobs' NetworkPolicies (job.network): watched with --network-policies only.
NETWORK_CHILD_RESOURCES: Final[Mapping[str, Resource]] = MappingProxyType(
    {"networkpolicies": resource_for("networking.k8s.io/v1", "NetworkPolicy")}
)
# Every group of children a job's Observed holds, watched or not.
OWNED_RESOURCES: Final[Mapping[str, Resource]] = MappingProxyType(
    {**CHILD_RESOURCES, **KUEUE_CHILD_RESOURCES, **NETWORK_CHILD_RESOURCES}
)
