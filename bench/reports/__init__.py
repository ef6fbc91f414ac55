"""The burst and scale suites' tables and plots (bench/results/results.* and
scale.*): ``burst`` (`make bench`), with ``training_operator`` (dlk8s beside
training-operator and beside Trainer v2) and ``costs`` (where the control plane's time goes);
``scale`` (`make bench-scale`); ``cells``, how they write a figure. They
import only bench.common. The other suites write their own tables."""
