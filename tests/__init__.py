"""dkernel's test suite: a regular package, so that ``tests.<module>`` names this folder in every
process (conftest.py puts the repository first on PYTHONPATH) and not an installed
distribution's own top-level ``tests`` package."""
