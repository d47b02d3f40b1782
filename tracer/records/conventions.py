"""Span names and attribute keys: OTel GenAI semantic conventions where they exist, ``looptrace.*`` where not.

The GenAI conventions have no span for one iteration of an agent loop, so a step is a
``looptrace.step`` span between ``invoke_agent`` and its ``chat`` / ``execute_tool`` children. A step
that is exactly one model call (a client instrumentor's step) has no span of its own: its ``chat`` span
says so (``looptrace.step.of_call``) and carries the step's thought, and its tool calls sit under the run.
"""

from __future__ import annotations

# Operation names (gen_ai.operation.name) and span names.
OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
STEP_SPAN = "looptrace.step"

# OTel GenAI semantic conventions.
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

# Values of error.type on execute_tool spans that are the evidence of hallucinated tool calls.
TOOL_NOT_FOUND = "tool_not_found"
INVALID_ARGUMENTS = "invalid_arguments"

# A step event (steps.events) where a trace lost the step's model call (its span never arrived: a span batch
# the client dropped); the step is read from the next call's request, its model call marked missing.
MODEL_CALL_MISSING = "model_call_missing"

# looptrace's own namespace.
RUN_ID = "looptrace.run.id"
RUN_PARENT_ID = "looptrace.run.parent_id"
RUN_TASK = "looptrace.run.task"
RUN_SOURCE = "looptrace.run.source"
RUN_STRATEGY = "looptrace.run.strategy"
RUN_STATUS = "looptrace.run.status"
RUN_ANSWER = "looptrace.run.answer"
RUN_ERROR = "looptrace.run.error"
RUN_REPLAY_OF = "looptrace.run.replay_of"
RUN_FORKED_FROM = "looptrace.run.forked_from"
RUN_FORK_STEP = "looptrace.run.fork_step"
RUN_PID = "looptrace.run.pid"
RUN_CONFIG = "looptrace.run.config"
RUN_GUARD = "looptrace.run.guard"  # the Guard a run was held to: its limits and rule thresholds (JSON)
STEP_INDEX = "looptrace.step.index"
STEP_THOUGHT = "looptrace.step.thought"
STEP_CONTEXT_TOKENS = "looptrace.step.context_tokens"
STEP_COST = "looptrace.step.cost_usd"
STEP_OF_CALL = "looptrace.step.of_call"  # on a chat span: this call is its step too (same interval, usage, cost)
TOOL_CALL_INDEX = "looptrace.tool.call_index"
TOOL_IS_ERROR = "looptrace.tool.is_error"
TOOL_RESULT_BYTES = "looptrace.tool.result_bytes"  # set when content is not recorded
LLM_PARAMS = "looptrace.request.params"
LLM_SYSTEM_SHA = "looptrace.request.system_sha"
LLM_SYSTEM = "looptrace.request.system"
LLM_TOOLS_SHA = "looptrace.request.tools_sha"
LLM_TOOLS = "looptrace.request.tools"
LLM_BASE_CALL = "looptrace.request.base_call_id"
LLM_MESSAGES_KEEP = "looptrace.request.messages_keep"
LLM_MESSAGES_DROP = "looptrace.request.messages_drop"
LLM_MESSAGES_APPEND = "looptrace.request.messages_append"
LLM_REQUEST_SHA = "looptrace.request.sha"
LLM_RESPONSE = "looptrace.response"
LLM_COST = "looptrace.usage.cost_usd"
LLM_RETRIES = "looptrace.llm.retries"
LLM_ERROR = "looptrace.llm.error"

# Attributes whose (possibly large) values are moved into typed columns instead of being kept a
# second time in spans.attributes. Everything else a span carries stays in spans.attributes.
MOVED_TO_COLUMNS = frozenset(
    {
        STEP_THOUGHT,
        GEN_AI_TOOL_CALL_ARGUMENTS,
        GEN_AI_TOOL_CALL_RESULT,
        LLM_SYSTEM,
        LLM_TOOLS,
        LLM_MESSAGES_APPEND,
        LLM_RESPONSE,
        LLM_PARAMS,
        RUN_TASK,
        RUN_ANSWER,
        RUN_CONFIG,
    }
)
