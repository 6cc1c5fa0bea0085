"""TRANSITIONAL: the Explainer facade moves here."""
from .attribution import Explainer, load_model  # noqa: F401
