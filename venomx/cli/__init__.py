"""The command line: verb commands generated from the manifest, plus serve/attach/mcp."""
