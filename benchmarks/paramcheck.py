"""What checking the params at accept costs per request, in process: the accept load's templated
ladder (accept.py's TEMPLATED_CONFIG: email, SMS, email), checked with params of one shape
(remembered after the first: a producer's steady traffic) and with a new shape every time (each
one rendered: every template of the ladder, strictly).

Run: .venv/bin/python benchmarks/paramcheck.py [--n 20000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from accept import templated_config  # noqa: E402

from notifyd.config import load_config  # noqa: E402
from notifyd.core.models import AcceptInput  # noqa: E402
from notifyd.engine.paramcheck import ParamCheck  # noqa: E402
from notifyd.engine.render import load_templates  # noqa: E402


def per_call_us(check: ParamCheck, n: int, new_shape: bool) -> float:
    inputs = [AcceptInput("default", f"u{i}", "bench", {
        "amount": "12.00", "invoice": i, **({f"x{i}": 1} if new_shape else {})},
        f"d{i}", None, None, "h", "k") for i in range(n)]
    began = time.perf_counter()
    for i, inp in enumerate(inputs):
        check.check(inp, f"n_{i}", None)
    return (time.perf_counter() - began) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="notifyd-paramcheck-"))
    (folder / "bench.toml").write_text(templated_config(folder / "templates"))
    cfg = load_config(folder / "bench.toml")
    templates, problems = load_templates(cfg)
    assert templates is not None and not problems, problems
    check = ParamCheck(cfg, templates, None)  # type: ignore[arg-type] - one locale: no reads
    same = per_call_us(check, args.n, new_shape=False)
    fresh = per_call_us(ParamCheck(cfg, templates, None), args.n, new_shape=True)  # type: ignore[arg-type]
    print(f"params check, 3-step ladder of email and SMS (4 templates), {args.n} calls each:")
    print(f"  one shape (remembered):   {same:7.1f} us per accept")
    print(f"  a new shape every time:   {fresh:7.1f} us per accept (every template rendered)")


if __name__ == "__main__":
    main()
