"""Local-DP collection end to end: devices randomize, a collector ingests, analysts estimate.

Run with ``python examples/local_collection.py`` (``make test`` runs it). A temporary SQLite ledger holds
three collections; the simulated devices are the real ``dpsense.device`` clients, each randomizing
its own value from the OS CSPRNG. Every figure printed is post-processing of randomized reports:
the estimates cost no central budget and land in the ledger's history as ordinary releases.

1. RAPPOR (Google, 2014) over 20 000 devices with a Zipf-like favourite homepage, decoded against a
   dictionary of 100 candidates, with the lifetime guarantee ε∞ = ln 3 per value.
2. Apple's Count Mean Sketch over the same devices' emoji, and a device that tries to send more
   reports than its budget (the ledger refuses it).
3. Heavy hitters over an unknown domain of words (prefix extension through sketches).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import dpsense as dp
from dpsense.device import CmsClient, CmsScheme, PrefixClient, PrefixScheme, RapporClient, RapporScheme

DEVICES = 20_000
SITES = [f"site{i:03d}.example" for i in range(100)]
EMOJI = ["smile", "heart", "thumbs", "fire", "cry", "laugh", "pray", "clap"]
WORDS = ["hello", "thanks", "later", "sorry", "maybe", "never", "always", "again", "today", "soon"]


def zipf_pick(i: int, options: list[str], skew: float) -> str:
    """A fixed, public Zipf-like assignment (device i gets option k with weight 1/(k+1)^skew)."""
    weights = [1.0 / (k + 1) ** skew for k in range(len(options))]
    point = ((i * 7919) % 10_007) / 10_007 * sum(weights)
    for option, w in zip(options, weights, strict=True):
        point -= w
        if point < 0:
            return option
    return options[-1]


def ingest(steward: dp.Session, name: str, reports: list[dict[str, object]]) -> None:
    for start in range(0, len(reports), 5000):
        steward.ingest_reports(name, reports[start : start + 5000], batch_id=f"{name}-{start}", submitter="relay")


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="dpsense-local-"))
    ledger = f"sqlite:///{folder / 'ledger.db'}"
    with dp.Session.open(ledger, analyst="steward", role="steward") as steward:
        steward.add_analyst("alice")

        print("== 1. RAPPOR: favourite homepage, 20 000 devices, dictionary of 100 sites ==")
        rappor = RapporScheme(num_bits=128, num_hashes=1, num_cohorts=64, epsilon_lifetime="1.0986", epsilon_irr="8")
        steward.register_collection("homepage", scheme=rappor.to_json(), dictionary=SITES, max_reports_per_client=5)
        truth = [zipf_pick(i, SITES, 1.1) for i in range(DEVICES)]
        memo: dict[str, str] = {}  # each device's persistent store (one dict here for all simulated devices)
        reports = [
            {"client_id": f"device{i}", "report": RapporClient(rappor, f"device{i}", memo).report(site)}
            for i, site in enumerate(truth)
        ]
        ingest(steward, "homepage", reports)
        print("guarantee:", rappor.guarantee()["epsilon_per_report"], "per report; lifetime", "ln 3 per value")

        print("== 2. Count Mean Sketch: favourite emoji; one device over its budget ==")
        cms = CmsScheme(num_hashes=64, num_buckets=128, epsilon="4")
        steward.register_collection("emoji", scheme=cms.to_json(), dictionary=EMOJI, max_reports_per_client=2)
        sketch = CmsClient(cms)
        emoji = [zipf_pick(i, EMOJI, 0.8) for i in range(DEVICES)]
        ingest(steward, "emoji", [{"client_id": f"device{i}", "report": sketch.report(e)} for i, e in enumerate(emoji)])
        greedy = [{"client_id": "device0", "report": sketch.report("fire")} for _ in range(3)]
        out = steward.ingest_reports("emoji", greedy, batch_id="greedy", submitter="relay")
        print(f"device0 sent 3 more reports: accepted {out.accepted}, refused {len(out.refused)} (its budget is 2)")

        print("== 3. Heavy hitters over an unknown domain: words typed, prefix extension ==")
        prefix = PrefixScheme(
            alphabet="abcdefghijklmnopqrstuvwxyz", max_length=6, segment_length=2, num_hashes=16,
            num_buckets=256, epsilon="4",
        )  # fmt: skip
        steward.register_collection("words", scheme=prefix.to_json(), max_reports_per_client=1)
        typed = [zipf_pick(i, WORDS, 1.2) for i in range(DEVICES)]

        ingest(
            steward,
            "words",
            [
                {"client_id": f"device{i}", "report": PrefixClient(prefix, f"device{i}").report(w)}
                for i, w in enumerate(typed)
            ],
        )

    with dp.Session.open(ledger, analyst="alice") as alice:
        print("== The analyst's estimates (post-processing: no central budget) ==")
        homepage = alice.estimate_frequencies("homepage")
        counts = Counter(truth)
        table = homepage.table.assign(true=[counts[site] for site in homepage.table["value"]])
        print(table[table["significant"]].to_string(index=False))
        found = set(table.loc[table["significant"], "value"])
        top10 = {site for site, _ in counts.most_common(10)}
        print(
            f"significant: {len(found)} of {len(SITES)} candidates; true top 10 among them: {len(found & top10)};"
            f" false discoveries (significant, not held by anyone): {sum(counts[s] == 0 for s in found)}"
        )
        print(homepage.explain())

        emoji_release = alice.estimate_frequencies("emoji")
        shown = emoji_release.table.assign(true=[Counter(emoji)[e] for e in emoji_release.table["value"]])
        print(shown.to_string(index=False))

        words = alice.estimate_frequencies("words", top=3)
        print(words.table.to_string(index=False), "  true top 3:", [w for w, _ in Counter(typed).most_common(3)])

        again = alice.estimate_frequencies("emoji")
        print(f"asked again: cached={again.cached}, the same release {again.record.release_id}")
        print("history of 'homepage':", [(r.release_id, r.mechanism) for r in alice.history("homepage")])
        print("audit chain intact:", alice.verify_log().ok)


if __name__ == "__main__":
    main()
