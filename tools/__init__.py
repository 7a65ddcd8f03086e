"""Development tools, not installed with the package: the dvc.yaml code-deps writer, the import-graph walker the
layer test uses, and the production (GPU) text checks."""
