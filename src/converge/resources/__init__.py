"""Resource plugins: the small async interface and the built-in resource types."""
