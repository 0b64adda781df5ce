"""Built-in readers; importing this module registers them."""
