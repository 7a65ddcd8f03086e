"""General-capability suites (instruction following, code, knowledge QA, perplexity) for the eval_general stage."""
