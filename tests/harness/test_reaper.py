from harness.reaper import should_reap
from harness.sandbox.labels import ContainerOwner, owner_labels, parse_owner

HOST = "this-host"


def owner(
    pid: int = 10, host: str = HOST, created: float = 1000.0, ttl: float = 100.0
) -> ContainerOwner:
    return ContainerOwner(pid=pid, host=host, created_at_s=created, ttl_s=ttl)


def test_container_of_a_live_owner_within_ttl_is_kept() -> None:
    assert should_reap(owner(), now_s=1050, this_host=HOST, owner_alive=lambda pid: True) is None


def test_container_of_a_dead_owner_on_this_host_is_reaped() -> None:
    reason = should_reap(owner(), now_s=1050, this_host=HOST, owner_alive=lambda pid: False)
    assert reason is not None and "gone" in reason


def test_container_past_its_ttl_is_reaped_even_if_owner_lives() -> None:
    reason = should_reap(owner(), now_s=1101, this_host=HOST, owner_alive=lambda pid: True)
    assert reason is not None and "TTL" in reason


def test_owner_on_another_host_is_judged_by_ttl_only() -> None:
    other = owner(host="elsewhere")
    assert should_reap(other, now_s=1050, this_host=HOST, owner_alive=lambda pid: False) is None


def test_damaged_labels_are_reaped() -> None:
    assert should_reap(None, now_s=0, this_host=HOST, owner_alive=lambda pid: True) is not None


def test_labels_round_trip_to_owner() -> None:
    parsed = parse_owner(owner_labels(created_at_s=123.0, ttl_s=60))
    assert parsed is not None and parsed.created_at_s == 123.0 and parsed.ttl_s == 60


def test_foreign_container_labels_are_not_ours() -> None:
    assert parse_owner({"com.example": "1"}) is None
