"""HOT intrinsic functions, one module per theme; ``tables`` assembles them per version."""
