"""Attribution methods, one per file, and their registry.

Adding a method is one new file here: an ``Options`` dataclass and a :class:`~.base.Method`
subclass decorated with :func:`~.registry.register`, imported below.
"""
from .base import Method, MethodOutput, Options
from .registry import METHODS, check_model, get_method, list_methods, method_options, option_value, parse_method_spec, register, unregister

# the built-in methods, in the order list_methods() reports them
from . import integrated_gradients, integrated_decision_gradients, aieg, saliency, input_x_gradient  # noqa: E402,F401
from . import attention, scaled_attention, grad_ellm  # noqa: E402,F401
from . import occlusion, heta  # noqa: E402,F401

__all__ = ["METHODS", "Method", "check_model", "MethodOutput", "Options", "get_method", "list_methods", "method_options",
           "option_value", "parse_method_spec", "register", "unregister"]
