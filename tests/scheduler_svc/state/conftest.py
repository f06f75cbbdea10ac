"""Shared fixtures of these tests."""

from tests.scheduler_svc.kube.loop_hygiene import close_event_loop_left_by_sync_test

__all__ = ["close_event_loop_left_by_sync_test"]
