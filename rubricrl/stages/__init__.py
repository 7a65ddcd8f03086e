"""One module per DVC stage (dvc.yaml): each reads its params section, calls one library entry, owns its paths,
returns a typed result and writes its own report section. `python -m rubricrl.stages.<stage>` runs one."""
