"""Data that ships with dkernel (the demo scene) and the registry of the public datasets the
example jobs and notebooks read (``dkernel.data.registry``; ``dkernel data fetch NAME``)."""
