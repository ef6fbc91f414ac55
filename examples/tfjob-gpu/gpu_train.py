"""Train on the GPU a TFJob's MASTER was given, saying what it was given.

Prints the GPUs TensorFlow sees, the driver variables (LD_LIBRARY_PATH,
PATH, NVIDIA_*) and the files under the driver mount paths it is told of
(--driver-paths, e.g. the chart's cloud preset's mountPath), then fits
y = 3x - 2 on the first GPU, or on the CPU when TensorFlow sees none, and
exits 0 when both weights are within --tolerance (1 otherwise).

    python gpu_train.py --steps=300
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--driver-paths", default="/usr/local/nvidia", help="comma-separated")
    return parser.parse_args(argv)


def say(message: str) -> None:
    print(f"gpu-example: {message}", flush=True)


def given(paths: list[str]) -> None:
    for name in sorted(os.environ):
        if name in ("LD_LIBRARY_PATH", "PATH") or name.startswith("NVIDIA_"):
            say(f"env {name}={os.environ[name]}")
    for path in paths:
        if not os.path.exists(path):
            say(f"{path}: not mounted")
            continue
        found = sorted(os.path.relpath(os.path.join(d, f), path)
                       for d, _, files in os.walk(path) for f in files)  # fmt: skip
        say(f"{path}: {len(found)} file(s) {found[:10]}")


def main() -> int:
    args = parse_args()
    given([p for p in args.driver_paths.split(",") if p])
    import tensorflow as tf  # after the report: importing it takes seconds

    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/CPU:0"
    say(f"TensorFlow {tf.__version__} sees {len(gpus)} GPU(s); training on {device}")
    with tf.device(device):
        x = tf.random.stateless_uniform([256, 1], seed=(1, 2), minval=-1.0, maxval=1.0)
        y = 3.0 * x - 2.0
        w, b = tf.Variable(0.0), tf.Variable(0.0)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
        for step in range(args.steps):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(w * x + b - y))
            optimizer.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b], strict=True))
            if step % 100 == 0:
                say(f"step {step} loss {float(loss):.6f}")
    error = max(abs(float(w) - 3.0), abs(float(b) + 2.0))
    if error > args.tolerance:
        say(f"FAILED: w {float(w):.4f} b {float(b):.4f}, error {error:.4f} > {args.tolerance}")
        return 1
    say(f"done: w {float(w):.4f} b {float(b):.4f} on {device}, error {error:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
