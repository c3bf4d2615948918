"""Quantization diagnostics: which layers and GEMM operands lose precision under a recipe.

* :func:`analyze` (``ms.analyze``): one high-precision forward + backward, then every linear
  layer's six GEMM operands and three outputs replayed through the recipe's quantizers;
  returns an :class:`AnalysisReport` (table, JSON, ``rank``, ``recommend``).
* :class:`QuantMonitor` (``ms.QuantMonitor``): the same every N training steps, as flat
  ``"q/<layer>/<key>/<metric>"`` floats for the run's JSONL.
* :mod:`.plots`: layer × operand heatmap and error-across-depth PNGs.
* :mod:`.cli`: the ``microscale analyze`` subcommand.

See ``docs/analysis.md`` for the metric definitions and a worked example.
"""

from .analyze import analyze, find_linears
from .monitor import QuantMonitor
from .report import AnalysisReport

__all__ = ["analyze", "find_linears", "QuantMonitor", "AnalysisReport"]
