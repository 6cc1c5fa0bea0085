"""Views of an :class:`~aieg_fast.result.Attribution`: word grouping (:mod:`.words`), the
terminal heatmap (:mod:`.terminal`, drawn with ``rich``), HTML (:mod:`.html`), pictures and
tables (:mod:`.plots`), the colour scale they share (:mod:`.scale`).

The views take the result object and use its public attributes and word methods; this package
does not import :mod:`aieg_fast.result` (which sits above it)."""
from .html import to_html
from .plots import plot, to_dataframe
from .terminal import show
from .words import aggregate_words

__all__ = ["aggregate_words", "plot", "show", "to_dataframe", "to_html"]
