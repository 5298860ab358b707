"""The service tests' leak scan: a true value written as a number is found, a noisy value that begins with it is not."""

from __future__ import annotations

from tests.system.service.support import found_in, planted_frame, spellings, true_values


def test_a_true_value_written_as_a_number_is_found_with_its_context() -> None:
    secrets = true_values(planted_frame())
    overall = f"{planted_frame()['hours'].mean():.6f}"
    assert overall in secrets
    for text in (f'{{"mean": {overall}}}', f"mean {overall}\n", f"<td>{overall}</td>", f"[-{overall}, 1]"):
        found = found_in(secrets, text)
        assert [f.split(" ")[0] for f in found] == [overall], text
        assert overall in found[0].split(" in ", 1)[1]


def test_a_noisy_value_that_begins_with_a_true_spelling_is_not_a_leak() -> None:
    secrets = true_values(planted_frame())
    overall = f"{planted_frame()['hours'].mean():.6f}"
    # a noisy mean within 10^-6 above the truth, at full precision; a longer number that ends with it
    for text in (f'{{"mean": {overall}1207}}', f"x=1{overall}", f"v={overall}5"):
        assert found_in(secrets, text) == [], text


def test_every_full_spelling_is_found() -> None:
    value = 38978.39135654262
    for spelling in spellings(value):
        assert found_in({spelling}, f"total: {spelling}.") != []
