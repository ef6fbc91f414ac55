"""One Event per kind of event and pass, naming every object, within the size limit."""

from __future__ import annotations

from dlk8s.job.actions import MAX_EVENT_MESSAGE, Event, merge_events


def test_one_event_is_left_alone() -> None:
    event = Event("Normal", "Create", "Created pod j-master-0")
    assert merge_events([event]) == [event]


def test_events_of_one_kind_become_one_naming_each() -> None:
    events = [
        Event("Normal", "Create", "Created pod j-master-0"),
        Event("Warning", "Restarting", "Restarting worker 0: exit code 137"),
        Event("Normal", "Create", "Created service j-master-0"),
    ]
    assert merge_events(events) == [
        Event("Normal", "Create", "Created pod j-master-0; Created service j-master-0"),
        Event("Warning", "Restarting", "Restarting worker 0: exit code 137"),
    ]


def test_events_about_different_objects_stay_apart() -> None:
    pod_a = {"kind": "Pod", "metadata": {"name": "a", "namespace": "ns", "uid": "1"}}
    pod_b = {"kind": "Pod", "metadata": {"name": "b", "namespace": "ns", "uid": "2"}}
    events = [
        Event("Normal", "Delete", "x", pod_a),
        Event("Normal", "Delete", "y", dict(pod_a)),
        Event("Normal", "Delete", "z", pod_b),
    ]
    assert merge_events(events) == [
        Event("Normal", "Delete", "x; y", pod_a),
        Event("Normal", "Delete", "z", pod_b),
    ]


def test_a_long_list_is_counted_within_the_limit() -> None:
    events = [Event("Normal", "Create", f"Created pod wide-worker-{i}") for i in range(1002)]
    (merged,) = merge_events(events)
    assert len(merged.message) <= MAX_EVENT_MESSAGE
    assert merged.message.startswith("Created pod wide-worker-0; Created pod wide-worker-1;")
    shown = merged.message.count("Created pod")
    assert merged.message.endswith(f"; and {1002 - shown} more (1002 in all)")
