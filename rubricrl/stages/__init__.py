"""One module per DVC stage (dvc.yaml): each reads its params section, calls one library entry, owns its paths,
returns a typed result and writes its own report section. Its main() is what dvc.yaml's command runs,
`python tasks/<stage>.py` (a script beside the package); `python -m rubricrl.stages.<stage>` runs it too."""
