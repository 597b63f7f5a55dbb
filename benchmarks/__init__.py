"""Side-by-side benchmarks of calib_jax against third-party anchors."""
