"""The model tools over MCP: output models, tools, the server, the stdio wire and its fast lane."""
