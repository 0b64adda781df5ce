"""Built-in job methods; importing this package registers them."""
