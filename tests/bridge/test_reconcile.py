"""The one comparison every Discord reconciler makes (``bridge.reconcile``)."""

from __future__ import annotations

from bridge.reconcile import difference


def test_the_desired_not_recorded_are_added_in_click_order_and_the_rest_taken_out_sorted() -> None:
    todo = difference(["carol", "alice", "bob", "alice"], {"bob", "zed", "dave"})
    assert todo.add == ["carol", "alice"], "click order kept, a repeat once"
    assert todo.remove == ["dave", "zed"]


def test_nothing_to_do_when_desired_and_recorded_agree() -> None:
    todo = difference(["a", "b"], {"a", "b"})
    assert todo.add == [] and todo.remove == []
