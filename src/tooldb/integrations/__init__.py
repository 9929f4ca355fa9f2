"""tooldb as the tool layer under agent frameworks, in the framework's own process.

One module per framework, each behind its extra and importing its framework only when
the module itself is imported (``import tooldb`` loads none of them):

- ``tooldb.integrations.langchain.as_tools``: LangChain ``BaseTool``s (LangGraph's
  prebuilt agents and ``ToolNode``), extra ``tooldb[langchain]``;
- ``tooldb.integrations.openai_agents.as_tools``: OpenAI Agents SDK ``FunctionTool``s,
  extra ``tooldb[openai-agents]``;
- ``tooldb.integrations.pydantic_ai.toolset``: a Pydantic AI toolset, extra
  ``tooldb[pydantic-ai]``.

All three share ``bridge.ToolBridge``: which tools are offered (selected for a task or
named), binding by tooldb, and every call recorded under a tooldb run that carries the
task (docs/integrations.md).
"""
