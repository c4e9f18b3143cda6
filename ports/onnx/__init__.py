"""An extra backend: the torch port exported to ONNX and run by ONNX Runtime."""
