"""MCP both ways. The client side: how to reach a server (``config.py``), long-lived
sessions on a background loop (``sessions.py``) and importing a server's tools
(``importer.py``); the ``mcp`` executor (``executors/mcp.py``) calls through them.
The server side (``server.py``) serves a registry it is handed to MCP clients.

Nothing here is imported by ``import tooldb``: the client parts load when an ``mcp``
tool is added or called, the server when ``tooldb mcp`` starts.
"""
