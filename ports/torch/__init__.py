"""PyTorch port. Imports are absolute: `ports/` must never be on sys.path, or this package
would shadow the real `torch`."""
