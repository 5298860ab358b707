"""Speed of the smooth-sensitivity computations against a baseline in the same run.

* smooth sensitivity of the median of 10^7 floats vs ``numpy.sort`` of the same array (target <= 2x);
* the closest-pair W smooth bound for 10^6 points in 2-D vs building a cKDTree on them and querying
  the 16 nearest neighbours of every point (target <= 5x).

Ends with one TARGET line per target and exits 0 even when a target is missed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _closest_pair_speed
import _median_speed


def main() -> None:
    targets: list[str] = []
    for part in (_median_speed, _closest_pair_speed):
        for line in part.run():
            if line.startswith("TARGET "):
                targets.append(line)
            else:
                print(line)
    print("\n".join(targets))


if __name__ == "__main__":
    main()
