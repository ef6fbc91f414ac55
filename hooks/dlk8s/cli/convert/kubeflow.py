"""What Kubeflow training-operator's `kubeflow.org/v1` kinds share: replicas
in a map by role, Kubeflow's defaults, its `runPolicy`. The kinds are in
`kubeflow_tfjob` and `kubeflow_pytorchjob` (docs/kubeflow.md)."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from dlk8s.cli.convert.edits import Drop, drop, drop_all, drop_unknown, replace_key
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.replicas import ReplicaList, replica_list
from dlk8s.job.objects import Obj, as_dict, as_list
from dlk8s.job.validation import ReplicaRules
from dlk8s.job.vocabulary import MANAGED_BY_MULTIKUEUE

# Kubeflow's RunPolicy fields a dlk8s runPolicy has, with the same meaning
# (and successPolicy, where a TFJob's spec.successPolicy moves).
RUN_POLICY_FIELDS: Final = (
    "successPolicy",
    "cleanPodPolicy",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "backoffLimit",
    "suspend",
)
RUN_POLICY_DROPS: Final[tuple[Drop, ...]] = (
    (
        "schedulingPolicy",
        "dlk8s has no gang scheduler of its own; label the job"
        " kueue.x-k8s.io/queue-name for Kueue to admit it whole",
    ),
    (
        "managedBy",
        "the converted job is dlk8s's to run (only kueue.x-k8s.io/multikueue carries over,"
        " as spec.managedBy)",
    ),
)


class ReplicaMap(ReplicaList):
    """A `kubeflow.org/v1` kind: its `<kind>ReplicaSpecs` map becomes the
    `replicaSpecs` list, each entry with Kubeflow's defaults written out."""

    # Kubeflow's name for the kind in its fields: "pytorch" of
    # pytorchReplicaSpecs and of the port name pytorchjob-port.
    prefix: ClassVar[str] = ""
    # The dlk8s kind's rules: its role field, main container, port field and port.
    rules: ClassVar[ReplicaRules]
    # Kubeflow's role names (any case, as Kubeflow read them) and the dlk8s
    # role each becomes, in the order the list has them.
    role_map: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Roles dlk8s has no place for, and why.
    dropped_roles: ClassVar[tuple[Drop, ...]] = ()
    # What Kubeflow set when restartPolicy was left out.
    default_restart_policy: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        port = cls.rules.port_field or ""
        cls.replica_fields = ("replicas", cls.rules.role_field, port, "template", "restartPolicy")

    @property
    def map_field(self) -> str:
        return f"{self.prefix}ReplicaSpecs"

    @property
    def role_field(self) -> str:
        return self.rules.role_field

    def reshape(self, spec: Obj, note: Notes) -> None:
        roles = spec.get(self.map_field)
        path = f"spec.{self.map_field}"
        if not isinstance(roles, dict):
            if self.map_field in spec:
                drop(spec, self.map_field, path, note, "not a map by role")
            return
        known = {kubeflow.lower(): (kubeflow, ours) for kubeflow, ours in self.role_map}
        dropped = {name.lower(): why for name, why in self.dropped_roles}
        for name in roles:
            key = str(name).lower()
            if key in dropped:
                note(f"{path}.{name}", f"dropped: {dropped[key]}")
            elif key not in known:
                note(f"{path}.{name}", "dropped: not a role of this kind")
        note(path, f"the map by role is now spec.replicaSpecs, a list with {self.role_field}")
        entries = []
        for kubeflow, ours in self.role_map:
            for name, entry in roles.items():
                if str(name).lower() == kubeflow.lower() and isinstance(entry, dict):
                    entries.append(self.entry(ours, entry, f"{path}.{name}", note))
        replace_key(spec, self.map_field, "replicaSpecs", entries)

    def entry(self, role: str, entry: Obj, path: str, note: Notes) -> Obj:
        """One role's ReplicaSpec as a list entry, Kubeflow's defaults written out."""
        converted: Obj = {self.role_field: role}
        if "replicas" in entry:
            converted["replicas"] = entry["replicas"]
        if "restartPolicy" not in entry:
            converted["restartPolicy"] = self.default_restart_policy
            note(
                f"{path}.restartPolicy",
                f"set to {self.default_restart_policy}, Kubeflow's default"
                " (dlk8s's is ExitCode); dlk8s recreates the pod where the kubelet restarted"
                " its container",
            )
        port = self.main_port(entry)
        field, default = self.rules.port
        if port is not None and port != default and field:
            converted[field] = port
            note(
                f"{path}.template",
                f"its {self.rules.container} container's port {self.prefix}job-port ({port})"
                f" is now {field}",
            )
        return converted | entry

    def main_port(self, entry: Obj) -> Any:
        """The containerPort Kubeflow took this role's port from."""
        pod = as_dict(as_dict(entry.get("template")).get("spec"))
        for container in as_list(pod.get("containers")):
            if as_dict(container).get("name") != self.rules.container:
                continue
            for port in as_list(as_dict(container).get("ports")):
                if as_dict(port).get("name") == f"{self.prefix}job-port":
                    return as_dict(port).get("containerPort")
        return None

    def policies(self, spec: Obj, note: Notes) -> None:
        policy = spec.setdefault("runPolicy", {})
        if not isinstance(policy, dict):
            return
        if "cleanPodPolicy" not in policy:
            policy["cleanPodPolicy"] = "None"
            note(
                "spec.runPolicy.cleanPodPolicy",
                "set to None, Kubeflow's default: its pods stay when the job ends"
                " (dlk8s's default, Running, stops those still running: remove the field"
                " to have it)",
            )
        if policy.get("managedBy") == MANAGED_BY_MULTIKUEUE:
            spec["managedBy"] = policy.pop("managedBy")
            note(
                "spec.runPolicy.managedBy",
                "moved to spec.managedBy: MultiKueue runs the job on a worker cluster"
                " (docs/multicluster.md)",
            )
        drop_all(policy, RUN_POLICY_DROPS, "spec.runPolicy", note)
        drop_unknown(policy, RUN_POLICY_FIELDS, "spec.runPolicy", note)

    def role_entry(self, spec: Obj, role: str) -> Obj | None:
        """The converted entry of a dlk8s role, if the job has it."""
        return next(
            (
                e
                for e in replica_list(spec)
                if isinstance(e, dict) and e.get(self.role_field) == role
            ),
            None,
        )
