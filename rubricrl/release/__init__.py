"""After training: distillation into a smaller student, quantized exports (GGUF, GPTQ) verified by reloading,
and the MLflow model registry with its promotion gates."""
