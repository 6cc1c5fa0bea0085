"""The engine pieces every method shares. Knows no method names, no CLI and no datasets.

* :mod:`.validation` — argument checks that name the argument;
* :mod:`.quadrature` — integration rules and grids;
* :mod:`.batch` — the batch type and building it (left/right padding);
* :mod:`.model_state` — prepare/restore a model around a call;
* :mod:`.capture` — hooks on the points an adapter declares (attention, q/k/v, o_proj, RoPE, block inputs);
* :mod:`.attention` — attention rows of the predicting position from captured probabilities;
* :mod:`.context` — :class:`Context`, what a method receives in place of plumbing keywords;
* :mod:`.path` — the path engine (chunked interpolation, integration, emphasized integration,
  path logits, the adaptive grid, the memory model);
* :mod:`.vjp` — batched per-row vector-Jacobian products and the one-forward-per-sequence helper;
* :mod:`.occlusion` — groups of masked tokens and the batched masked forwards (change of F, KL);
* :mod:`.curvature` — per-token Hessian-vector products batched into double backwards;
* :mod:`.value_flow` — value-norm weights and the attention rollout row of every layer.
"""
