"""Built-in job methods, one module each; :data:`dkernel.jobs.registry.METHODS` imports every
module of this package on its first lookup, so a new method is a new module here and nothing
else to edit."""
