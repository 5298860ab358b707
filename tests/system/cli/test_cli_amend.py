"""``dpsense dataset amend``: declarations corrected from the CLI, as a new version on the same budget.

What a steward hit (issue 17, item 2): re-running ``dataset add`` with new declarations kept the old
profile, and the profile shown hid the contribution bounds. Now the re-registration is refused with
what differs and the amend command to use, the amendment says what changed, and the profile shows
every declaration.
"""

from __future__ import annotations

from tests.system.cli.support import POLICY, Cli, write_yaml


def test_a_steward_amends_a_group_cap_and_bounds_and_new_releases_use_them(registered: Cli) -> None:
    before = registered.budget()
    result = registered.steward("dataset", "amend", "events", "--max-groups", "region=1", "--bound", "hours=0:48")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "dataset 'events' snapshot 'v1.2': amended" in out
    assert "max_groups_per_unit: registered {}, given {'region': 1}" in out
    assert "bounds of column 'hours': registered ['0/1', '24/1'], given ['0/1', '48/1']" in out
    assert "at most 3 rows per unit" in out and "at most 1" in out  # every declaration shown
    assert registered.budget() == before  # the same budget, nothing spent
    shown = registered("sql", "SELECT region, COUNT(*) FROM events GROUP BY region", "--epsilon", "0.5", "--explain")
    assert shown.exit_code == 0, shown.stderr
    explain = " ".join(shown.stdout.split())
    assert "at most 3 row(s) per unit in at most 1 group(s); global L1 sensitivity 3" in explain


def test_re_adding_with_other_declarations_names_the_difference_and_the_amend_command(registered: Cli) -> None:
    policy = write_yaml(registered.root / "policy.yaml", POLICY)
    result = registered.steward(
        "dataset", "add", "copy", "--source", str(registered.root / "events.csv"), "--unit", "person_id",
        "--bound", "hours=0:30", "--bound", "age=0:120", "--keys", "region=north,south,east,west",
        "--max-rows-per-unit", "3", "--budget-epsilon", "10", "--budget-delta", "1e-8",
        "--privacy-policy", str(policy),
    )  # fmt: skip
    assert result.exit_code != 0
    message = " ".join(result.stderr.split())
    assert "bounds of column 'hours': registered ['0/1', '24/1'], given ['0/1', '30/1']" in message
    assert "dpsense dataset amend" in message


def test_amend_refusals_are_one_line_and_change_nothing(registered: Cli) -> None:
    nothing = registered.steward("dataset", "amend", "events", "--bound", "hours=0:24")
    assert nothing.exit_code != 0 and "changes no declaration" in nothing.stderr
    typo = registered.steward("dataset", "amend", "events", "--remove", "typicl=hours")
    assert typo.exit_code != 0 and "typical" in typo.stderr and "Traceback" not in typo.stderr
    analyst = registered("dataset", "amend", "events", "--bound", "hours=0:48")
    assert analyst.exit_code != 0 and "--steward" in analyst.stderr
    history = registered("history", "events", "--json")
    assert history.exit_code == 0
    listed = registered.steward("dataset", "verify", "events")
    assert listed.exit_code == 0 and "'v1'" in listed.stdout  # still the only version


def test_a_steward_declares_and_removes_a_recording_step(registered: Cli) -> None:
    """``--step COL=S`` on amend (and add): shown in the profile; the median is then a multiple of it."""
    result = registered.steward("dataset", "amend", "events", "--step", "hours=0.5")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "step of column 'hours': registered None, given '0.5'" in out and "step 0.5" in out
    released = registered("sql", "SELECT MEDIAN(hours) AS m FROM events", "--epsilon", "0.5", "--explain")
    assert released.exit_code == 0, released.stderr
    assert "points of the declared step 0.5" in " ".join(released.stdout.split())
    bad = registered.steward("dataset", "amend", "events", "--step", "hours=1/3")
    assert bad.exit_code != 0 and "positive decimal" in bad.stderr and "Traceback" not in bad.stderr
    gone = registered.steward("dataset", "amend", "events", "--remove", "step=hours")
    assert gone.exit_code == 0, gone.stderr
    assert "step of column 'hours': registered '0.5', given None" in " ".join(gone.stdout.split())
