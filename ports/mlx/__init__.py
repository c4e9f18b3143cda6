"""MLX port (`mlx.nn`): Apple's array framework, on the CPU, Metal (macOS) or CUDA (Linux builds)."""
