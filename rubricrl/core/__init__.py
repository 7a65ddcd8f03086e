"""The ground floor: errors, atomic writes, the strict JSON/JSONL and YAML readers, the task format with its schema
guard, the one prompt template and the schema notation, the entry behaviour of every command, Markdown tables.
Imports nothing else of rubricrl."""
