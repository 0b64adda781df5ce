"""Declarative parameter schemas: the type every layer above uses to describe its options.

:mod:`dkernel.schema.params` holds :class:`~dkernel.schema.params.Param` and the validation
of user mappings against a tuple of them; :mod:`dkernel.schema.estimator` derives such a tuple
from a scikit-learn-style estimator's ``_parameter_constraints``, signature and docstring;
:mod:`dkernel.schema.export` writes them out as JSON Schema; ``dkernel.schema.cache`` keeps
the derivations that the light commands read without importing scikit-learn. The package sits
below ``io`` and ``jobs`` and imports neither.
"""
