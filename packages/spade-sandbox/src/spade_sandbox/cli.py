"""`spade-sandbox` command line: `doctor` prints which isolation layers are active here."""

from __future__ import annotations

import argparse
import json
import sys

from .doctor import doctor_layers, format_report
from .errors import SandboxError
from .limits import LAYERS, SandboxConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="spade-sandbox", description="Sandbox for untrusted environment code."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser(
        "doctor", help="start one sandboxed worker and print which isolation layers are active"
    )
    doctor.add_argument(
        "--backend", help="backend to check (default: SPADE_SANDBOX_BACKEND or 'process')"
    )
    doctor.add_argument("--json", action="store_true", help="print layer -> state as JSON")
    doctor.add_argument(
        "--strict", action="store_true", help="exit with status 1 unless every layer is active"
    )
    args = parser.parse_args(argv)
    try:
        config = SandboxConfig.from_env()
        if args.backend:
            config = config.replace(backend=args.backend)
    except (TypeError, ValueError) as exc:
        print(f"spade-sandbox: {exc}", file=sys.stderr)
        return 2
    try:
        layers = doctor_layers(config)
    except (SandboxError, ValueError, ImportError) as exc:
        if args.json:
            print(f"spade-sandbox: no worker started: {exc}", file=sys.stderr)
        else:
            print(format_report(config, None, str(exc)))
        return 1
    print(
        json.dumps(layers, indent=2, sort_keys=True) if args.json else format_report(config, layers)
    )
    if args.strict and not all(layers.get(name, "").startswith("active") for name in LAYERS):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
