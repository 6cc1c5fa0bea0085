"""Views of an :class:`~aieg_fast.result.Attribution`: word grouping (:mod:`.words`), the
terminal heatmap (:mod:`.terminal`), HTML (:mod:`.html`), pictures and tables (:mod:`.plots`).

The views take the result object and use its public attributes and word methods; this package
does not import :mod:`aieg_fast.result` (which sits above it)."""
from .words import aggregate_words

__all__ = ["aggregate_words"]
