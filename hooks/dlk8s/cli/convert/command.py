"""`dlk8s-operator convert`: the seed operators' and training-operator's jobs as dlk8s jobs.

Its flags, its notes and its exit status are described in docs/migration.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from dlk8s.cli.convert.document import convert_text, dump
from dlk8s.cli.convert.skeleton import Options
from dlk8s.job.computeresources import GPU, LEGACY_GPU
from dlk8s.job.objects import Obj


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        required=True,
        metavar="FILE",
        help="a file of seed manifests (TfJob, MXJob, Caffe2Job, EDL TrainingJob) or"
        " Kubeflow's kubeflow.org/v1 PyTorchJobs and TFJobs, '-' for standard input;"
        " may be repeated",
    )
    parser.add_argument(
        "--rename-legacy-gpu",
        action="store_true",
        help=f"ask for {GPU} (the device plugin's resource) where a container asks for the"
        f" legacy {LEGACY_GPU}",
    )


def run(args: argparse.Namespace, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    options = Options(rename_legacy_gpu=bool(getattr(args, "rename_legacy_gpu", False)))
    jobs: list[Obj] = []
    failed = False
    for filename in args.filenames:
        source = "<stdin>" if filename == "-" else filename
        try:
            if filename == "-":
                text = sys.stdin.read()
            else:
                with open(filename, encoding="utf-8") as handle:
                    text = handle.read()
        except OSError as err:
            print(f"{source}: cannot read: {err.strerror or err}", file=stderr)
            return 2
        converted = convert_text(text, source, options)
        for item in converted.notes:
            print(item, file=stderr)
        jobs += converted.jobs
        failed = failed or converted.failed
    stdout.write(dump(jobs))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dlk8s-operator convert", description=__doc__.split("\n")[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
