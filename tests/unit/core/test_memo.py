"""``core.memo.IdentityMemo``: one computation per object, never the result of another object."""

from __future__ import annotations

import threading

from dpsense.core.memo import IdentityMemo


def test_one_computation_per_object_and_equal_objects_apart() -> None:
    calls: list[tuple[int, ...]] = []

    def double(values: tuple[int, ...]) -> tuple[int, ...]:
        calls.append(values)
        return tuple(2 * v for v in values)

    memo = IdentityMemo(double, size=2)
    a, b = (1, 2, 3), tuple([1, 2, 3])  # equal, not the same object
    assert a is not b
    assert memo(a) == (2, 4, 6) and memo(a) == (2, 4, 6)
    assert len(calls) == 1
    assert memo(b) == (2, 4, 6) and len(calls) == 2  # identity, not equality


def test_an_evicted_or_collected_object_is_computed_again_never_confused() -> None:
    memo: IdentityMemo[list[int], int] = IdentityMemo(sum, size=2)
    seen = []
    for i in range(50):  # fresh objects whose ids the allocator may reuse once the memo lets them go
        value = [i, i]
        seen.append(memo(value))
    assert seen == [2 * i for i in range(50)]
    kept = [7]
    assert memo(kept) == 7
    kept.append(1)  # callers pass immutable values; a mutated list shows the rule: the object is remembered
    assert memo(kept) == 7


def test_threads_share_it_safely() -> None:
    memo: IdentityMemo[tuple[int, ...], tuple[int, ...]] = IdentityMemo(lambda values: tuple(sorted(values)), size=4)
    objects = [tuple(range(i + 50, i, -1)) for i in range(10)]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                for obj in objects:
                    assert memo(obj) == tuple(sorted(obj))
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
