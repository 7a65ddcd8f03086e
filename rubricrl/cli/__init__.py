"""The `rubricrl` command (rubricrl.cli.main)."""
