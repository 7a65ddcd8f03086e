"""Generation: one interface (rubricrl.inference.generate) over the transformers and llama.cpp backends, GGUF
conversion and its cache, and the policy's model files (the embedded SmolLM2, tiny test models)."""
