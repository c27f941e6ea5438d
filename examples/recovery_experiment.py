"""The recovery experiment (docs/recovery.md) on notifyd's real engine; the same as
`notifyd experiment recovery`. Run: python examples/recovery_experiment.py [--timeout-before-accept]
"""

import sys

from notifyd.experiment import main

if __name__ == "__main__":
    print("\n".join(main(timeout_before_accept="--timeout-before-accept" in sys.argv[1:])))
